import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';

export interface Lifecycle {
  /** True once shutdown has begun: readiness fails so load balancers stop sending. */
  draining: boolean;
}

const tags = ['Operations'];

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export function healthRoutes(
  deps: AppDeps,
  extra: { lifecycle: Lifecycle; metricsText: () => Promise<{ contentType: string; body: string }>; openapi: () => unknown },
): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/healthz',
      operationId: 'healthz',
      summary: 'Liveness: the process is serving',
      tags,
      auth: 'public',
      responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
      handler: () => json({ status: 'ok' }),
    }),
    defineRoute({
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness: Postgres is reachable and the service is not shutting down',
      tags,
      auth: 'public',
      responses: { 200: { description: 'Ready', schema: z.object({ status: z.literal('ready') }) }, ...errorResponses(503) },
      handler: async () => {
        if (extra.lifecycle.draining) throw new AppError(503, 'shutting_down', 'The service is shutting down');
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
      handler: () => json(extra.openapi()),
    }),
  ];
}
