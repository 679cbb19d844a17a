import type { Request } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import type { DatabaseSupervision } from '../../db/postgres-supervisor.js';
import { defineRoute, json, type RouteDef, type RouteResult } from '../../http/route.js';
import { errorSchema } from '../../http/schemas.js';
import { statusRoutes } from './status-routes.js';

export interface Lifecycle {
  /** True once shutdown has begun: readiness fails so load balancers stop sending. */
  draining: boolean;
}

const tags = ['Operations'];

const budget = {
  failures_in_window: z.number().int().describe('Failures (unexpected exits, failed restarts) within the window'),
  failure_limit: z.number().int().describe('Failures within the window at which it is given up'),
  window_seconds: z.number().describe('The window'),
};

/** What the embedded Postgres's supervisor is doing (postgres-supervisor.ts). */
const databaseSupervisionSchema = z
  .discriminatedUnion('state', [
    z.object({ state: z.literal('running'), restarts: z.number().int() }),
    z.object({
      state: z.literal('restarting'),
      attempt: z.number().int().describe('The restart attempt under way or next, from 1'),
      next_attempt_in_ms: z.number().int().describe('0 while an attempt is starting Postgres'),
      reason: z.string().describe('How the server exited, or why the last attempt failed'),
      down_since: z.string(),
      ...budget,
    }),
    z.object({ state: z.literal('failed'), reason: z.string(), failed_at: z.string(), ...budget }),
    z.object({ state: z.literal('stopped') }),
  ])
  .meta({ id: 'DatabaseSupervision' });

/** The error body, with what the embedded Postgres's supervisor is doing. */
const probeErrorSchema = errorSchema
  .extend({ database: databaseSupervisionSchema.optional().describe('Embedded Postgres only: what its supervisor is doing') })
  .meta({ id: 'ProbeError' });

const probeError = (code: string, message: string, database: DatabaseSupervision): RouteResult =>
  json({ code, message, details: [], database } satisfies z.input<typeof probeErrorSchema>, 503, {
    // While restarting, about when to look again; given up, not soon.
    'retry-after': String(database.state === 'restarting' ? Math.max(1, Math.ceil(database.next_attempt_in_ms / 1000)) : 30),
  });

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function liveness(deps: AppDeps): RouteResult {
  const database = deps.databaseSupervision?.();
  if (database?.state === 'failed') {
    return probeError(
      'database_failed',
      `The embedded Postgres could not be restarted (${database.failures_in_window} failures within ${database.window_seconds} s); restart the service`,
      database,
    );
  }
  return json({ status: 'ok' });
}

export function healthRoutes(
  deps: AppDeps,
  extra: { lifecycle: Lifecycle; metricsText: () => Promise<{ contentType: string; body: string }>; openapi: (req: Request) => unknown },
): RouteDef[] {
  return [
    ...['/healthz', '/health'].map((path) =>
      defineRoute({
        method: 'get',
        path,
        operationId: path === '/healthz' ? 'healthz' : 'health',
        summary:
          path === '/healthz'
            ? 'Liveness: the process is serving, and its embedded Postgres has not been given up'
            : 'Liveness under the name the Kernel CLI probes (kernel status): the same answer as /healthz',
        tags,
        auth: 'public',
        responses: {
          200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) },
          503: { description: 'The embedded Postgres could not be restarted: restart the service', schema: probeErrorSchema },
        },
        handler: () => liveness(deps),
      }),
    ),
    ...statusRoutes(deps, extra.lifecycle),
    defineRoute({
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness: Postgres is reachable and the service is not shutting down',
      tags,
      auth: 'public',
      responses: {
        200: { description: 'Ready', schema: z.object({ status: z.literal('ready') }) },
        503: {
          description: 'Not ready: shutting down, or Postgres unreachable (with the embedded one, whether it is restarting or given up)',
          schema: probeErrorSchema,
        },
      },
      handler: async () => {
        if (extra.lifecycle.draining) throw new AppError(503, 'shutting_down', 'The service is shutting down');
        const database = deps.databaseSupervision?.();
        if (database?.state === 'failed') {
          return probeError('database_failed', 'The embedded Postgres could not be restarted; the service needs a restart', database);
        }
        if (database?.state === 'restarting') {
          const when = database.next_attempt_in_ms > 0 ? `next attempt in ${database.next_attempt_in_ms} ms` : 'starting now';
          return probeError('database_restarting', `The embedded Postgres is restarting (attempt ${database.attempt}, ${when})`, database);
        }
        try {
          await withTimeout(deps.db.query('SELECT 1'), 2000);
        } catch (error) {
          throw new AppError(503, 'database_unreachable', 'Postgres is not reachable', { cause: error });
        }
        return json({ status: 'ready' });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics',
      tags,
      auth: 'public',
      responses: { 200: { description: 'Metrics in the Prometheus text format', schema: z.string(), contentType: 'text/plain' } },
      handler: async ({ res }) => {
        const { contentType, body } = await extra.metricsText();
        res.setHeader('Content-Type', contentType);
        res.status(200).send(body);
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/openapi.json',
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      tags,
      auth: 'public',
      responses: { 200: { description: 'The document', schema: z.object({}).passthrough() } },
      handler: ({ req }) => json(extra.openapi(req)),
    }),
  ];
}
