import type { ErrorRequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { databaseUnavailable } from '../db/unavailable.js';
import { AppError } from './errors.js';

/** body-parser and raw-body signal their failures with a `type` and a `status`. */
interface ParserError {
  type: string;
  status?: number;
  limit?: number;
  charset?: string;
  encoding?: string;
}

function isParserError(error: unknown): error is ParserError {
  return typeof error === 'object' && error !== null && 'type' in error && typeof error.type === 'string';
}

/** Maps parser failures (which happen before any route runs) into the one error family. */
export function toAppError(error: unknown): AppError | undefined {
  if (error instanceof AppError) return error;
  // The router decodes path parameters before any handler runs; bad percent-encoding
  // (`/org/projects/%E0%A4%A`) is the client's mistake, not an internal error.
  if (error instanceof URIError) {
    return new AppError(400, 'invalid_path', 'The request path is not valid percent-encoded UTF-8');
  }
  if (!isParserError(error)) return undefined;
  switch (error.type) {
    case 'entity.too.large':
      return new AppError(413, 'payload_too_large', `The request body is larger than ${error.limit ?? 'the limit'} bytes`);
    case 'entity.parse.failed':
      return new AppError(400, 'invalid_json', 'The request body is not valid JSON');
    case 'charset.unsupported':
      return new AppError(415, 'unsupported_media_type', `Charset ${error.charset ?? ''} is not supported; send UTF-8`);
    case 'encoding.unsupported':
      return new AppError(415, 'unsupported_media_type', `Content encoding ${error.encoding ?? ''} is not supported`);
    case 'request.aborted':
      return new AppError(400, 'request_aborted', 'The client aborted the request');
    case 'request.size.invalid':
      return new AppError(400, 'invalid_request', 'The request body length does not match Content-Length');
    default:
      return undefined;
  }
}

export function sendError(res: Response, error: AppError, requestId: string): void {
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.status(error.status).json({
    code: error.code,
    message: error.message,
    details: error.details,
    ...(error.innerError ? { inner_error: error.innerError } : {}),
    ...(error.status >= 500 ? { request_id: requestId } : {}),
  });
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const DATABASE_RETRY_AFTER_SECONDS = 1;

/** The one error middleware: AppErrors map as they say; anything else is a 500 with a request id. */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const requestId = typeof req.id === 'string' ? req.id : JSON.stringify(req.id);
    const appError = toAppError(error);
    if (appError) {
      if (appError.status >= 500) log.error({ err: error, requestId }, 'request failed');
      sendError(res, appError, requestId);
      return;
    }
    const unavailable = databaseUnavailable(error);
    if (unavailable) {
      log.warn({ err: error, requestId }, 'request failed: the database is unavailable');
      // A write whose statements may have reached the server before the link broke may
      // have committed: the SDK is told not to repeat it. One that never got a
      // connection, and any read, is safe to retry once the database is back.
      const retrySafe = unavailable.neverSent || SAFE_METHODS.has(req.method);
      sendError(
        res,
        new AppError(503, 'database_unavailable', 'The database is unavailable; retry shortly', {
          retryAfterSeconds: DATABASE_RETRY_AFTER_SECONDS,
          ...(retrySafe ? {} : { shouldRetry: false }),
        }),
        requestId,
      );
      return;
    }
    log.error({ err: error, requestId }, 'unhandled error');
    sendError(
      res,
      new AppError(500, 'internal_error', `Internal error; quote request id ${requestId} when reporting it`, {
        // The SDK retries 5xx; a retried write could apply twice, a retried read cannot.
        ...(SAFE_METHODS.has(req.method) ? {} : { shouldRetry: false }),
      }),
      requestId,
    );
  };
}
