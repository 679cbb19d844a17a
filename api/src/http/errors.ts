/**
 * The one error family. Handlers throw these; the error middleware turns them into
 * `{code, message, details, inner_error}` with the status and headers they carry.
 * Codes are stable and machine-readable: clients may switch on them.
 */

export interface ErrorDetail {
  code: string;
  message: string;
  /** Where the problem is, e.g. `body.name` or `query.limit`. */
  field?: string;
}

export interface AppErrorOptions {
  details?: ErrorDetail[];
  innerError?: { code: string; message: string };
  headers?: Record<string, string>;
  /** The SDK retries 409, 429 and 5xx; false tells it a retry cannot help. */
  shouldRetry?: boolean;
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class AppError extends Error {
  readonly details: ErrorDetail[];
  readonly innerError: { code: string; message: string } | undefined;
  readonly headers: Record<string, string>;

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.details = options.details ?? [];
    this.innerError = options.innerError;
    this.headers = { ...options.headers };
    if (options.shouldRetry !== undefined) this.headers['x-should-retry'] = String(options.shouldRetry);
    if (options.retryAfterSeconds !== undefined) this.headers['retry-after'] = String(options.retryAfterSeconds);
  }
}

export const badRequest = (code: string, message: string, details?: ErrorDetail[]) =>
  new AppError(400, code, message, details ? { details } : {});

export const validationFailed = (details: ErrorDetail[]) =>
  new AppError(400, 'invalid_request', `The request is invalid: ${details.map((d) => d.message).join('; ')}`, {
    details,
  });

export const unauthorized = (message: string) =>
  new AppError(401, 'unauthorized', message, { headers: { 'www-authenticate': 'Bearer' } });

export const forbidden = (code: string, message: string) => new AppError(403, code, message);

export const notFound = (what: string, id: string) =>
  new AppError(404, 'not_found', `${what} ${JSON.stringify(id)} was not found`);

/** A conflict a retry cannot resolve: duplicate names, resources in use, and the like. */
export const conflict = (code: string, message: string, details?: ErrorDetail[]) =>
  new AppError(409, code, message, { shouldRetry: false, ...(details ? { details } : {}) });

export const gone = (message: string, options: AppErrorOptions = {}) =>
  new AppError(410, 'gone', message, options);
