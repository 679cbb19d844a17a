import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { defineRoute, json, type RouteDef } from '../../http/route.js';

/**
 * GET /status, which the Kernel CLI's `kernel status` calls with no key (a bare HTTP
 * client), then GET /health (routes.ts). It reads /status as {status, groups[{name, status,
 * components[{name, status}]}]} and prints it; only when /status answers non-2xx does it
 * try /health, to tell "responding but /status is unavailable" from "down". So /status
 * answers 200 whatever the state, with the state in the body.
 */

const componentStatus = z
  .enum(['operational', 'degraded_performance', 'partial_outage', 'full_outage', 'maintenance'])
  .describe('The status words the Kernel CLI and dashboard show');

const statusSchema = z
  .object({
    status: componentStatus.describe('The worst of the components'),
    groups: z
      .array(
        z.object({
          name: z.string(),
          status: componentStatus,
          components: z.array(z.object({ name: z.string(), status: componentStatus })),
        }),
      )
      .describe('One group, Browserplane: its API and its database'),
  })
  .meta({ id: 'ServiceStatus' });

type ComponentStatus = z.infer<typeof componentStatus>;

/** Worst first: the overall status is the first of these that any component has. */
const SEVERITY: ComponentStatus[] = ['full_outage', 'partial_outage', 'degraded_performance', 'maintenance', 'operational'];

const DATABASE_PING_MS = 2000;

async function databaseStatus(deps: AppDeps): Promise<ComponentStatus> {
  const supervised = deps.databaseSupervision?.();
  if (supervised?.state === 'failed') return 'full_outage';
  if (supervised?.state === 'restarting') return 'partial_outage';
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), DATABASE_PING_MS)));
  try {
    const answered = await Promise.race([deps.db.query('SELECT 1').then(() => 'ok' as const), timeout]);
    return answered === 'ok' ? 'operational' : 'degraded_performance';
  } catch (error) {
    deps.log.warn({ err: error }, 'status: the database did not answer');
    return 'full_outage';
  } finally {
    clearTimeout(timer);
  }
}

/** `lifecycle.draining`: the service is shutting down (routes.ts's Lifecycle). */
export function statusRoutes(deps: AppDeps, lifecycle: { readonly draining: boolean }): RouteDef[] {
  const tags = ['Operations'];
  return [
    defineRoute({
      method: 'get',
      path: '/status',
      operationId: 'serviceStatus',
      summary: 'Operational status, as the Kernel CLI’s `kernel status` reads it',
      description: 'Always 200 with the state in the body: maintenance while the service shuts down, full_outage when Postgres does not answer.',
      tags,
      auth: 'public',
      responses: { 200: { description: 'The status of each component', schema: statusSchema } },
      handler: async () => {
        const api: ComponentStatus = lifecycle.draining ? 'maintenance' : 'operational';
        const components = [
          { name: 'API', status: api },
          { name: 'Database', status: await databaseStatus(deps) },
        ];
        const worst = SEVERITY.find((level) => components.some((c) => c.status === level)) ?? 'operational';
        return json({ status: worst, groups: [{ name: 'Browserplane', status: worst, components }] } satisfies z.infer<typeof statusSchema>);
      },
    }),
  ];
}
