import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { AuthContext } from './auth-context.js';
import { AppError } from './errors.js';

/**
 * A route is data: method, path, schemas, auth scope and deprecation sit next to the
 * handler. Shared middleware enforces them, and the OpenAPI document is built from
 * the same objects, so what is validated is what is documented.
 */

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * - public: no key needed (health, metrics, the OpenAPI document).
 * - project: any valid key; the request acts in the resolved project.
 * - org: an org-wide key; project-scoped keys get 403.
 */
export type AuthScope = 'public' | 'project' | 'org';

export interface Deprecation {
  /** The instant the route became deprecated (RFC 9745 `Deprecation`). */
  deprecatedAt: Date;
  /** The instant after which the route answers 410 (RFC 8594 `Sunset`). */
  sunsetAt: Date;
  /** Method and path template of the successor, e.g. `PATCH /org/projects/{id}`. */
  successor: { method: HttpMethod; path: string };
}

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Response headers documented in OpenAPI, by name. */
  headers?: Record<string, { description: string; schema: z.ZodType }>;
  /** The media type of the body, or each one it can be (default application/json). */
  contentType?: string | string[];
}

type AnyObject = z.ZodObject<z.ZodRawShape>;
type Out<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface HandlerContext<P, Q, B> {
  params: Out<P>;
  query: Out<Q>;
  body: Out<B>;
  /** The authenticated caller; throws on public routes. */
  readonly auth: AuthContext;
  req: Request;
  res: Response;
  log: Logger;
}

export type RouteResult =
  | { kind: 'json'; status: number; body: unknown; headers?: Record<string, string> }
  | { kind: 'empty'; status: number; headers?: Record<string, string> }
  | { kind: 'handled' };

export interface RouteDef<
  P extends AnyObject | undefined = AnyObject | undefined,
  Q extends AnyObject | undefined = AnyObject | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
> {
  method: HttpMethod;
  /** OpenAPI-style template: `/org/projects/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthScope;
  params?: P;
  query?: Q;
  body?: B;
  /**
   * 'json' (default): parsed and validated against `body`. 'raw' (any media type but
   * JSON) and 'multipart' (multipart/form-data only): left unread on `req`, for the
   * handler to stream on (fs write_file and uploads).
   */
  bodyType?: 'json' | 'raw' | 'multipart';
  /**
   * A 'multipart' route that also takes this JSON body (POST /deployments: a git source
   * needs no file). Documented, and let through to the handler, which validates it.
   */
  jsonAlternative?: z.ZodType;
  responses: Record<number, ResponseSpec>;
  deprecation?: Deprecation;
  handler: (ctx: HandlerContext<P, Q, B>) => Promise<RouteResult> | RouteResult;
}

/** Keeps the generic types of a route while erasing them for the route table. */
export function defineRoute<
  P extends AnyObject | undefined = undefined,
  Q extends AnyObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(def: RouteDef<P, Q, B>): RouteDef {
  return def;
}

export const json = (body: unknown, status = 200, headers?: Record<string, string>): RouteResult => ({
  kind: 'json',
  status,
  body,
  ...(headers ? { headers } : {}),
});

export const noContent = (): RouteResult => ({ kind: 'empty', status: 204 });

/** Express path syntax for an OpenAPI template: `{id}` → `:id`. */
export function expressPath(template: string): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}

/** Fills an OpenAPI template with values, percent-encoding each. */
export function fillPath(template: string, values: Record<string, string>): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new AppError(500, 'internal_error', `missing path value ${name}`);
    return encodeURIComponent(value);
  });
}
