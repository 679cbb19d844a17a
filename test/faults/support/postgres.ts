import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { appendFile, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { eventually } from '../../support/eventually.js';
import { freePort } from '../../../api/src/db/embedded-postgres.js';
import { binariesFor, prepareDataDir, runAs, runAsUser, type RunAs } from '../../../api/src/db/postgres-user.js';

/**
 * A Postgres server the test owns and can take away from the service: stopped the way an
 * operator stops it (fast shutdown) or killed (SIGKILL on the postmaster), then started
 * again on the same port, so the service's DATABASE_URL stays valid throughout.
 *
 * The postmaster runs as a child of the test process (not through pg_ctl), so a killed
 * one is reaped here at once: a dead postmaster that nobody reaps stays a zombie, and
 * Postgres then takes its pid in postmaster.pid for a live server and refuses to start.
 * Trust authentication on 127.0.0.1 only: this is a throwaway cluster.
 */
export interface OwnedPostgres {
  /** URL of the `browserplane` database, for the service's DATABASE_URL. */
  readonly url: string;
  /** URL of the `postgres` database, for the test's own inspection. */
  readonly adminUrl: string;
  readonly port: number;
  /** Whether the postmaster is running. */
  readonly running: boolean;
  /** Fast shutdown (SIGINT): sessions are terminated, then the server exits cleanly. */
  stopFast(): Promise<void>;
  /** SIGKILL on the postmaster; resolves once its backends have gone too (crash recovery follows at start). */
  kill(): Promise<void>;
  /** Starts the server again on the same port and waits until it accepts connections. */
  start(): Promise<void>;
  /** Client backends connected to the `browserplane` database, by application_name. */
  connections(): Promise<Record<string, number>>;
  /** Stops the server and removes its files. */
  destroy(): Promise<void>;
}

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

export async function startOwnedPostgres(): Promise<OwnedPostgres> {
  const owner = await runAsUser();
  const bin = await binariesFor(owner);
  const postgresBin = path.join(path.dirname(bin.pg_ctl), 'postgres');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-faults-pg-'));
  await prepareDataDir(dir, owner);
  const clusterDir = path.join(dir, 'cluster');
  await mkdir(clusterDir, { mode: 0o700 });
  await chown(clusterDir, owner.uid, owner.gid);
  await runAs(owner, bin.initdb, [`--pgdata=${clusterDir}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C']);
  await appendFile(
    path.join(clusterDir, 'postgresql.conf'),
    "\n# faults test\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nfsync = off\n",
  );
  const port = await freePort();
  const base = `postgres://postgres@127.0.0.1:${port}`;
  const serverLog: string[] = [];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    if (child) throw new Error('Postgres is already running');
    const spawned = spawnPostmaster(postgresBin, clusterDir, port, owner);
    child = spawned;
    exited = new Promise<void>((resolve) => spawned.once('exit', () => resolve()));
    void exited.then(() => {
      if (child === spawned) child = undefined;
    });
    const keep = (chunk: Buffer) => {
      serverLog.push(...chunk.toString().split('\n').filter(Boolean));
      serverLog.splice(0, Math.max(0, serverLog.length - 200));
    };
    spawned.stdout?.on('data', keep);
    spawned.stderr?.on('data', keep);
    await waitUntilAccepting(`${base}/postgres`, () => child === spawned, () => serverLog.slice(-30).join('\n'));
  };

  const stopWith = async (signal: NodeJS.Signals) => {
    const current = child;
    if (!current) return;
    const backends = childPids(current.pid!);
    current.kill(signal);
    await withTimeout(exited, STOP_TIMEOUT_MS, `Postgres to exit on ${signal}`);
    // Orphaned backends hold the old shared memory: a new postmaster refuses to start
    // while any is attached, so wait for them to notice their postmaster died.
    await eventually(() => backends.every((pid) => !alive(pid)), { timeoutMs: STOP_TIMEOUT_MS, intervalMs: 50, what: 'the killed postmaster’s backends to exit' });
  };

  await start();
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  await admin.query('CREATE DATABASE browserplane');
  await admin.end();

  return {
    url: `${base}/browserplane`,
    adminUrl: `${base}/postgres`,
    port,
    get running() {
      return child !== undefined;
    },
    stopFast: () => stopWith('SIGINT'),
    kill: () => stopWith('SIGKILL'),
    start,
    async connections() {
      const client = new pg.Client({ connectionString: `${base}/postgres`, application_name: 'faults-test' });
      await client.connect();
      try {
        const { rows } = await client.query<{ app: string; n: number }>(
          `SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity
            WHERE datname = 'browserplane' AND backend_type = 'client backend' GROUP BY 1`,
        );
        return Object.fromEntries(rows.map((r) => [r.app, r.n]));
      } finally {
        await client.end();
      }
    },
    async destroy() {
      await stopWith('SIGINT').catch(() => stopWith('SIGKILL'));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function spawnPostmaster(postgresBin: string, clusterDir: string, port: number, owner: RunAs): ChildProcess {
  const asOther = process.getuid?.() !== owner.uid;
  return spawn(postgresBin, ['-D', clusterDir, '-p', String(port)], {
    ...(asOther ? { uid: owner.uid, gid: owner.gid } : {}),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', HOME: os.tmpdir() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

async function waitUntilAccepting(url: string, stillRunning: () => boolean, log: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (!stillRunning()) throw new Error(`Postgres exited while starting:\n${log()}`, { cause: error });
      if (Date.now() > deadline) throw new Error(`Postgres did not accept connections within ${START_TIMEOUT_MS} ms:\n${log()}`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Direct children of `pid` (the postmaster's backends and auxiliary processes). */
function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const task of readProc(`/proc/${pid}/task`)) {
    const children = readText(`/proc/${pid}/task/${task}/children`);
    for (const child of children.split(' ').filter(Boolean)) out.push(Number(child));
  }
  return out;
}

function alive(pid: number): boolean {
  // A zombie has released everything it held; only a running process still matters.
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return false;
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

function readProc(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

async function withTimeout(work: Promise<void>, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  try {
    await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
