import { z } from 'zod';

/**
 * POST /browsers/{id}/curl's rules, shared by the service (api/src/modules/browsers/
 * curl-schema.ts: refuses bad input before any browser work) and the agent
 * (agent/src/curl/request.ts: it is the one that talks to Chromium, so it checks again).
 * The limits are docs/curl.md's.
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

/** The caller's headers: valid names and values, at most maxHeaders, none the browser must write itself. */
export const curlHeaders = z
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

