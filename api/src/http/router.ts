import type { Express, Request, RequestHandler, Response } from 'express';
import { match } from 'path-to-regexp';
import type { AppDeps } from '../app-deps.js';
import type { AuthContext } from './auth-context.js';
import { authenticate, PROJECT_HEADER, PROJECT_NAME_HEADER } from './authenticate.js';
import { CallWatch, isAuditedRoute, type CallRecorder } from './call-audit.js';
import { applyDeprecation } from './deprecation.js';
import { AppError } from './errors.js';
import { expressPath, type HandlerContext, type RouteDef, type RouteResult } from './route.js';
import { validateRequest } from './validate.js';

/**
 * Mounts every route with the shared chain: deprecation → auth → body → validation → handler.
 * With `audit`, every state-changing call by a known key is handed to it once answered.
 */
export function mountRoutes(app: Express, routes: RouteDef[], deps: AppDeps, audit?: CallRecorder): void {
  for (const route of routes) {
    const audited = audit !== undefined && isAuditedRoute(route);
    const handler: RequestHandler = async (req, res) => {
      res.locals.routeTemplate = route.path;
      res.locals.operationId = route.operationId;
      const watch = audited ? new CallWatch(route, req, res, audit, deps.clock.now()) : undefined;
      const result = await runRoute(route, req, res, deps, watch);
      watch?.answered(result);
      sendResult(res, result);
    };
    app[route.method](expressPath(route.path), handler);
  }
  app.use(unmatched(routes));
}

async function runRoute(route: RouteDef, req: Request, res: Response, deps: AppDeps, watch?: CallWatch): Promise<RouteResult> {
  const rawParams = req.params as Record<string, string>;
  if (route.deprecation) applyDeprecation(route.deprecation, deps.clock.now(), rawParams, res);

  let auth: AuthContext | undefined;
  if (route.auth !== 'public') {
    auth = await authenticate(
      deps.db,
      deps.clock,
      {
        authorization: req.headers.authorization,
        projectHeader: req.get(PROJECT_HEADER),
        projectNameHeader: req.get(PROJECT_NAME_HEADER),
      },
      route.auth,
      deps.authCache,
      watch && ((key) => watch.identified(key)),
    );
    watch?.actsIn(auth.project?.id ?? null);
    res.locals.auth = auth; // for what runs when the answer is out (browser-telemetry's api_call)
  }
  const jsonAlternative = route.jsonAlternative !== undefined && Boolean(req.is(['application/json', 'application/*+json']));
  if (route.bodyType === 'raw' || (route.bodyType === 'multipart' && !jsonAlternative)) checkStreamedBody(req, route.bodyType);
  const parsed = validateRequest({
    params: { schema: route.params, value: rawParams },
    query: { schema: route.query, value: req.query },
    body: { schema: route.body, value: route.body ? jsonBody(req) : undefined },
  });
  const ctx: HandlerContext<unknown, unknown, unknown> = {
    params: parsed.params as never,
    query: parsed.query as never,
    body: parsed.body as never,
    get auth(): AuthContext {
      if (!auth) throw new Error(`route ${route.operationId} is public and has no caller`);
      return auth;
    },
    req,
    res,
    log: req.log,
  };
  return route.handler(ctx);
}

/**
 * The JSON body of a request, `{}` when there is none (the SDK sends an empty body or
 * `null` for optional bodies). A body in another media type is a 415.
 */
function jsonBody(req: Request): unknown {
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (hasBody && !req.is(['application/json', 'application/*+json'])) {
    throw new AppError(
      415,
      'unsupported_media_type',
      `Send the body as application/json (got ${req.headers['content-type'] ?? 'no Content-Type'})`,
    );
  }
  const body: unknown = req.body;
  return body === undefined || body === null ? {} : body;
}

/** A body the handler streams: JSON was already consumed by express.json, so it is a 415. */
function checkStreamedBody(req: Request, type: 'raw' | 'multipart'): void {
  const wrong = type === 'multipart' ? !req.is('multipart/form-data') : Boolean(req.is(['application/json', 'application/*+json']));
  if (wrong) {
    const wanted = type === 'multipart' ? 'multipart/form-data' : 'application/octet-stream';
    throw new AppError(415, 'unsupported_media_type', `Send the body as ${wanted} (got ${req.headers['content-type'] ?? 'no Content-Type'})`);
  }
}

function sendResult(res: Response, result: RouteResult): void {
  if (result.kind === 'handled') return;
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  if (result.kind === 'empty') {
    res.status(result.status).end();
    return;
  }
  res.status(result.status).json(result.body);
}

/**
 * After every route: 405 with `Allow` when the path exists under another method, else 404.
 * Parameters are not decoded here: only the shape of the path matters, and decoding
 * could throw on bad percent-encoding.
 */
function unmatched(routes: RouteDef[]): RequestHandler {
  const matchers = routes.map((r) => ({
    method: r.method.toUpperCase(),
    test: match(expressPath(r.path), { decode: false }),
  }));
  return (req, res, next) => {
    const allowed = new Set(matchers.filter((m) => m.test(req.path) !== false).map((m) => m.method));
    if (allowed.has('GET')) allowed.add('HEAD');
    if (allowed.size) {
      res.setHeader('Allow', [...allowed].sort().join(', '));
      next(new AppError(405, 'method_not_allowed', `${req.method} is not allowed on ${req.path}; allowed: ${[...allowed].sort().join(', ')}`));
      return;
    }
    next(new AppError(404, 'route_not_found', `No route ${req.method} ${req.path}`));
  };
}
