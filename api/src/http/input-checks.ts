import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import { sendError } from './error-middleware.js';
import { AppError } from './errors.js';

/**
 * Checks on raw input that the parsers let through. Each answers a 4xx before any
 * route runs, so a hostile request changes nothing.
 */

export const JSON_MEDIA_TYPES = ['application/json', 'application/*+json'];

/**
 * The body limit of JSON routes, enforced as the bytes arrive. express.json answers 413
 * only after reading off the entire request, so a client streaming a chunked body (or a
 * huge Content-Length) without end held the connection, unanswered, until the request
 * deadline. Here the 413 goes out at once, with `Connection: close`, and the socket is
 * closed once it is written. express.json keeps its own check behind this one.
 */
export function limitJsonBody(limit: number): RequestHandler {
  return (req, res, next) => {
    // Already read by a parser mounted for its path (body-parser marks it).
    if (!req.is(JSON_MEDIA_TYPES) || (req as { _body?: boolean })._body) return next();
    const declared = Number(req.headers['content-length']);
    if (declared > limit) return refuseOversized(req, res, limit);
    let received = 0;
    const count = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) {
        req.off('data', count);
        refuseOversized(req, res, limit);
      }
    };
    // Counted alongside the parser, never ahead of it: the listener goes on when the
    // parser adds its own, so no chunk can flow before the parser listens.
    const watch = (event: string | symbol) => {
      if (event !== 'data') return;
      req.off('newListener', watch);
      req.on('data', count);
    };
    req.on('newListener', watch);
    next();
  };
}

function refuseOversized(req: Request, res: Response, limit: number): void {
  if (res.headersSent) return;
  res.setHeader('Connection', 'close');
  sendError(res, new AppError(413, 'payload_too_large', `The request body is larger than ${limit} bytes`), typeof req.id === 'string' ? req.id : JSON.stringify(req.id));
  res.once('finish', () => req.socket.destroy());
}

/** Deeper than any body of ours needs (chrome_policy nests a few levels). */
export const MAX_JSON_DEPTH = 64;

/**
 * `verify` of express.json: the body must be UTF-8. The decoder would otherwise turn
 * invalid bytes into U+FFFD and store a name the client never sent.
 */
export function verifyUtf8Body(_req: IncomingMessage, _res: unknown, body: Buffer, encoding: string): void {
  if (encoding.toLowerCase() === 'utf-8' && !isUtf8(body)) {
    throw new AppError(400, 'invalid_json', 'The request body is not valid UTF-8', {
      details: [{ code: 'invalid_utf8', field: 'body', message: 'body: not valid UTF-8' }],
    });
  }
}

/**
 * Refuses JSON nested deeper than MAX_JSON_DEPTH. JSON.parse copes with any depth, but
 * JSON.stringify (validation of chrome_policy, pg writing jsonb, logging) overflows the
 * stack at about 10,000 levels and would answer 500. Walked without recursion.
 */
export const limitJsonDepth: RequestHandler = (req, _res, next) => {
  const body: unknown = req.body;
  if (typeof body !== 'object' || body === null) return next();
  const stack: Array<{ value: object; depth: number }> = [{ value: body, depth: 1 }];
  while (stack.length) {
    const { value, depth } = stack.pop()!;
    if (depth > MAX_JSON_DEPTH) {
      return next(
        new AppError(400, 'invalid_json', `The request body is nested deeper than ${MAX_JSON_DEPTH} levels`, {
          details: [{ code: 'too_deep', field: 'body', message: `body: nested deeper than ${MAX_JSON_DEPTH} levels` }],
        }),
      );
    }
    for (const child of Object.values(value)) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child as object, depth: depth + 1 });
    }
  }
  next();
};

/**
 * The query string must be valid percent-encoded UTF-8. The query parser leaves a bad
 * sequence (`%C3%28`, `%zz`) as literal text, so a filter would silently match nothing
 * instead of telling the client its request is broken.
 */
export const checkQueryEncoding: RequestHandler = (req, _res, next) => {
  const url = req.originalUrl;
  const start = url.indexOf('?');
  if (start === -1) return next();
  try {
    decodeURIComponent(url.slice(start + 1).replace(/\+/g, ' '));
  } catch {
    return next(
      new AppError(400, 'invalid_query', 'The query string is not valid percent-encoded UTF-8', {
        details: [{ code: 'invalid_encoding', field: 'query', message: 'query: not valid percent-encoded UTF-8' }],
      }),
    );
  }
  next();
};
