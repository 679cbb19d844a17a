import type { Request, Response } from 'express';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request as agentRequest } from 'undici';
import { AppError } from '../../http/errors.js';
import type { RouteResult } from '../../http/route.js';
import { agentHeaders, type AgentEndpoint } from '../../../../contract/agent-client.js';

/**
 * Forwarding to the session's agent: request bodies and answers are streamed both ways
 * (file uploads and downloads never sit in memory), and the agent's `{code, message}`
 * errors keep their status, so a missing file is 404 not_found here too.
 */

/** The agent's 4xx (the client's doing: a bad path, a limit) and 507 (no space) pass with their code. */
const PASSED_STATUSES = new Set([400, 403, 404, 409, 413, 507]);

export interface AgentCall {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string | undefined>;
  /** JSON to send, or the incoming request to stream on as is (with its Content-Type). */
  body?: { json: unknown } | { stream: Request };
  /** SSE: no body timeout, and the upstream is cut when the client leaves. */
  longLived?: boolean;
  /** For a call that may take longer than undici's 300 s default (a Playwright execution). */
  timeoutMs?: number;
}

function agentUrl(base: string, call: AgentCall): string {
  const url = new URL(`${base}${call.path}`);
  for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined) url.searchParams.set(name, value);
  return url.href;
}

async function send(agent: AgentEndpoint, call: AgentCall) {
  const headers: Record<string, string> = {};
  let body: string | PassThrough | undefined;
  let upload: Request | undefined;
  if (call.body && 'json' in call.body) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(call.body.json);
  } else if (call.body) {
    upload = call.body.stream;
    if (upload.headers['content-type']) headers['content-type'] = upload.headers['content-type'];
    // Not the request itself: when the agent refuses an upload early (a limit) and closes,
    // undici destroys the body it was sending, and destroying the client's request resets
    // its socket before it can read our answer. The rest is read and dropped instead.
    const through = new PassThrough();
    const source = upload;
    source.pipe(through);
    // A client that goes away mid-upload still ends the agent's request, as before.
    source.once('error', (error) => through.destroy(error));
    source.once('close', () => {
      if (!source.readableEnded) through.destroy(new Error('the client closed the upload'));
    });
    body = through;
  }
  try {
    const answer = await agentRequest(agentUrl(agent.url, call), {
      method: call.method,
      // Only these: nothing of the client's request (its cookies, its Origin) reaches the agent.
      headers: agentHeaders(agent, headers),
      body: body ?? null,
      ...(call.longLived ? { bodyTimeout: 0 } : {}),
      ...(call.timeoutMs ? { headersTimeout: call.timeoutMs, bodyTimeout: call.timeoutMs } : {}),
    });
    if (upload && answer.statusCode >= 400) dropRest(upload);
    return answer;
  } catch (error) {
    if (upload) dropRest(upload);
    throw new AppError(502, 'browser_unavailable', 'The browser did not answer', { cause: error });
  }
}

/** Reads what the client still sends of a refused upload, so it gets to read the answer (bounded by the server's request timeout). */
function dropRest(upload: Request): void {
  if (upload.readableEnded) return;
  upload.unpipe();
  upload.resume();
}

function failure(status: number, text: string): never {
  let parsed: { code?: unknown; message?: unknown } = {};
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // not JSON: reported with the status alone
  }
  const passed = PASSED_STATUSES.has(status);
  const code = passed && typeof parsed.code === 'string' ? parsed.code : 'browser_error';
  const message = typeof parsed.message === 'string' ? parsed.message : `The browser answered ${status}`;
  throw new AppError(passed ? status : 502, code, message, status === 409 ? { shouldRetry: false } : {});
}

/** A call whose answer is JSON (or nothing: 204). */
export async function callAgentJson(agent: AgentEndpoint, call: AgentCall): Promise<RouteResult> {
  const answer = await send(agent, call);
  const text = await answer.body.text();
  if (answer.statusCode >= 400) return failure(answer.statusCode, text);
  if (answer.statusCode === 204 || text === '') return { kind: 'empty', status: 204 };
  return { kind: 'json', status: answer.statusCode, body: JSON.parse(text) };
}

/** A call whose answer (file bytes, zip, SSE) is streamed to the client as it comes. */
export async function streamAgent(agent: AgentEndpoint, call: AgentCall, res: Response): Promise<RouteResult> {
  const answer = await send(agent, call);
  if (answer.statusCode >= 400) return failure(answer.statusCode, await answer.body.text());
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'content-length', 'cache-control']) {
    const value = answer.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  res.writeHead(answer.statusCode, headers);
  res.flushHeaders();
  res.once('close', () => answer.body.destroy());
  // Headers are out: a client that leaves or an agent that dies mid-stream can only end
  // the response, which pipeline does by destroying both sides.
  await pipeline(answer.body, res).catch(() => undefined);
  return { kind: 'handled' };
}
