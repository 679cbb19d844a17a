import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AgentState } from '../agent-state.js';
import { sendJson } from '../http-json.js';
import { CURL_LIMITS, CurlError, parseCurlRequest } from './request.js';
import { curlThroughBrowser } from './through-browser.js';

/**
 * POST /curl: an HTTP request through the browser's own network stack (through-browser.ts),
 * answered as {status, headers, body, duration_ms}. At most CURL_LIMITS.maxConcurrent at a
 * time per browser: each one is a hidden page with its own renderer work.
 */

/** Requests in flight, per agent state (one agent serves one browser). */
const inFlight = new WeakMap<AgentState, number>();

export async function handleCurlRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const text = await readBody(request);
  if (text === undefined) return reply(response, new CurlError(413, 'request_too_large', `The curl request is larger than ${CURL_LIMITS.maxRequestJsonBytes} bytes`));
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return reply(response, new CurlError(400, 'invalid_request', 'The curl request is not JSON'));
  }
  const parsed = parseCurlRequest(body);
  if (!parsed.ok) return reply(response, parsed.error);
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
  // A reset (pool release) is running: the next holder's cookies must not meet this one's request.
  if (!state.connections.accepting()) return sendJson(response, 503, { code: 'not_ready', message: 'the browser is being reset' });
  const running = inFlight.get(state) ?? 0;
  if (running >= CURL_LIMITS.maxConcurrent) {
    return reply(response, new CurlError(429, 'too_many_requests', `This browser already runs ${CURL_LIMITS.maxConcurrent} curl requests, the most at a time; retry when one ends`));
  }
  inFlight.set(state, running + 1);
  // Counted as a CDP client while it runs: someone is using the browser (no idle timeout),
  // and a reset (pool release) ends it with the previous holder's other connections, so an
  // answer that comes late cannot set cookies in the next holder's browser.
  const stop = new AbortController();
  const closed = state.connections.opened('cdp', () =>
    stop.abort(new CurlError(409, 'browser_reset', 'The browser was reset (released to its pool) while the request ran; the request was cancelled')),
  );
  try {
    sendJson(response, 200, await curlThroughBrowser(chromium.cdp, parsed.request, stop.signal));
  } catch (error) {
    reply(response, error instanceof CurlError ? error : new CurlError(502, 'curl_failed', `The browser could not make the request: ${error instanceof Error ? error.message : String(error)}`));
  } finally {
    closed();
    inFlight.set(state, (inFlight.get(state) ?? 1) - 1);
  }
}

function reply(response: ServerResponse, error: CurlError): void {
  sendJson(response, error.status, { code: error.code, message: error.message });
}

/** The body as text; undefined when larger than the limit (read to the end, so the answer reaches the client). */
async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= CURL_LIMITS.maxRequestJsonBytes) chunks.push(chunk);
  }
  return size > CURL_LIMITS.maxRequestJsonBytes ? undefined : Buffer.concat(chunks).toString('utf8');
}
