import { spawn } from 'node:child_process';
import { open, readdir, readFile, readlink, realpath, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { spawnOptionsFor, type RunAs } from './postgres-user.js';

/**
 * One Postgres server process (the postmaster), run as a child of this process rather
 * than through `pg_ctl start`. pg_ctl hands the server to init, so its death is seen by
 * nobody: nothing can restart it, and until init reaps it (some inits never do) Postgres
 * takes the zombie for a live server and refuses to start. As our child it is reaped at
 * once and its exit is an event. `detached` gives it its own session, as pg_ctl did, so a
 * terminal's Ctrl-C reaches only us and requests drain before the database stops.
 */
export interface Postmaster {
  readonly pid: number;
  /** How it ended, once it has; it is reaped by then. */
  readonly exited: Promise<PostmasterExit>;
  readonly exit: PostmasterExit | undefined;
  /**
   * Fast shutdown (SIGINT, what `pg_ctl stop -m fast` sends): sessions end, the server
   * checkpoints and exits. Immediate shutdown (SIGQUIT) if that takes longer than
   * `timeoutMs`, then SIGKILL. Resolves once it has exited.
   */
  stop(timeoutMs: number): Promise<void>;
}

export interface PostmasterExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface PostmasterOptions {
  /** The `postgres` binary. */
  postgres: string;
  clusterDir: string;
  port: number;
  /** Also listen on a Unix socket in this directory (besides loopback TCP). */
  socketDir?: string | undefined;
  owner: RunAs;
  /** Its stdout and stderr are appended here (Postgres logs to stderr). */
  logFile: string;
  /** How long it may take to accept connections, crash recovery included. */
  readyTimeoutMs: number;
  /** On a restart: the pids of our postmasters that exited, whose lock file is stale. */
  reaped?: ReadonlySet<number> | undefined;
  log: Logger;
}

export const describeExit = (exit: PostmasterExit): string =>
  exit.signal ? `was killed by ${exit.signal}` : `exited with code ${String(exit.code)}`;

/**
 * Starts a postmaster and resolves once it accepts connections. On any failure the
 * process is gone (stopped if it was still starting) and the error carries the end of
 * what it logged.
 */
export async function startPostmaster(options: PostmasterOptions): Promise<Postmaster> {
  const { clusterDir, logFile } = options;
  await waitForOldServerProcesses(clusterDir, options.log);
  if (options.reaped) await removeStaleLockFile(clusterDir, options.reaped, options.log);
  const logStart = await stat(logFile).then((s) => s.size).catch(() => 0);
  const postmaster = await spawnPostmaster(options);
  try {
    await waitUntilReady(clusterDir, postmaster, options.readyTimeoutMs);
    return postmaster;
  } catch (error) {
    await postmaster.stop(10_000).catch(() => undefined);
    const logged = await readFile(logFile, 'utf8').then((text) => text.slice(logStart)).catch(() => '');
    const tail = logged.trim().split('\n').slice(-6).join('\n');
    throw new Error(`${(error as Error).message}${tail ? `:\n${tail}` : ''}`, { cause: error });
  }
}

async function spawnPostmaster(options: PostmasterOptions): Promise<Postmaster> {
  const logFd = await open(options.logFile, 'a', 0o600);
  try {
    // On the command line: it overrides postgresql.conf, whose unix_socket_directories is ''.
    const socket = options.socketDir === undefined ? [] : ['-c', `unix_socket_directories=${options.socketDir}`];
    const child = spawn(options.postgres, ['-D', options.clusterDir, '-p', String(options.port), ...socket], {
      ...spawnOptionsFor(options.owner),
      detached: true,
      stdio: ['ignore', logFd.fd, logFd.fd],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    // Its exit is watched through the event; it must not hold the event loop open itself.
    child.unref();
    const state: { exit?: PostmasterExit } = {};
    const exited = new Promise<PostmasterExit>((resolve) =>
      child.once('exit', (code, signal) => {
        state.exit = { code, signal };
        resolve(state.exit);
      }),
    );
    const postmaster: Postmaster = {
      pid: child.pid!,
      exited,
      get exit() {
        return state.exit;
      },
      // Through the child handle: once it is reaped, its pid is never signalled.
      stop: (timeoutMs) => stopPostmaster(postmaster, (signal) => child.kill(signal), timeoutMs),
    };
    return postmaster;
  } finally {
    await logFd.close();
  }
}

/** What `pg_ctl start -w` waits for: postmaster.pid naming this process, with status "ready". */
async function waitUntilReady(clusterDir: string, postmaster: Postmaster, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (postmaster.exit) throw new Error(`Postgres ${describeExit(postmaster.exit)} while starting`);
    const lines = await readLockFile(clusterDir);
    if (Number(lines[0]) === postmaster.pid && lines[7]?.trim() === 'ready') return;
    if (Date.now() > deadline) throw new Error(`Postgres did not accept connections within ${timeoutMs} ms`);
    await Promise.race([postmaster.exited, delay(50)]);
  }
}

async function stopPostmaster(postmaster: Postmaster, kill: (signal: NodeJS.Signals) => void, timeoutMs: number): Promise<void> {
  for (const [signal, wait] of [['SIGINT', timeoutMs], ['SIGQUIT', 10_000], ['SIGKILL', 10_000]] as const) {
    if (postmaster.exit) return;
    kill(signal);
    if (await exitsWithin(postmaster, wait)) return;
  }
  throw new Error(`Postgres (pid ${postmaster.pid}) did not exit, even on SIGKILL`);
}

/**
 * A killed postmaster's backends live on until they notice, and hold its shared memory
 * meanwhile: Postgres refuses to start on the data dir while any is attached. They run in
 * the cluster dir (the postmaster changes into it), which is how they are found. Waits a
 * few seconds for them; a start that still finds one fails and is retried.
 */
async function waitForOldServerProcesses(clusterDir: string, log: Logger, timeoutMs = 5_000): Promise<void> {
  let pids = await processesIn(clusterDir);
  if (pids.length === 0) return;
  log.warn({ component: 'postgres', pids }, 'waiting for server processes of the previous Postgres to exit');
  const deadline = Date.now() + timeoutMs;
  while (pids.length > 0 && Date.now() < deadline) {
    await delay(50);
    pids = await processesIn(clusterDir);
  }
}

/**
 * postmaster.pid of a server we reaped names a pid that is free, which Postgres sees for
 * itself, or one the system has since given to an unrelated process, which Postgres takes
 * for a live server ("lock file already exists") and refuses to start. Only then is it
 * removed, and only when the pid is one of our reaped postmasters and no process runs in
 * the cluster dir, so no old backend can still hold the shared memory the file guards.
 */
async function removeStaleLockFile(clusterDir: string, reapedPids: ReadonlySet<number>, log: Logger): Promise<void> {
  const pid = Number((await readLockFile(clusterDir))[0]);
  if (!reapedPids.has(pid) || !isAlive(pid) || (await processesIn(clusterDir)).length > 0) return;
  await unlink(path.join(clusterDir, 'postmaster.pid')).catch(() => undefined);
  log.warn({ component: 'postgres', pid }, 'removed the lock file of the exited Postgres server: its pid now belongs to another process');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readLockFile(clusterDir: string): Promise<string[]> {
  return (await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
}

/** Live (not zombie) processes whose working directory is `dir`. Empty without /proc. */
async function processesIn(dir: string): Promise<number[]> {
  dir = await realpath(dir).catch(() => dir);
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => undefined);
    if (cwd !== dir) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (stat && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z') found.push(Number(entry));
  }
  return found;
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether it exits within `ms`; the timer is cleared either way, so a stopped service is not kept waiting on it. */
async function exitsWithin(postmaster: Postmaster, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([postmaster.exited.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
