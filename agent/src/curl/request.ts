import { z } from 'zod';
import { CURL_LIMITS, CURL_METHODS, curlHeaders, isHttpUrl } from '../../../contract/curl.js';

export { CURL_LIMITS, CURL_METHODS, isHttpUrl, unsafeHeaderReason } from '../../../contract/curl.js';

/**
 * POST /curl's body as the agent takes it (the service checks the same rules first, in
 * api/src/modules/browsers/curl-schema.ts, and forwards the body unchanged), and the
 * limits of one request. Pure, so it is tested alone.
 */

export const curlRequestSchema = z.strictObject({
  url: z.string().max(CURL_LIMITS.maxUrlLength).refine(isHttpUrl, 'must be an http or https URL'),
  method: z.enum(CURL_METHODS).optional(),
  headers: curlHeaders.optional(),
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
