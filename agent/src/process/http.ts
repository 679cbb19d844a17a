import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { AgentState } from '../agent-state.js';
import { sendJson } from '../http-json.js';
import { virtualComponents } from '../fs/confine.js';
import { FsError } from '../fs/errors.js';
import { processContext, type ProcessContext } from './context.js';
import { ProcessError } from './errors.js';
import { MOUNT_POINTS, type LaunchRequest } from './sandbox.js';
import { execBody, killBody, MAX_ARGV_BYTES, resizeBody, spawnBody, stdinBody, type ExecBody } from './wire.js';

/**
 * The agent's /process/* routes, the same operations and bodies as the API's
 * /browsers/{id}/process/*, so the service forwards as is. Errors are `{code, message}`
 * with the status the service passes on.
 */

const ID_ROUTE = /^\/process\/([0-9a-f-]{36})\/(status|stdin|kill|resize|stdout\/stream)$/;
/** JSON bodies: stdin's base64 of limits.stdinBytes is the largest. */
const bodyLimit = (ctx: ProcessContext) => Math.ceil(ctx.limits.stdinBytes / 3) * 4 + 64 * 1024;

export async function handleProcessRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://agent');
  const key = `${request.method} ${url.pathname}`;
  try {
    // A pool reset is ending the previous holder's processes: none may start behind it.
    if (!state.connections.accepting()) throw new ProcessError(409, 'browser_resetting', 'the browser is being reset for its next holder; try again');
    const ctx = await processContext(state);
    if (key === 'POST /process/exec') {
      const body = parse(execBody, await readJson(request, bodyLimit(ctx)));
      return sendJson(response, 200, await ctx.table.exec(await launchRequest(ctx, body, false), execTimeout(ctx, body.timeout_sec)));
    }
    if (key === 'POST /process/spawn') {
      const body = parse(spawnBody, await readJson(request, bodyLimit(ctx)));
      const tty = body.allocate_tty === true;
      const size = tty ? { cols: body.cols ?? 80, rows: body.rows ?? 24 } : undefined;
      const answer = await ctx.table.spawn(await launchRequest(ctx, body, tty), { timeoutSec: body.timeout_sec ?? undefined, ...(size ? { size } : {}) });
      return sendJson(response, 200, answer);
    }
    const match = ID_ROUTE.exec(url.pathname);
    if (!match) return sendJson(response, 404, { code: 'route_not_found', message: `no route for ${key}` });
    const [, id, op] = match as unknown as [string, string, string];
    if (request.method === 'GET' && op === 'status') return sendJson(response, 200, await ctx.table.status(id));
    if (request.method === 'GET' && op === 'stdout/stream') return stream(ctx, id, response);
    if (request.method !== 'POST') return sendJson(response, 404, { code: 'route_not_found', message: `no route for ${key}` });
    const json = await readJson(request, bodyLimit(ctx));
    if (op === 'stdin') {
      const data = Buffer.from(parse(stdinBody, json).data_b64, 'base64');
      if (data.length > ctx.limits.stdinBytes) throw new ProcessError(413, 'stdin_too_large', `one stdin write takes at most ${ctx.limits.stdinBytes} bytes`);
      return sendJson(response, 200, await ctx.table.stdin(id, data));
    }
    if (op === 'kill') return sendJson(response, 200, await ctx.table.kill(id, parse(killBody, json).signal));
    const size = parse(resizeBody, json);
    return sendJson(response, 200, ctx.table.resize(id, size.cols, size.rows));
  } catch (error) {
    if (!(error instanceof ProcessError || error instanceof FsError) || response.headersSent) throw error;
    if (!request.complete) request.resume();
    sendJson(response, error.status, { code: error.code, message: error.message });
  }
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
  const message = issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.join(', ')}` : issue.message;
  throw new ProcessError(400, 'invalid_request', `${where}${message}`);
}

function execTimeout(ctx: ProcessContext, requested: number | null | undefined): number {
  const { execTimeoutSec, execTimeoutMaxSec } = ctx.limits;
  if (requested === null || requested === undefined) return Math.min(execTimeoutSec, execTimeoutMaxSec);
  if (requested > execTimeoutMaxSec) {
    throw new ProcessError(400, 'invalid_request', `timeout_sec: exec waits at most ${execTimeoutMaxSec} s; spawn a longer-running process instead`);
  }
  return requested;
}

/** as_root, as_user and cwd checked, and the command line's size. */
async function launchRequest(ctx: ProcessContext, body: ExecBody, tty: boolean): Promise<LaunchRequest> {
  if (body.as_root === true) {
    throw new ProcessError(
      400,
      'as_root_unsupported',
      ctx.sandbox.mode === 'bwrap'
        ? 'as_root is not available: processes run as the browser\'s unprivileged user, in a sandbox, and root on this host would reach every session'
        : 'as_root is not available: the browser\'s agent runs without root, so there is no root to run as',
    );
  }
  if (body.as_user !== null && body.as_user !== undefined && !ctx.userNames.has(body.as_user)) {
    throw new ProcessError(400, 'as_user_unsupported', `as_user: processes run as the browser's own user only (${[...ctx.userNames].join(' or ')}), not ${body.as_user.slice(0, 64)}`);
  }
  const args = body.args ?? [];
  const env = body.env ?? {};
  const size = [body.command, ...args, ...Object.entries(env).flat()].reduce((sum, part) => sum + Buffer.byteLength(part) + 1, 0);
  if (size > MAX_ARGV_BYTES) throw new ProcessError(400, 'invalid_request', `command, args and env together take at most ${MAX_ARGV_BYTES} bytes`);
  return { command: body.command, args, env, cwd: await checkedCwd(ctx, body.cwd ?? '/'), tty };
}

/**
 * The cwd, "/" by default, must be a directory of the session's root (checked the fs API's
 * way: no "..", no symlink out), or lie under one of the sandbox's own mounts (/usr, /tmp...),
 * which bwrap resolves inside the sandbox. Unconfined, the checked host directory itself.
 */
async function checkedCwd(ctx: ProcessContext, cwd: string): Promise<string> {
  const parts = virtualComponents(cwd);
  if (ctx.sandbox.mode === 'bwrap' && parts.length > 0 && MOUNT_POINTS.includes(parts[0]!)) return `/${parts.join('/')}`;
  const dir = await ctx.root.openDir(parts).catch((error: unknown) => {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || (error instanceof FsError && error.status === 404)) throw new ProcessError(400, 'invalid_cwd', `cwd ${cwd} is not a directory of the browser filesystem`);
    throw error;
  });
  await dir.close();
  return ctx.sandbox.mode === 'bwrap' ? `/${parts.join('/')}` : dir.hostPath.slice(ctx.root.hostRoot.length) || '/';
}

/** SSE: `data: {json}` frames, the kept output first, ending after the exit frame. */
function stream(ctx: ProcessContext, id: string, response: ServerResponse): void {
  let unsubscribe: () => void = () => undefined;
  const close = () => unsubscribe();
  const frames: string[] = [];
  let open = false;
  const write = (frame: object) => {
    const text = `data: ${JSON.stringify(frame)}\n\n`;
    if (!open) return void frames.push(text);
    response.write(text);
    if ('event' in frame) {
      close();
      response.end();
    }
  };
  // Subscribing first makes an unknown id the caller's 404 before any header goes out.
  unsubscribe = ctx.table.subscribe(id, write);
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  open = true;
  // Headers now, so a quiet process does not keep the caller waiting for them; no comment
  // (and no comment keep-alive later): older Go SDK clients end a stream at a comment block
  // (docs/wire-compatibility.md). The first bytes after the headers are a real frame.
  response.flushHeaders();
  for (const text of frames) response.write(text);
  if (frames.some((text) => text.includes('"event":"exit"'))) {
    close();
    return void response.end();
  }
  response.on('close', close);
}

async function readJson(request: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new ProcessError(413, 'payload_too_large', `JSON body over ${limit} bytes`);
    chunks.push(chunk);
  }
  if (chunks.length === 0) return {};
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new ProcessError(400, 'invalid_json', 'the body must be JSON');
  }
}
