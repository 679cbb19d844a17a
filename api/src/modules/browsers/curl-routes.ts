import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint, agentFetch, type AgentEndpoint } from '../../../../contract/agent-client.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { CURL_MAX_TIMEOUT_MS, curlBody, curlResponseSchema } from './curl-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * POST /browsers/{id}/curl (CONTRACT.md §2.5): checked here, then made by the session's
 * agent through the browser's own network stack (agent/src/curl). Browser JSON never
 * carries base_url with a jwt (cdp-token.ts), so the SDK sends curl here, never to a VM
 * (CONTRACT §12.7); browsers.fetch() is not served (docs/curl.md).
 */

/** The agent's own answers that pass with their status and code: the caller's input, a limit, the target's failure, the timeout. */
const PASSED_STATUSES = new Set([400, 403, 409, 413, 429, 502, 503, 504]);
/** The agent's deadline plus the time to hand back a 10 MiB body. */
const AGENT_TIMEOUT_MS = CURL_MAX_TIMEOUT_MS + 30_000;

export function curlRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/browsers/{id_or_name}/curl',
      operationId: 'browserCurl',
      summary: "An HTTP request made by the browser: its proxy, cookies and TLS",
      description:
        "Redirects are returned, not followed. Answers larger than 10 MiB are refused (413 response_too_large); at most 4 requests run at a time per browser (429). " +
        'With private networks blocked, loopback and private destinations are refused (403 destination_refused, or 502 for https). A failed request is 502 curl_failed, one past timeout_ms 504 curl_timeout.',
      tags: ['Browsers'],
      auth: 'project',
      params: browserIdParams,
      body: curlBody,
      responses: { 200: { description: 'The answer', schema: curlResponseSchema }, ...errorResponses(400, 403, 404, 409, 413, 429, 502, 503, 504) },
      handler: async ({ params, body, auth }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name);
        if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
        return json(await callAgent(agentEndpoint(deps.agentTokens, session.id, session.agent_url), body));
      },
    }),
  ];
}

async function callAgent(agent: AgentEndpoint, body: unknown): Promise<unknown> {
  let response: Response;
  let text: string;
  try {
    response = await agentFetch(agent, '/curl', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(AGENT_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    throw new AppError(502, 'browser_unavailable', 'The browser did not answer', { cause: error });
  }
  if (response.ok) return JSON.parse(text) as unknown;
  let failure: { code?: unknown; message?: unknown } = {};
  try {
    failure = JSON.parse(text) as typeof failure;
  } catch {
    // not JSON: reported with the status alone
  }
  const passed = PASSED_STATUSES.has(response.status) && typeof failure.code === 'string';
  const message = typeof failure.message === 'string' ? failure.message : `The browser answered ${response.status}`;
  const status = passed ? response.status : 502;
  // The SDK retries 429 and 5xx by itself: only a full browser (429) or one not ready (503)
  // is worth it. A failed or timed-out request may have reached its target, and a retry
  // would send a POST again.
  const retry = status === 429 || status === 503 ? { retryAfterSeconds: 1 } : { shouldRetry: false };
  throw new AppError(status, passed ? (failure.code as string) : 'browser_error', message, retry);
}
