import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Kernel, { type ClientOptions } from '@onkernel/sdk';
import { eventually } from './eventually.js';

/**
 * The built service, started the way a user starts it (`node dist/api/src/main.js`),
 * each on a free port with its own data dir and embedded Postgres. The e2e, faults and k8s
 * tiers start it from here, and so do the benchmarks (compiled to dist/bench, which is why
 * the repository root is found by its package.json rather than by a fixed relative path).
 *
 * Every process and data dir this module creates is tracked; `cleanupServices()` (call
 * it from afterAll/afterEach) stops them, makes sure no Postgres is left running for
 * their data dirs and removes the dirs. An exit hook kills whatever is still left if the
 * worker dies without running its hooks.
 */

export const REPO_ROOT = repoRoot();
export const MAIN_JS = path.join(REPO_ROOT, 'dist/api/src/main.js');
export const OPERATOR_MAIN_JS = path.join(REPO_ROOT, 'dist/operator/src/main.js');
export const LISTENING_MSG = 'browserplane listening';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

export interface LogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface StartOptions {
  /** Extra environment; a value of `undefined` removes a default (HOST, PORT, LOG_LEVEL). */
  env?: Record<string, string | undefined>;
  /** Reuse a data dir (for restarts); by default a fresh one is made under os.tmpdir(). */
  dataDir?: string;
  /** Wait for the listening line (default true). */
  waitForListening?: boolean;
  /** Start from this process's environment rather than a hermetic one (the benchmarks run with the caller's settings). */
  inheritEnv?: boolean;
  /** Also copy the service's stderr to ours, as it comes. */
  echoStderr?: boolean;
}

export interface RunningService {
  url: string;
  /** The `node` process itself, for whoever taps its output or watches its resources. */
  child: ChildProcess;
  dataDir: string;
  pid: number;
  /** The org-wide admin key: BROWSERPLANE_API_KEY when set, else the key file's content. */
  adminKey: string;
  /** Every stdout line so far (JSON log lines and the key announcement alike). */
  stdout: string[];
  stderr: string[];
  /** The stdout lines that are JSON log records. */
  logs(): LogLine[];
  /** The key printed on stdout by this start, if it printed one. */
  printedKey(): string | undefined;
  /** Resolves when the process has exited and its output is fully read. */
  exited: Promise<Exit>;
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** A client of the official SDK against this service (maxRetries 0 unless overridden). */
  client(apiKey?: string, options?: Partial<ClientOptions>): Kernel;
  /** Sends the signal and waits for the exit (SIGKILL after 30 s, and then an error). */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
  /** SIGKILL: nothing runs in the service, so its Postgres stays up. */
  kill(): Promise<Exit>;
}

interface Tracked {
  child: ChildProcess;
  exited: Promise<Exit>;
}

const children = new Set<Tracked>();
const ownedDataDirs = new Set<string>();

let distChecked = false;

/** A new, empty data dir under os.tmpdir() (Postgres, running as `postgres` when we are root, must be able to enter it). */
export async function createDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-e2e-'));
  ownedDataDirs.add(dir);
  return dir;
}

export async function startService(options: StartOptions = {}): Promise<RunningService> {
  checkDistOnce();
  const dataDir = options.dataDir ?? (await createDataDir());
  ownedDataDirs.add(dataDir);
  const env = childEnv(options.inheritEnv ? process.env : {}, {
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    // Warm spares off unless a test asks: the product's default (two spares warmed at start
    // for the default project) would add two browsers to every service a test starts, and
    // make "a create starts Chromium" tests take a spare instead. spares tests turn them on.
    BROWSERPLANE_SPARE_BROWSERS: '0',
    ...options.env,
    BROWSERPLANE_DATA_DIR: dataDir,
  });
  const child = spawn(process.execPath, [MAIN_JS], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());

  let exitInfo: Exit | undefined;
  const exited = new Promise<Exit>((resolve) => {
    child.once('close', (code, signal) => {
      exitInfo = { code, signal };
      children.delete(tracked);
      resolve(exitInfo);
      notify();
    });
  });
  const tracked: Tracked = { child, exited };
  children.add(tracked);
  child.once('error', (error) => {
    stderr.push(`spawn failed: ${error.message}`);
    notify();
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    stdout.push(line);
    notify();
  });
  createInterface({ input: child.stderr }).on('line', (line) => {
    stderr.push(line);
    if (options.echoStderr) process.stderr.write(line + '\n');
    notify();
  });

  const logs = () => stdout.flatMap((line) => parseLogLine(line) ?? []);
  const describe = () =>
    `data dir ${dataDir}, exit ${JSON.stringify(exitInfo ?? 'none')}\n--- stdout\n${stdout.join('\n')}\n--- stderr\n${stderr.join('\n')}`;

  const waitForLog = (predicate: (line: LogLine) => boolean, timeoutMs = START_TIMEOUT_MS) =>
    new Promise<LogLine>((resolve, reject) => {
      const check = () => {
        const found = logs().find(predicate);
        if (found) return done(() => resolve(found));
        if (exitInfo) return done(() => reject(new Error(`the service exited before the awaited log line; ${describe()}`)));
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`no matching log line within ${timeoutMs} ms; ${describe()}`))),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        waiters.delete(check);
        settle();
      };
      waiters.add(check);
      check();
    });

  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<Exit> => {
    if (exitInfo) return exitInfo;
    child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS)));
    const result = await Promise.race([exited, timeout]);
    clearTimeout(timer);
    if (result === 'timeout') {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`the service did not exit within ${STOP_TIMEOUT_MS} ms of ${signal}; ${describe()}`);
    }
    return result;
  };

  const service: RunningService = {
    url: '',
    child,
    dataDir,
    pid: child.pid!,
    adminKey: '',
    stdout,
    stderr,
    logs,
    printedKey: () => printedKey(stdout),
    exited,
    waitForLog,
    client: (apiKey = service.adminKey, clientOptions = {}) =>
      new Kernel({ apiKey, baseURL: service.url, maxRetries: 0, ...clientOptions }),
    stop,
    kill: () => stop('SIGKILL'),
  };
  if (options.waitForListening === false) return service;

  try {
    const listening = await waitForLog((line) => line.msg === LISTENING_MSG, START_TIMEOUT_MS);
    service.url = String(listening.url);
    service.adminKey = options.env?.BROWSERPLANE_API_KEY ?? (await readFile(path.join(dataDir, 'admin-api-key'), 'utf8')).trim();
  } catch (error) {
    await stop('SIGKILL').catch(() => undefined);
    throw error;
  }
  return service;
}

/** Stops every service still running (SIGTERM), stops leftover Postgres servers, removes the data dirs. */
export async function cleanupServices(): Promise<void> {
  const problems: unknown[] = [];
  await Promise.all(
    [...children].map(async ({ child, exited }) => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }),
  );
  for (const dir of ownedDataDirs) {
    try {
      await stopLeftoverPostgres(dir);
      await rm(dir, { recursive: true, force: true });
      ownedDataDirs.delete(dir);
    } catch (error) {
      problems.push(error);
    }
  }
  if (problems.length) throw new AggregateError(problems, 'e2e cleanup failed');
}

/**
 * Pids of Postgres servers (postmasters) whose command line names this data dir's cluster.
 * A backend the postmaster has just forked shows the postmaster's command line until it
 * sets its own title, so a match whose parent also matches is that child, not a server.
 */
export function postgresPids(dataDir: string): number[] {
  const clusterDir = path.join(dataDir, 'postgres');
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    let stat: string;
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (path.basename(argv[0] ?? '') !== 'postgres' || !argv.includes(clusterDir)) continue;
    parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  return [...parents].filter(([, parent]) => !parents.has(parent)).map(([pid]) => pid);
}

/** Every item of an async iterable (the SDK's auto-paginating lists); Node 20 has no Array.fromAsync. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Runs the built entry point (the API's unless told) to completion (for --help and config errors). */
export function runMain(args: string[], env: Record<string, string | undefined> = {}, entry = MAIN_JS): Promise<Exit & { stdout: string; stderr: string }> {
  checkDistOnce();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { cwd: REPO_ROOT, env: childEnv({}, env), stdio: ['ignore', 'pipe', 'pipe'] });
    const tracked: Tracked = { child, exited: new Promise((r) => child.once('close', (code, signal) => r({ code, signal }))) };
    children.add(tracked);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    void tracked.exited.then((exit) => {
      clearTimeout(timer);
      children.delete(tracked);
      resolve({ ...exit, stdout, stderr });
    });
  });
}

function parseLogLine(line: string): LogLine | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null && 'msg' in value ? (value as LogLine) : undefined;
  } catch {
    return undefined;
  }
}

function printedKey(stdout: string[]): string | undefined {
  const at = stdout.findIndex((line) => line.includes('created an admin API key'));
  if (at < 0) return undefined;
  return stdout
    .slice(at + 1)
    .map((line) => line.trim())
    .find((line) => line !== '');
}

/** By default a minimal, hermetic environment: nothing from the developer's shell (DATABASE_URL, BROWSERPLANE_*) leaks in. */
function childEnv(base: NodeJS.ProcessEnv, extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), TZ: 'UTC', ...base };
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

async function stopLeftoverPostgres(dataDir: string): Promise<void> {
  // SIGINT is Postgres's "fast" shutdown; SIGQUIT if it does not go within 10 s.
  for (const pid of postgresPids(dataDir)) signal(pid, 'SIGINT');
  const gone = await eventually(() => postgresPids(dataDir).length === 0, { timeoutMs: 10_000, intervalMs: 50 }).catch(() => false);
  if (gone) return;
  for (const pid of postgresPids(dataDir)) signal(pid, 'SIGQUIT');
  await eventually(() => postgresPids(dataDir).length === 0, { timeoutMs: 10_000, intervalMs: 50, what: `Postgres for ${dataDir} to stop` });
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

// Last resort when a worker exits without its hooks: nothing of ours may outlive it.
process.once('exit', () => {
  for (const { child } of children) child.kill('SIGKILL');
  for (const dir of ownedDataDirs) {
    for (const pid of postgresPids(dir)) signal(pid, 'SIGQUIT');
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
});

function checkDistOnce(): void {
  if (distChecked) return;
  assertDistIsFresh();
  distChecked = true;
}

/** The directory of package.json above this file, whether it runs from test/ or from dist/. */
function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

/** Tests of a stale dist/ would test old code: refuse to run when a source is newer than its build. */
function assertDistIsFresh(): void {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run \`make build\` before the e2e tier`);
  const srcRoot = path.join(REPO_ROOT, 'api/src');
  const stale: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const built = path.join(REPO_ROOT, 'dist', path.relative(REPO_ROOT, full)).replace(/\.ts$/, '.js');
        if (!existsSync(built) || statSync(built).mtimeMs < statSync(full).mtimeMs) stale.push(path.relative(REPO_ROOT, full));
      }
    }
  };
  walk(srcRoot);
  if (stale.length) {
    throw new Error(`dist/ is older than ${stale.slice(0, 5).join(', ')}${stale.length > 5 ? ', …' : ''}: run \`make build\` first`);
  }
}
