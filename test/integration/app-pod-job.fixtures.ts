import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { packageRoot } from '../../api/src/paths.js';

/**
 * A STAND-IN for the API's side of the internal app-job wire (docs/apps.md, "Kubernetes
 * mode": GET/PUT/POST /internal/app-jobs/...). The API's real handlers are built by another
 * engineer; this small HTTP server answers as the shared decisions say (Bearer token,
 * {code, message} errors, 204s) and records everything the pod sent, so the tests can
 * check the pod program's side of the wire against it.
 */

export interface WireRecord {
  requests: string[];
  logs: { stream: string; message: string; timestamp: string }[];
  buildResult?: Record<string, unknown>;
  runResult?: Record<string, unknown>;
  bundle?: Buffer;
}

export interface StandInState {
  token: string;
  buildInput?: object;
  source?: Buffer;
  runInput?: object;
  runBundle?: Buffer;
  /** Answers to give first to a path ("GET /internal/app-jobs/run" -> [503]), then the normal one. */
  failFirst?: Record<string, number[]>;
  /** Paths that answer 409 subject_ended. */
  ended?: Set<string>;
  /** Paths that never answer (a stalled transfer); each request to one is announced by onStall. */
  stall?: Set<string>;
  onStall?: (key: string) => void;
  /** Called with each log line as it arrives. */
  onLog?: (message: string) => void;
}

export interface StandIn {
  url: string;
  record: WireRecord;
  close(): Promise<void>;
}

const readBody = async (req: IncomingMessage): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

export async function startStandIn(state: StandInState): Promise<StandIn> {
  const record: WireRecord = { requests: [], logs: [] };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const key = `${req.method} ${req.url}`;
      record.requests.push(key);
      const body = await readBody(req);
      const error = (status: number, code: string, message: string) => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ code, message, details: {} }));
      };
      if (req.headers.authorization !== `Bearer ${state.token}`) return error(401, 'unauthorized', 'unknown token');
      const planned = state.failFirst?.[key]?.shift();
      if (planned !== undefined) return error(planned, 'unavailable', 'planned failure');
      if (state.stall?.has(key)) return state.onStall?.(key);
      if (state.ended?.has(key)) return error(409, 'subject_ended', 'the subject already ended');
      const json = (value: object) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const bytes = (value: Buffer | undefined, type: string) => (value ? res.writeHead(200, { 'content-type': type }).end(value) : error(404, 'not_found', 'none'));
      switch (key) {
        case 'GET /internal/app-jobs/build':
          return state.buildInput ? json(state.buildInput) : error(401, 'unauthorized', 'not a build token');
        case 'GET /internal/app-jobs/build/source':
          return bytes(state.source, 'application/octet-stream');
        case 'PUT /internal/app-jobs/build/bundle':
          record.bundle = body;
          return res.writeHead(204).end();
        case 'POST /internal/app-jobs/logs': {
          const { lines } = JSON.parse(body.toString('utf8')) as { lines: WireRecord['logs'] };
          if (lines.length > 500) return error(400, 'invalid_request', 'more than 500 lines');
          record.logs.push(...lines);
          for (const line of lines) state.onLog?.(line.message);
          return res.writeHead(204).end();
        }
        case 'POST /internal/app-jobs/build/result':
          record.buildResult = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
          return res.writeHead(204).end();
        case 'GET /internal/app-jobs/run':
          return state.runInput ? json(state.runInput) : error(401, 'unauthorized', 'not a run token');
        case 'GET /internal/app-jobs/run/bundle':
          return bytes(state.runBundle, 'application/gzip');
        case 'POST /internal/app-jobs/run/result':
          record.runResult = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
          return res.writeHead(204).end();
        default:
          return error(404, 'not_found', `no route ${key}`);
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    record,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

export interface PodRun {
  code: number | null;
  stderr: string;
  /** Sends a signal to the pod program (a SIGTERM as Kubernetes sends one). */
  kill(signal: NodeJS.Signals): void;
  done: Promise<{ code: number | null; stderr: string }>;
}

export interface PodEnv {
  url: string;
  token: string;
  workDir: string;
  /** As root: the install (package root: dist, node_modules) mounted read-only, as the image's /app is. */
  readOnlyInstall?: boolean;
}

/** The pod program as the runner image starts it: `node dist/.../job-main.js <args>`, with the env a Job gives it. */
export function startPod(args: string[], env: PodEnv): PodRun {
  const argv = [process.execPath, path.join(packageRoot(), 'dist', 'api', 'src', 'modules', 'apps', 'pod', 'job-main.js'), ...args];
  const readOnly = ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', packageRoot()];
  const command = env.readOnlyInstall ? [...readOnly, ...argv] : argv;
  const child = spawn(command[0]!, command.slice(1), {
    cwd: packageRoot(),
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: path.join(env.workDir, 'home'),
      BROWSERPLANE_INTERNAL_URL: env.url,
      BROWSERPLANE_APP_JOB_TOKEN: env.token,
      BROWSERPLANE_APP_SANDBOX: 'pod',
      BROWSERPLANE_APP_WORK_DIR: env.workDir,
    },
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const run: PodRun = {
    code: null,
    stderr: '',
    kill: (signal) => child.kill(signal),
    done: new Promise((resolve) => {
      child.once('close', (code) => {
        run.code = code;
        run.stderr = stderr;
        resolve({ code, stderr });
      });
    }),
  };
  return run;
}

export async function runPod(args: string[], env: PodEnv): Promise<{ code: number | null; stderr: string }> {
  return startPod(args, env).done;
}

/**
 * A real git server over smart HTTP: `git http-backend` (git's own CGI program) behind a
 * small HTTP server, serving the repositories under `root` (a pod refuses local
 * repositories, so its git fetch needs a URL).
 */
export async function startGitServer(root: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://git');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let started = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      started = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const [name, ...value] = line.split(':');
        if (name!.toLowerCase() === 'status') status = Number.parseInt(value.join(':').trim(), 10);
        else res.setHeader(name!, value.join(':').trim());
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.stdout.on('end', () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
