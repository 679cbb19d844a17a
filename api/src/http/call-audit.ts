import { performance } from 'node:perf_hooks';
import type { Request, Response } from 'express';
import type { RouteDef, RouteResult } from './route.js';

/**
 * What the route chain tells the audit log about one state-changing call. Only what the
 * chain itself knows: the route, the key that called, the status. Never a body and
 * never a query string (either may carry secrets).
 */
export interface ApiCall {
  orgId: string;
  /** The project the call acted in; null on org routes or when refused before one was resolved. */
  projectId: string | null;
  /** When the request was received (the app's clock). */
  timestamp: Date;
  method: string;
  /** The raw path, without the query string. */
  path: string;
  /** The route template, e.g. `/proxies/{id}`. */
  route: string;
  /** The route's family (its first OpenAPI tag, in snake case: `browser_pools`). */
  service: string;
  resourceId: string | null;
  status: number;
  durationMs: number;
  requestId: string;
  keyId: string;
  keyName: string;
  clientIp: string;
  domain: string;
  userAgent: string;
}

/** Where the chain hands calls: it must return at once (the audit log batches its writes). */
export interface CallRecorder {
  record(call: ApiCall): void;
}

/** The API key a request presented, once it is known to exist (even deleted or expired). */
export interface IdentifiedKey {
  orgId: string;
  id: string;
  name: string;
  projectId: string | null;
}

/** Reads are not recorded, nor routes without a caller (health, side doors with tokens of their own). */
export const isAuditedRoute = (route: RouteDef): boolean => route.auth !== 'public' && route.method !== 'get';

/** A status for a call whose client went away before the answer was sent (as nginx logs it). */
export const CLIENT_CLOSED_STATUS = 499;

const MAX_PATH = 2048;
const MAX_USER_AGENT = 512;
const RESOURCE_ID = /^[A-Za-z0-9._:@-]{1,255}$/;

/**
 * Follows one call through the chain: the key once authentication identified it, the
 * project once resolved, the resource id once the handler answered, and records the call
 * when the response has finished (or the client went away). A call whose key was never
 * identified (no key, an unknown key) belongs to no org and is not recorded.
 */
export class CallWatch {
  private key: IdentifiedKey | undefined;
  private projectId: string | null = null;
  private resourceId: string | null;
  private readonly started = performance.now();
  private recorded = false;

  constructor(
    private readonly route: RouteDef,
    private readonly req: Request,
    private readonly res: Response,
    private readonly recorder: CallRecorder,
    private readonly receivedAt: Date,
  ) {
    this.resourceId = firstParam(route, req);
    res.once('finish', () => this.record(res.statusCode));
    res.once('close', () => this.record(res.writableFinished ? res.statusCode : CLIENT_CLOSED_STATUS));
  }

  identified(key: IdentifiedKey): void {
    this.key = key;
    this.projectId = key.projectId;
  }

  actsIn(projectId: string | null): void {
    if (projectId) this.projectId = projectId;
  }

  /** A create names its new resource only in its answer (`id`, or `session_id` for browsers). */
  answered(result: RouteResult): void {
    if (this.resourceId !== null || result.kind !== 'json' || typeof result.body !== 'object' || result.body === null) return;
    const body = result.body as Record<string, unknown>;
    const id = body.id ?? body.session_id;
    if (typeof id === 'string' && RESOURCE_ID.test(id)) this.resourceId = id;
  }

  private record(status: number): void {
    if (this.recorded || !this.key) return;
    this.recorded = true;
    const { req } = this;
    this.recorder.record({
      orgId: this.key.orgId,
      projectId: this.projectId,
      timestamp: this.receivedAt,
      method: req.method,
      path: req.path.slice(0, MAX_PATH),
      route: this.route.path,
      service: serviceOf(this.route),
      resourceId: this.resourceId,
      status,
      durationMs: Math.max(0, Math.round(performance.now() - this.started)),
      requestId: typeof req.id === 'string' || typeof req.id === 'number' ? String(req.id) : '',
      keyId: this.key.id,
      keyName: this.key.name,
      clientIp: req.socket.remoteAddress ?? '',
      domain: req.hostname ?? '',
      userAgent: (req.get('user-agent') ?? '').slice(0, MAX_USER_AGENT),
    });
  }
}

/** The first path parameter names the resource acted on (`/browsers/{id}/fs/…`: the browser). */
function firstParam(route: RouteDef, req: Request): string | null {
  const name = /\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(route.path)?.[1];
  const value = name ? (req.params as Record<string, string | undefined>)[name] : undefined;
  return value ? value.slice(0, 255) : null;
}

function serviceOf(route: RouteDef): string {
  const tag = route.tags[0] ?? 'api';
  return tag.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '');
}
