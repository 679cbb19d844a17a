import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { issuesText } from '../../../contract/launch-spec.js';
import type { AgentState } from '../agent-state.js';
import { sendJson } from '../http-json.js';
import { processContext } from '../process/context.js';
import { ProcessError } from '../process/errors.js';
import type { Sandbox } from '../process/sandbox.js';
import { cdpGrantsOf } from './cdp-grants.js';
import { executePlaywright, PLAYWRIGHT_LIMITS, type ExecutionSite } from './execute.js';

/**
 * POST /playwright/execute: the body of the API's POST /browsers/{id}/playwright/execute
 * as is ({code, timeout_sec?}), answered with the SDK's PlaywrightExecuteResponse. The
 * code's own failures (a throw, a syntax error, a timeout) are 200 with success false,
 * as Kernel answers them; 400 is a body that is not a request, 409 one execution too many.
 */

/** Executions running at once per browser (each is a Node process of up to heapMb). */
export const MAX_CONCURRENT_EXECUTIONS = 2;
/** Characters of code (the API's JSON body limit, 1 MiB by default, comes first). */
export const MAX_CODE_LENGTH = 1024 * 1024;
/** JSON escapes can double the code's size on the wire. */
const MAX_BODY_BYTES = 2 * MAX_CODE_LENGTH + 4096;

const executeBody = z.object({
  code: z.string().min(1).max(MAX_CODE_LENGTH),
  timeout_sec: z.number().positive().max(PLAYWRIGHT_LIMITS.maxTimeoutSec).nullish(),
});

interface Playground {
  running: number;
}

const playgrounds = new WeakMap<AgentState, Playground>();

function playgroundOf(state: AgentState): Playground {
  let found = playgrounds.get(state);
  if (!found) playgrounds.set(state, (found = { running: 0 }));
  return found;
}

const TOO_LARGE = Symbol('too large');

export async function handlePlaywrightRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
  const raw = await readBody(request);
  if (raw === TOO_LARGE) return sendJson(response, 413, { code: 'body_too_large', message: `the body is larger than ${MAX_BODY_BYTES} bytes` });
  const body = executeBody.safeParse(raw);
  if (!body.success) return sendJson(response, 400, { code: 'invalid_request', message: issuesText(body.error, 'body') });
  const playground = playgroundOf(state);
  if (playground.running >= MAX_CONCURRENT_EXECUTIONS) {
    return sendJson(response, 409, { code: 'too_many_executions', message: `this browser already runs ${MAX_CONCURRENT_EXECUTIONS} Playwright executions: wait for one to end` });
  }
  playground.running += 1;
  try {
    let sandbox: Sandbox;
    try {
      // The sandbox of browsers.process (the session's files and user, read once).
      sandbox = (await processContext(state)).sandbox;
    } catch (error) {
      if (error instanceof ProcessError) return sendJson(response, error.status, { code: error.code, message: error.message });
      throw error;
    }
    const site = siteOf(state, request, sandbox);
    const outcome = await executePlaywright(site, { code: body.data.code, timeoutSec: body.data.timeout_sec ?? PLAYWRIGHT_LIMITS.defaultTimeoutSec });
    sendJson(response, 200, outcome);
  } finally {
    playground.running -= 1;
  }
}

function siteOf(state: AgentState, request: IncomingMessage, sandbox: Sandbox): ExecutionSite {
  const address = request.socket.localAddress ?? '127.0.0.1';
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    cdpUrl: `ws://${host}:${request.socket.localPort}/cdp`,
    grants: cdpGrantsOf(state),
    sandbox,
  };
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return TOO_LARGE;
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
