import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Options } from 'pino-http';
import type { AuthContext } from './auth-context.js';

/**
 * One access log line per request, at info: method, route pattern, status, duration,
 * request id and project. Only what identifies the call: never headers or bodies, and
 * never the query string, which carries tokens (`?token=` on live view, CDP, WebDriver,
 * and the agents' profile, telemetry and extension doors).
 */

/** Probes a load balancer or Prometheus sends every few seconds: logged at debug, not info. */
const PROBE_PATHS = new Set(['/healthz', '/health', '/readyz', '/metrics']);

type Res = ServerResponse & { locals?: { routeTemplate?: unknown; auth?: AuthContext } };

/** The path without its query string (nor fragment): what may be logged of a URL. */
export function loggablePath(url: string | undefined): string {
  return (url ?? '').split(/[?#]/, 1)[0] ?? '';
}

function routeOf(req: IncomingMessage, res: Res): string {
  const template = res.locals?.routeTemplate;
  return typeof template === 'string' ? template : loggablePath(req.url);
}

/** The fields the access line adds to pino-http's (req: id, method, path; res: statusCode; responseTime). */
export function accessFields(req: IncomingMessage, res: Res): { route: string; projectId?: string; durationMs?: number } {
  const projectId = res.locals?.auth?.project?.id;
  return { route: routeOf(req, res), ...(projectId ? { projectId } : {}) };
}

export function accessLogOptions(): Pick<Options, 'customLogLevel' | 'customSuccessMessage' | 'customErrorMessage' | 'customSuccessObject' | 'customErrorObject'> {
  const message = (req: IncomingMessage, res: Res, ms?: number) => `${req.method ?? '?'} ${routeOf(req, res)} ${res.statusCode}${ms === undefined ? '' : ` ${ms} ms`}`;
  const object = (req: IncomingMessage, res: Res, val: Record<string, unknown>) => ({ ...val, ...accessFields(req, res), durationMs: val.responseTime });
  return {
    customLogLevel: (req, res, error) => {
      if (error || res.statusCode >= 500) return 'error';
      return PROBE_PATHS.has(loggablePath(req.url)) && res.statusCode < 400 ? 'debug' : 'info';
    },
    customSuccessMessage: (req, res, ms) => message(req, res, ms),
    customErrorMessage: (req, res) => message(req, res),
    customSuccessObject: (req, res, val: Record<string, unknown>) => object(req, res, val),
    customErrorObject: (req, res, _error, val: Record<string, unknown>) => object(req, res, val),
  };
}
