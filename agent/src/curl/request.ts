import { z } from 'zod';

/**
 * POST /curl's body as the agent takes it (the service checks the same rules first, in
 * api/src/modules/browsers/curl-schema.ts, and forwards the body unchanged), and the
 * limits of one request. Pure, so it is tested alone.
 */

export const CURL_LIMITS = {
  /** Response bodies larger than this are refused (413 response_too_large), never cut short. */
  maxResponseBytes: 10 * 1024 * 1024,
  defaultTimeoutMs: 30_000,
  maxTimeoutMs: 120_000,
  /** Requests in flight per browser; one more is refused with 429. */
  maxConcurrent: 4,
  maxUrlLength: 8192,
  maxHeaders: 100,
  maxHeaderValueLength: 8192,
  /** The JSON body the agent reads; the service's own JSON limit (1 MiB by default) is lower. */
  maxRequestJsonBytes: 8 * 1024 * 1024,
} as const;

export const CURL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Headers Chromium will not take from DevTools (Fetch.continueRequest answers "Unsafe
 * header"): the network stack writes them itself. Refused up front with a clear message.
 */
const UNSAFE_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'cookie2']);

/** RFC 9110 token characters. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** No CR, LF or NUL: a value cannot start another header. */
const HEADER_VALUE = /^[^\r\n\0]*$/;

export function unsafeHeaderReason(name: string): string | undefined {
  const lower = name.toLowerCase();
  if (UNSAFE_HEADERS.has(lower)) return `header ${name} is set by the browser's network stack and cannot be given`;
  if (lower.startsWith('proxy-')) return `header ${name} is refused: the browser's proxy is the session's, set through the API`;
  return undefined;
}

export function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

const headers = z
  .record(
    z.string().regex(HEADER_NAME, 'is not a valid header name'),
    z.string().max(CURL_LIMITS.maxHeaderValueLength).regex(HEADER_VALUE, 'must not contain CR, LF or NUL'),
  )
  .superRefine((value, context) => {
    const names = Object.keys(value);
    if (names.length > CURL_LIMITS.maxHeaders) context.addIssue({ code: 'custom', message: `has more than ${CURL_LIMITS.maxHeaders} headers` });
    for (const name of names) {
      const reason = unsafeHeaderReason(name);
      if (reason) context.addIssue({ code: 'custom', path: [name], message: reason });
    }
  });

export const curlRequestSchema = z.strictObject({
  url: z.string().max(CURL_LIMITS.maxUrlLength).refine(isHttpUrl, 'must be an http or https URL'),
  method: z.enum(CURL_METHODS).optional(),
  headers: headers.optional(),
  body: z.string().optional(),
  response_encoding: z.enum(['utf8', 'base64']).optional(),
  timeout_ms: z.number().int().min(1).max(CURL_LIMITS.maxTimeoutMs).optional(),
});

/** A request checked, defaults filled in. */
export interface CurlRequest {
  url: string;
  method: (typeof CURL_METHODS)[number];
  headers: Record<string, string>;
  body: string | undefined;
  responseEncoding: 'utf8' | 'base64';
  timeoutMs: number;
}

export interface CurlAnswer {
  status: number;
  /** Lower-case names; every value of a repeated header, in order (Set-Cookie included). */
  headers: Record<string, string[]>;
  body: string;
  duration_ms: number;
}

/** A failure with the status and code the agent answers (and the service passes on). */
export class CurlError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export type ParsedCurl = { ok: true; request: CurlRequest } | { ok: false; error: CurlError };

export function parseCurlRequest(body: unknown): ParsedCurl {
  const checked = curlRequestSchema.safeParse(body);
  if (!checked.success) {
    const text = checked.error.issues.map((issue) => `${['body', ...issue.path.map(String)].join('.')} ${issue.message}`).join('; ');
    return { ok: false, error: new CurlError(400, 'invalid_request', `The curl request is invalid: ${text}`) };
  }
  const given = checked.data;
  return {
    ok: true,
    request: {
      url: new URL(given.url).href,
      method: given.method ?? 'GET',
      headers: given.headers ?? {},
      body: given.body,
      responseEncoding: given.response_encoding ?? 'utf8',
      timeoutMs: given.timeout_ms ?? CURL_LIMITS.defaultTimeoutMs,
    },
  };
}
