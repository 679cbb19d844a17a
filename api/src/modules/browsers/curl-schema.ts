import { z } from 'zod';
import { CURL_LIMITS, CURL_METHODS, curlHeaders, isHttpUrl } from '../../../../contract/curl.js';

/**
 * POST /browsers/{id}/curl (CONTRACT.md §2.5, the SDK's BrowserCurlParams and
 * BrowserCurlResponse), on the rules in contract/curl.ts, which the agent checks again.
 */

export const CURL_MAX_TIMEOUT_MS = CURL_LIMITS.maxTimeoutMs;

export const curlBody = z.strictObject({
  url: z.string().max(CURL_LIMITS.maxUrlLength).refine(isHttpUrl, 'must be an http or https URL').describe('Target URL (http or https)'),
  method: z.enum(CURL_METHODS).optional().describe('HTTP method (default GET)'),
  headers: curlHeaders
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
