import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AGENT_MAX_CONCURRENT_REPLAYS, agentReplayStartSchema, REPLAY_ID_PATTERN } from '../../../contract/replay-wire.js';
import { issuesText } from '../../../contract/launch-spec.js';
import type { AgentState } from '../agent-state.js';
import { sendJson } from '../http-json.js';
import { whenSessionEnds } from '../process/session-end.js';
import { ReplayTable } from './replays.js';

/**
 * POST /replays starts a recording of the browser, POST /replays/{replay_id}/stop ends it
 * and answers once the video reached the service (agent/src/replay, docs/replays.md).
 * The session's end (shutdown, pool reset) finishes and uploads every recording still
 * running, within SESSION_END_UPLOAD_MS.
 */

/**
 * The share of the shutdown grace the recordings' uploads may take (the runtime's grace is
 * 5 s, so this cannot grow alone). Measured on a loaded 2-core host, a busy 60 s recording
 * at 1280×800: headful finished and uploaded in 0.7-1.5 s, headless in 3.8-7.5 s
 * (docs/replays.md): the headless case needs a longer runtime grace to be safe.
 */
const SESSION_END_UPLOAD_MS = 3_500;

let table: ReplayTable | undefined;

function tableFor(log: Logger): ReplayTable {
  if (!table) {
    const created = new ReplayTable(log);
    table = created;
    whenSessionEnds(() => created.stopAll(Date.now() + SESSION_END_UPLOAD_MS), 'replays');
  }
  return table;
}

export async function handleReplaysRequest(state: AgentState, request: IncomingMessage, response: ServerResponse, path: string, log: Logger): Promise<void> {
  const replays = tableFor(log);
  if (request.method === 'POST' && path === '/replays') return start(state, replays, request, response);
  const stop = /^\/replays\/([^/]+)\/stop$/.exec(path);
  if (request.method === 'POST' && stop && REPLAY_ID_PATTERN.test(stop[1]!)) {
    const ending = replays.stop(stop[1]!);
    if (!ending) return sendJson(response, 404, { code: 'replay_not_found', message: `no recording ${stop[1]} in this browser` });
    return sendJson(response, 200, await ending);
  }
  sendJson(response, 404, { code: 'route_not_found', message: `no route for ${request.method} ${path}` });
}

async function start(state: AgentState, replays: ReplayTable, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const parsed = agentReplayStartSchema.safeParse(await readJson(request));
  if (!parsed.success) return sendJson(response, 400, { code: 'invalid_request', message: issuesText(parsed.error, 'body') });
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
  if (replays.has(parsed.data.replay_id)) return sendJson(response, 409, { code: 'replay_exists', message: 'this recording was already started' });
  if (replays.running() >= AGENT_MAX_CONCURRENT_REPLAYS) {
    return sendJson(response, 429, { code: 'too_many_replays', message: `this browser already records ${AGENT_MAX_CONCURRENT_REPLAYS} times at once` });
  }
  const startedAt = new Date();
  try {
    await replays.start(chromium, parsed.data);
  } catch (error) {
    return sendJson(response, 502, { code: 'replay_start_failed', message: `the recording could not start: ${(error as Error).message}` });
  }
  sendJson(response, 201, { replay_id: parsed.data.replay_id, started_at: startedAt.toISOString() });
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 16 * 1024) return undefined;
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
