import type { RequestHandler } from 'express';
import type { AppDeps } from '../../app-deps.js';
import type { AuthContext } from '../../http/auth-context.js';
import { getSession } from '../browsers/index.js';
import { appendEvents, enabledOn } from './service.js';

/**
 * Calls the API answered on a session (a route under /browsers/{id}, telemetry's own
 * routes aside) become events on it, once the answer is out, off the request's path, as
 * Kernel splits them: calls that drive the browser (computer input, Playwright, curl) are
 * `control` api_call events; calls that manage it (files, processes, logs, recordings,
 * extensions, the session's own settings) are `platform` platform_api_call events, off by
 * default. Recorded only for a caller authorised in the session's own project (the router
 * leaves the resolved auth in res.locals), so a request with another project's key, which
 * gets 404, writes nothing into this session.
 */
export function recordBrowserApiCalls(deps: AppDeps): RequestHandler {
  return (req, res, next) => {
    if (!req.path.startsWith('/browsers/')) return next();
    const started = performance.now();
    res.once('finish', () => {
      const auth = res.locals.auth as AuthContext | undefined;
      const template = res.locals.routeTemplate as string | undefined;
      const operationId = res.locals.operationId as string | undefined;
      if (!auth?.project || !template?.startsWith('/browsers/{') || template.includes('/telemetry/') || !operationId) return;
      const idOrName = safeDecode(req.path.split('/')[2] ?? '');
      const scope = { orgId: auth.orgId, projectId: auth.project.id };
      const data = { operation_id: operationId, method: req.method, path: template, status: res.statusCode, duration_ms: Math.round(performance.now() - started), request_id: typeof req.id === 'string' || typeof req.id === 'number' ? String(req.id) : '' };
      void (async () => {
        const session = await getSession(deps.db, scope, idOrName, true);
        const category = drivesTheBrowser(operationId) ? 'control' : 'platform';
        if (!enabledOn(session).has(category)) return;
        const ts = Math.round((performance.timeOrigin + performance.now()) * 1000);
        const type = category === 'control' ? 'api_call' : 'platform_api_call';
        await appendEvents(deps, session, [{ category, type, ts, source: { kind: 'kernel_api', event: operationId }, data }]);
      })().catch((error: unknown) => {
        // A session that does not exist (the call was a 404) has nothing to record.
        if ((error as { status?: number }).status !== 404) deps.log.warn({ err: error, operationId }, 'recording an api_call telemetry event failed');
      });
    });
    next();
  };
}

/** Computer input, Playwright execution and curl act in the browser as an agent would; the rest manage the session. */
export function drivesTheBrowser(operationId: string): boolean {
  return operationId.startsWith('computer') || operationId === 'browserPlaywrightExecute' || operationId === 'browserCurl';
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
