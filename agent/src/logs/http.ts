import type { IncomingMessage, ServerResponse } from 'node:http';
import { supervisorProcessOf, SUPERVISOR_PROCESSES, type LogErrorFrame, type LogFrame, type SupervisorProcess } from '../../../contract/agent-logs.js';
import { parseFsLimits } from '../config.js';
import type { AgentState } from '../agent-state.js';
import { FsError } from '../fs/errors.js';
import { SessionRoot } from '../fs/session-root.js';
import { sendJson } from '../http-json.js';
import { openLogFile, streamLogFile } from './file-follow.js';
import type { LogLimits } from './limits.js';
import { supervisorLogs, type SupervisorLine } from './supervisor.js';

/**
 * GET /logs/stream (docs/logs.md): the query as the API's GET /browsers/{id}/logs/stream
 * takes it, checked again here. Server-sent events, one JSON LogEvent per frame
 * (CONTRACT §12.5). Refusals (a bad query, a missing file, too many streams) are JSON
 * errors before the head; a failure after it is an `error` frame, then the end.
 *
 * Keep-alives are bare comment lines (":\n") every KEEPALIVE_MS, never a comment block
 * ending in a blank line: the Go SDK 0.28 would dispatch such a block as an event with
 * empty data and end its stream (docs/wire-compatibility.md); a comment line alone is
 * ignored by every decoder and the next frame's blank line ends a block that has data.
 */

const KEEPALIVE_MS = 15_000;
/** The words the API's query booleans take (zod's stringbool), so a client calling the agent directly is read alike. */
const TRUE_WORDS = ['true', '1', 'yes', 'on', 'y', 'enabled'];
const FALSE_WORDS = ['false', '0', 'no', 'off', 'n', 'disabled'];

export interface LogQuery {
  source: 'path' | 'supervisor';
  follow: boolean;
  path?: string;
  process?: SupervisorProcess;
}

const logLimits = (): LogLimits => supervisorLogs.limits;
const roots = new WeakMap<AgentState, Promise<SessionRoot>>();

function rootOf(state: AgentState): Promise<SessionRoot> {
  let root = roots.get(state);
  if (!root) {
    const chromium = state.chromium();
    if (state.phase() !== 'ready' || !chromium) throw new FsError(503, 'not_ready', 'browser not ready');
    root = SessionRoot.ofChromium(chromium.pid, parseFsLimits(process.env));
    root.catch(() => roots.delete(state));
    roots.set(state, root);
  }
  return root;
}

const invalid = (message: string) => new FsError(400, 'invalid_request', message);

export function parseLogQuery(params: URLSearchParams): LogQuery {
  const source = params.get('source');
  if (source !== 'path' && source !== 'supervisor') throw invalid('query parameter source must be "path" or "supervisor"');
  const followText = params.get('follow')?.toLowerCase() ?? 'true';
  const follow = TRUE_WORDS.includes(followText);
  if (!follow && !FALSE_WORDS.includes(followText)) throw invalid('query parameter follow must be true or false');
  const path = params.get('path');
  const processName = params.get('supervisor_process');
  if (source === 'path') {
    if (!path) throw invalid('query parameter path is required with source=path');
    if (processName !== null) throw invalid('query parameter supervisor_process goes with source=supervisor only');
    return { source, follow, path };
  }
  if (path !== null) throw invalid('query parameter path goes with source=path only');
  if (processName === null || processName === '') return { source, follow };
  const process = supervisorProcessOf(processName);
  if (!process) throw invalid(`unknown supervisor_process ${JSON.stringify(processName.slice(0, 100))}: one of ${SUPERVISOR_PROCESSES.join(', ')}`);
  return { source, follow, process };
}

export async function handleLogsRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://agent');
  if (request.method !== 'GET' || url.pathname.replace(/\/+$/, '') !== '/logs/stream') {
    return sendJson(response, 404, { code: 'route_not_found', message: `no route for ${request.method} ${url.pathname}` });
  }
  // The slot is taken before anything is awaited, so concurrent requests cannot pass the limit together.
  const controller = new AbortController();
  let untrack: (() => void) | undefined;
  try {
    const query = parseLogQuery(url.searchParams);
    const { maxStreams } = logLimits();
    if (supervisorLogs.openStreams >= maxStreams) {
      throw new FsError(409, 'log_stream_limit_reached', `this browser already serves ${maxStreams} log streams (the limit); close one first`);
    }
    untrack = supervisorLogs.trackStream(() => controller.abort());
    if (query.source === 'supervisor') return await serve(response, controller, (stream) => streamSupervisor(query, stream));
    const root = await rootOf(state);
    const file = await openLogFile(root, query.path!);
    const options = { follow: query.follow, limits: logLimits() };
    return await serve(response, controller, (stream) => streamLogFile(root, query.path!, file, { ...options, signal: stream.signal, emit: (line) => stream.send(line) }));
  } catch (error) {
    if (!(error instanceof FsError) || response.headersSent) throw error;
    sendJson(response, error.status, { code: error.code, message: error.message });
  } finally {
    untrack?.();
  }
}

interface OpenStream {
  signal: AbortSignal;
  send: (message: string, line?: SupervisorLine) => Promise<void>;
  /** Resolves when the client has gone or the stream was ended (a pool reset). */
  closed: Promise<void>;
}

/** Sends the head, runs `body` with keep-alives until it ends or the client goes, then ends the response. */
async function serve(response: ServerResponse, controller: AbortController, body: (stream: OpenStream) => Promise<void>): Promise<void> {
  const closed = new Promise<void>((resolve) => controller.signal.addEventListener('abort', () => resolve(), { once: true }));
  response.once('close', () => controller.abort());
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  response.flushHeaders();
  const keepalive = setInterval(() => response.write(':\n'), KEEPALIVE_MS);
  const send = async (message: string, line?: SupervisorLine) => {
    if (controller.signal.aborted || response.writableEnded) return;
    const frame: LogFrame = line ? { ...line.frame, message } : { event: 'log', message, timestamp: new Date().toISOString() };
    if (!response.write(`data: ${JSON.stringify(frame)}\n\n`)) await drained(response, controller.signal);
  };
  try {
    await body({ signal: controller.signal, send, closed });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const frame: LogErrorFrame = { event: 'error', error: { code: 'log_stream_failed', message }, timestamp: new Date().toISOString() };
    if (!response.writableEnded && !controller.signal.aborted) response.write(`data: ${JSON.stringify(frame)}\n\n`);
  } finally {
    clearInterval(keepalive);
    if (!response.writableEnded) response.end();
  }
}

function drained(response: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    response.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The lines kept, then (with follow) every new one until the client goes. Lines are sent
 * with the time they were read, and named by process when they come from every process.
 */
async function streamSupervisor(query: LogQuery, stream: OpenStream): Promise<void> {
  const wanted = (line: SupervisorLine) => query.process === undefined || line.frame.process === query.process;
  const message = (line: SupervisorLine) => (query.process ? line.frame.message : `[${line.frame.process}] ${line.frame.message}`);
  // Subscribed before the replay, so no line falls between the two; the live ones wait their turn.
  const live: SupervisorLine[] = [];
  let wake: (() => void) | undefined;
  const unsubscribe = query.follow
    ? supervisorLogs.subscribe((line) => {
        if (!wanted(line)) return;
        live.push(line);
        // A client slower than the processes loses the oldest lines, as the ring does.
        if (live.length > logLimits().ringLines) live.shift();
        wake?.();
      })
    : () => false;
  try {
    const replay = supervisorLogs.buffered(query.process);
    const lastReplayed = replay.at(-1)?.seq ?? 0;
    for (const line of replay) await stream.send(message(line), line);
    if (!query.follow) return;
    while (!stream.signal.aborted) {
      const next = live.shift();
      if (next) {
        if (next.seq > lastReplayed) await stream.send(message(next), next);
        continue;
      }
      await Promise.race([new Promise<void>((resolve) => (wake = resolve)), stream.closed]);
    }
  } finally {
    unsubscribe();
  }
}
