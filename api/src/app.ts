import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import express, { type Express } from 'express';
import { pinoHttp } from 'pino-http';
import { accessLogOptions, loggablePath } from './http/access-log.js';
import type { AppDeps } from './app-deps.js';
import type { AppServices } from './app-services.js';
import { errorMiddleware } from './http/error-middleware.js';
import { checkQueryEncoding, JSON_MEDIA_TYPES, limitJsonBody, limitJsonDepth, verifyUtf8Body } from './http/input-checks.js';
import { createMetrics } from './http/metrics.js';
import { buildOpenApiDocument } from './http/openapi.js';
import { PAGINATION_HEADERS } from './http/pagination.js';
import type { RouteDef } from './http/route.js';
import { mountRoutes } from './http/router.js';
import { healthRoutes, type Lifecycle } from './modules/health/routes.js';
import { INTERNAL_APP_JOBS, INTERNAL_APP_JOBS_MAX_BODY_BYTES } from './modules/apps/internal-wire.js';
import { apiModules } from './modules/registry.js';
import { API_VERSION } from './version.js';
import { recordBrowserApiCalls } from './modules/browser-telemetry/index.js';
import { publicWsBase } from './modules/browsers/index.js';

export { API_VERSION };

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export interface BuiltApp {
  app: Express;
  routes: RouteDef[];
  lifecycle: Lifecycle;
}

/**
 * The document with its `servers`: this service as the caller reached it (BROWSERPLANE_PUBLIC_URL
 * when set, else the request's validated Host), so a generated client or /docs needs no edit.
 */
function withServer(doc: ReturnType<typeof buildOpenApiDocument>, url: string): object {
  const { openapi: version, info, ...rest } = doc;
  return { openapi: version, info, servers: [{ url, description: 'This service' }], ...rest };
}

/** The HTTP app for the given dependencies; no listening, no global state. */
export function buildApp(deps: AppDeps, services: AppServices): BuiltApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // qs-style parsing: the SDK sends nested objects as tags[k]=v.
  app.set('query parser', 'extended');

  const lifecycle: Lifecycle = { draining: false };
  const metrics = createMetrics(deps.db);
  services.auditLog.registerMetrics(metrics.registry);
  services.pools.registerMetrics(metrics.registry);
  metrics.registry.registerMetric(deps.sessionEnds.counter);
  for (const module of apiModules) module.metrics?.(metrics.registry, deps);
  const routes: RouteDef[] = [];
  routes.push(
    ...healthRoutes(deps, {
      lifecycle,
      metricsText: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
      openapi: (req) => withServer(openapi, publicWsBase(deps, req).replace(/^ws/, 'http')),
    }),
    ...apiModules.flatMap((module) => module.routes(deps, services)),
  );
  // Built once; the route above serves it (the closure runs only after this line).
  const openapi = buildOpenApiDocument(routes, API_VERSION);

  app.use(
    pinoHttp({
      logger: deps.log,
      genReqId: (req, res) => {
        const given = req.headers['x-request-id'];
        const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
        res.setHeader('X-Request-Id', id);
        return id;
      },
      // Path only: query strings may carry tokens.
      serializers: {
        req: (req: IncomingMessage & { id?: unknown }) => ({
          id: req.id,
          method: req.method,
          path: loggablePath(req.url),
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      // One line per request at info (health probes at debug): http/access-log.ts.
      ...accessLogOptions(),
    }),
  );
  app.use(metrics.middleware);
  app.use((_req, res, next) => {
    res.setHeader('Access-Control-Expose-Headers', [...PAGINATION_HEADERS, 'X-Request-Id'].join(', '));
    next();
  });
  // Hostile input: a bad query string or a non-UTF-8 or absurdly deep JSON body is a
  // 400 here, before any route runs (see input-checks.ts for what each prevents).
  app.use(checkQueryEncoding);
  const jsonParser = (limit: number) => [limitJsonBody(limit), express.json({ limit, type: JSON_MEDIA_TYPES, strict: false, verify: verifyUtf8Body })];
  // App Jobs report an action's output (up to the runner's 16 MiB result cap) and log
  // batches: their internal wire (token-authenticated, apps/internal-wire.ts) reads more.
  app.use(INTERNAL_APP_JOBS, ...jsonParser(Math.max(deps.settings.maxBodyBytes, INTERNAL_APP_JOBS_MAX_BODY_BYTES)));
  app.use(...jsonParser(deps.settings.maxBodyBytes));
  app.use(limitJsonDepth);
  app.use(recordBrowserApiCalls(deps));
  mountRoutes(app, routes, deps, services.auditLog);
  app.use(errorMiddleware(deps.log));
  return { app, routes, lifecycle };
}
