import { z } from 'zod';

/**
 * POST /browsers/{id}/curl (CONTRACT.md §2.5, the SDK's BrowserCurlParams and
 * BrowserCurlResponse). The agent checks the same rules again (agent/src/curl/request.ts):
 * the service refuses bad input before any browser work, the agent because it is the one
 * that talks to Chromium. The limits are docs/curl.md's.
 */

export const CURL_MAX_TIMEOUT_MS = 120_000;
const MAX_URL_LENGTH = 8192;
const MAX_HEADERS = 100;
const MAX_HEADER_VALUE_LENGTH = 8192;

/** Written by Chromium's network stack itself; Fetch.continueRequest refuses them as unsafe. */
const UNSAFE_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'cookie2']);

function unsafeHeaderReason(name: string): string | undefined {
  const lower = name.toLowerCase();
  if (UNSAFE_HEADERS.has(lower)) return `header ${name} is set by the browser's network stack and cannot be given`;
  if (lower.startsWith('proxy-')) return `header ${name} is refused: the browser's proxy is the session's, set through the API`;
  return undefined;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

const headers = z
  .record(
    z.string().regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, 'is not a valid header name'),
    z.string().max(MAX_HEADER_VALUE_LENGTH).regex(/^[^\r\n\0]*$/, 'must not contain CR, LF or NUL'),
  )
  .superRefine((value, context) => {
    const names = Object.keys(value);
    if (names.length > MAX_HEADERS) context.addIssue({ code: 'custom', message: `has more than ${MAX_HEADERS} headers` });
    for (const name of names) {
      const reason = unsafeHeaderReason(name);
      if (reason) context.addIssue({ code: 'custom', path: [name], message: reason });
    }
  });

export const curlBody = z.strictObject({
  url: z.string().max(MAX_URL_LENGTH).refine(isHttpUrl, 'must be an http or https URL').describe('Target URL (http or https)'),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']).optional().describe('HTTP method (default GET)'),
  headers: headers
    .optional()
    .describe("Headers merged over the browser's own (its Cookie, User-Agent, Accept): a given header replaces the browser's of the same name. Host, Content-Length, Connection, Transfer-Encoding and Proxy-* are refused"),
  body: z.string().optional().describe('Request body, sent as UTF-8'),
  response_encoding: z.enum(['utf8', 'base64']).optional().describe('How the response body is returned (default utf8; base64 for binary content)'),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(CURL_MAX_TIMEOUT_MS)
    .optional()
    .describe(`Time for the whole exchange, body included, in ms (default 30000, at most ${CURL_MAX_TIMEOUT_MS})`),
});

export const curlResponseSchema = z.object({
  status: z.number().int().describe('HTTP status of the answer (a redirect is returned, not followed)'),
  headers: z.record(z.string(), z.array(z.string())).describe('Answer headers by lower-case name, every value of a repeated header (Set-Cookie included)'),
  body: z.string().describe('Answer body, decoded (gzip, br) and as response_encoding says; at most 10 MiB'),
  duration_ms: z.number().describe('Time the browser took, in ms'),
});
