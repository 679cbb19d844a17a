import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { sendJson } from '../http-json.js';
import { parseFsLimits, type FsLimits } from '../config.js';
import type { AgentState } from '../agent-state.js';
import { canonicalPath } from './confine.js';
import { FsError, fromErrno } from './errors.js';
import { upload, uploadZipRequest } from './multipart.js';
import * as ops from './operations.js';
import { SessionRoot } from './session-root.js';
import { Watches } from './watch.js';
import { downloadDirZip } from './zip.js';

/**
 * The agent's /fs/* routes: the same operation names as the API's
 * /browsers/{id}/fs/*, with the same query and body fields, so the API forwards as is.
 * Errors are `{code, message}` with the status the API passes on.
 */

interface FsContext {
  root: SessionRoot;
  watches: Watches;
}

const contexts = new WeakMap<AgentState, Promise<FsContext>>();

/**
 * The AGENT_FS_* limits. Read from the environment here rather than passed in AgentState,
 * which would touch agent.ts and server.ts for six numbers; main.ts parses the same
 * variables at start (parseStandbyConfig), so a bad value stops the agent there, not here.
 */
let limits: FsLimits | undefined;
const fsLimits = () => (limits ??= parseFsLimits(process.env));

function contextOf(state: AgentState): Promise<FsContext> {
  let context = contexts.get(state);
  if (!context) {
    const chromium = state.chromium();
    if (state.phase() !== 'ready' || !chromium) throw new FsError(503, 'not_ready', 'browser not ready');
    context = SessionRoot.ofChromium(chromium.pid, fsLimits()).then((root) => ({ root, watches: new Watches() }));
    context.catch(() => contexts.delete(state));
    contexts.set(state, context);
  }
  return context;
}

type Handler = (ctx: FsContext, request: IncomingMessage, response: ServerResponse, url: URL) => Promise<void>;

const query = (url: URL, name: string): string => {
  const value = url.searchParams.get(name);
  if (value === null) throw new FsError(400, 'invalid_request', `query parameter ${name} is required`);
  return value;
};

const field = (body: Record<string, unknown>, name: string, required = true): string | undefined => {
  const value = body[name];
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string') throw new FsError(400, 'invalid_request', `body field ${name} must be a string`);
  return value;
};

const done = (response: ServerResponse) => {
  response.writeHead(204).end();
};

const handlers: Record<string, Handler> = {
  'PUT /fs/write_file': async ({ root }, request, response, url) => {
    await ops.writeFile(root, query(url, 'path'), request, url.searchParams.get('mode') ?? undefined);
    done(response);
  },
  'GET /fs/file_info': async ({ root }, _request, response, url) => sendJson(response, 200, await ops.fileInfo(root, query(url, 'path'))),
  'GET /fs/read_file': async ({ root }, _request, response, url) => {
    const { handle, size } = await ops.openForRead(root, query(url, 'path'));
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    await pipeline(handle.createReadStream(), response);
  },
  'GET /fs/list_files': async ({ root }, _request, response, url) => sendJson(response, 200, await ops.listFiles(root, query(url, 'path'))),
  'PUT /fs/create_directory': async ({ root }, request, response) => {
    const body = await readJson(request);
    await ops.createDirectory(root, field(body, 'path')!, field(body, 'mode', false));
    done(response);
  },
  'PUT /fs/delete_file': async ({ root }, request, response) => {
    await ops.deleteFile(root, field(await readJson(request), 'path')!);
    done(response);
  },
  'PUT /fs/delete_directory': async ({ root }, request, response) => {
    const path = field(await readJson(request), 'path')!;
    if (canonicalPath(path) === '/') throw new FsError(400, 'invalid_path', 'the root cannot be deleted');
    await ops.deleteDirectory(root, path);
    done(response);
  },
  'PUT /fs/move': async ({ root }, request, response) => {
    const body = await readJson(request);
    await ops.move(root, field(body, 'src_path')!, field(body, 'dest_path')!);
    done(response);
  },
  'PUT /fs/set_file_permissions': async ({ root }, request, response) => {
    const body = await readJson(request);
    const owner = field(body, 'owner', false);
    const group = field(body, 'group', false);
    await ops.setFilePermissions(root, {
      path: field(body, 'path')!,
      mode: field(body, 'mode')!,
      ...(owner !== undefined ? { owner } : {}),
      ...(group !== undefined ? { group } : {}),
    });
    done(response);
  },
  'GET /fs/download_dir_zip': async ({ root }, _request, response, url) => {
    const send = await downloadDirZip(root, query(url, 'path'));
    response.writeHead(200, { 'content-type': 'application/zip' });
    await send(response);
  },
  'POST /fs/upload': async ({ root }, request, response) => {
    await upload(root, request);
    done(response);
  },
  'POST /fs/upload_zip': async ({ root }, request, response) => {
    await uploadZipRequest(root, request);
    done(response);
  },
  'POST /fs/watch': async ({ root, watches }, request, response) => {
    const body = await readJson(request);
    const watchId = await watches.start(root, field(body, 'path')!, body.recursive === true);
    sendJson(response, 200, { watch_id: watchId });
  },
  /** Not part of the API: where "/" is on this host, for tests that hand Chromium a local path. */
  'GET /fs/root': ({ root }, _request, response) => {
    sendJson(response, 200, { host_root: root.hostRoot, downloads: '/Downloads' });
    return Promise.resolve();
  },
};

const WATCH_PATH = /^\/fs\/watch\/([A-Za-z0-9-]+)(\/events)?$/;

/** Errors other than FsError are rethrown: the server logs them and answers 500. */
export async function handleFsRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://agent');
  try {
    const ctx = await contextOf(state);
    const watchMatch = WATCH_PATH.exec(url.pathname);
    if (watchMatch && request.method === 'GET' && watchMatch[2]) return ctx.watches.stream(watchMatch[1]!, response);
    if (watchMatch && request.method === 'DELETE' && !watchMatch[2]) {
      ctx.watches.stop(watchMatch[1]!);
      return done(response);
    }
    const handler = handlers[`${request.method} ${url.pathname}`];
    if (!handler) return sendJson(response, 404, { code: 'route_not_found', message: `no route for ${request.method} ${url.pathname}` });
    await handler(ctx, request, response, url);
  } catch (error) {
    // Anything a concurrent change can cause (a path vanishing or changing type under us)
    // is the caller's 4xx; the rest is a bug, for the server to log as a 500.
    const mapped = error instanceof FsError ? error : fromErrno(error, url.searchParams.get('path') ?? 'the path');
    if (!(mapped instanceof FsError) || response.headersSent) throw error;
    // Refused before the body was all read (a limit passed part way): the answer goes out
    // at once and the rest of the body is read and dropped, on a connection left open. Closing
    // it instead made the close race the caller's writes: a caller still sending got a reset
    // in place of the 413 (the service answered 502 under load). The parser knows where the
    // body ends, so the connection stays good for the next request; the caller (undici)
    // drops it itself once it has the answer. A body still coming after
    // REFUSED_BODY_GRACE_MS is cut off.
    if (!request.complete) drainRefusedBody(request);
    sendJson(response, mapped.status, { code: mapped.code, message: mapped.message });
  }
}

const REFUSED_BODY_GRACE_MS = 30_000;

function drainRefusedBody(request: IncomingMessage): void {
  const cutOff = setTimeout(() => request.socket.destroy(), REFUSED_BODY_GRACE_MS);
  cutOff.unref();
  request.once('close', () => clearTimeout(cutOff));
  request.resume();
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new FsError(413, 'payload_too_large', 'JSON body over 64 KiB');
    chunks.push(chunk);
  }
  if (chunks.length === 0) return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new FsError(400, 'invalid_json', 'the body must be a JSON object');
}
