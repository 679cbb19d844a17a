/**
 * What the soak (bench/soak.ts) measures and serves besides the API: the pages its
 * browsers load, the service's own figures from /proc, the processes and work dirs that
 * belong to this one service (the machine runs others), and its Postgres.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import WebSocket from 'ws';

export interface PageServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Pages at /n/<k> whose #v holds k*7, so a reader proves it loaded this page and ran its
 * script, not a cached or blank one. On its own 127.0.0.N, as a distinct "host".
 */
export async function startPageServer(host: string): Promise<PageServer> {
  const server = http.createServer((request, response) => {
    const k = Number(/^\/n\/(\d+)$/.exec(new URL(request.url ?? '/', 'http://x').pathname)?.[1] ?? 0);
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    response.end(`<!doctype html><title>soak ${k}</title><p id="v"></p><script>document.getElementById('v').textContent = String(${k} * 7)</script>`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Resident memory (VmRSS) and open file descriptors of one process, from /proc. */
export async function processFigures(pid: number): Promise<{ rssBytes: number; fds: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  const fds = (await readdir(`/proc/${pid}/fd`).catch(() => [])).length;
  return { rssBytes: rssKb * 1024, fds };
}

/** Where the local runtime puts each browser's work dir (api/src/runtime/local-runtime.ts). */
export const WORK_ROOT = path.join(os.tmpdir(), 'browserplane-browsers');

/** The runtime's work dir name for a browser id (mirrors workDirName in local-runtime.ts). */
export function workDirOf(browserId: string): string {
  const name = browserId.length <= 24 ? browserId : createHash('sha256').update(browserId).digest('hex').slice(0, 16);
  return path.join(WORK_ROOT, name);
}

export interface ProcessCounts {
  /** Descendants of the service process (not the service itself). */
  tree: number;
  /** Ours by kind, anywhere on the machine (reparented orphans included). */
  agents: number;
  chromium: number;
  xvfb: number;
  /**
   * The embedded Postgres: the service's own child since it supervises it (restarts it
   * when it dies), so part of its tree while it runs; checked gone after the service stops.
   */
  postgres: number;
  other: number;
  /**
   * Ours outside the service's tree. Chromium's crashpad handler daemonises (two per browser,
   * reparented to init) and leaves with its browser; anything else here lost its parent.
   */
  detached: number;
}

interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  text: string;
}

async function readProc(pid: number): Promise<Proc | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  // Kernel threads have neither; reading environ needs root (or the same user), which the soak has.
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  return { pid, ppid, comm, text: `${cmdline}\0${environ}\0` };
}

/**
 * The processes of this service, found two ways because each misses something: the
 * service's process tree (but an agent or Chromium whose parent died is reparented out
 * of it), and, machine-wide, processes whose command line or environment names one of
 * this service's browser work dirs or (standby agents) the service as their parent. The
 * descendants of either are ours too (Chromium's zygote and renderers name neither).
 */
export async function countProcesses(servicePid: number | undefined, browserIds: Iterable<string>): Promise<ProcessCounts> {
  const procs = (await Promise.all((await readdir('/proc')).filter((e) => /^\d+$/.test(e)).map((e) => readProc(Number(e))))).filter(
    (p): p is Proc => p !== undefined,
  );
  const markers = [...browserIds].map((id) => workDirOf(id));
  const standbyMarker = servicePid === undefined ? undefined : `AGENT_PARENT_PID=${servicePid}\0`;
  const names = (p: Proc) =>
    (standbyMarker !== undefined && p.text.includes(standbyMarker)) ||
    markers.some((m) => p.text.includes(m + '/') || p.text.includes(m + '\0'));
  const children = new Map<number, Proc[]>();
  for (const p of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const below = (root: number, into: Set<number>) => {
    for (const child of children.get(root) ?? []) {
      if (!into.has(child.pid)) {
        into.add(child.pid);
        below(child.pid, into);
      }
    }
  };
  const tree = new Set<number>();
  if (servicePid !== undefined) below(servicePid, tree);
  const ours = new Set(tree);
  for (const p of procs) {
    if (p.pid !== servicePid && !ours.has(p.pid) && names(p)) {
      ours.add(p.pid);
      below(p.pid, ours);
    }
  }
  const counts: ProcessCounts = { tree: tree.size, agents: 0, chromium: 0, xvfb: 0, postgres: 0, other: 0, detached: 0 };
  for (const p of procs) {
    if (!ours.has(p.pid)) continue;
    if (!tree.has(p.pid)) counts.detached++;
    if (p.comm === 'node' || p.comm.startsWith('MainThread')) counts.agents++;
    else if (p.comm.startsWith('chrom')) counts.chromium++;
    else if (p.comm === 'Xvfb') counts.xvfb++;
    else if (p.comm === 'postgres' && tree.has(p.pid)) counts.postgres++;
    else counts.other++;
  }
  return counts;
}

/** Work dirs of these browsers that still exist. */
export function leftWorkDirs(browserIds: Iterable<string>): string[] {
  return [...browserIds].map(workDirOf).filter((dir) => existsSync(dir));
}

export interface DatabaseFigures {
  /** Backends connected to the service's database, this probe's own excluded. */
  connections: number;
  /** Sessions admitted but not yet launched (phase starting): transient. */
  starting: number;
  /** Sessions not deleted, pool browsers included. */
  live: number;
  leased: number;
  /** Invocations queued or running: transient (the soak finishes each one it starts). */
  openInvocations: number;
  /** Every browser id this service ever made, deleted ones too: the work dirs and processes to look for. */
  browserIds: string[];
}

const PROBE_NAME = 'browserplane-soak-probe';

/**
 * A connection to the embedded Postgres of a data dir: its password is in the data dir
 * (postgres-password, api/src/db/embedded-postgres.ts) and the port on line 4 of the
 * cluster's postmaster.pid (the server picks a free port at each start).
 */
export async function connectToDataDir(dataDir: string): Promise<pg.Client> {
  const password = (await readFile(path.join(dataDir, 'postgres-password'), 'utf8')).trim();
  const port = Number((await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[3]);
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'browserplane', application_name: PROBE_NAME });
  await client.connect();
  return client;
}

export async function databaseFigures(client: pg.Client): Promise<DatabaseFigures> {
  const activity = await client.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
  );
  const sessions = await client.query<{ starting: string; live: string; leased: string }>(
    `SELECT count(*) FILTER (WHERE phase = 'starting') AS starting, count(*) AS live, count(leased_at) AS leased
       FROM browser_sessions WHERE deleted_at IS NULL`,
  );
  const invocations = await client.query<{ n: string }>(`SELECT count(*) AS n FROM invocations WHERE status IN ('queued', 'running')`);
  const ids = await client.query<{ id: string }>('SELECT id FROM browser_sessions');
  return {
    connections: Number(activity.rows[0]!.n),
    starting: Number(sessions.rows[0]!.starting),
    live: Number(sessions.rows[0]!.live),
    leased: Number(sessions.rows[0]!.leased),
    openInvocations: Number(invocations.rows[0]!.n),
    browserIds: ids.rows.map((r) => r.id),
  };
}

/** The median of the numbers among `values` (NaN, a missed reading, is left out). */
export function median(values: number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * The service's live heap: its heap used right after a full collection, read through the
 * V8 inspector the service was started with (--inspect on a loopback port). Heap used as
 * /metrics reports it rises and falls by tens of MiB with the collector's timing; after a
 * full collection it is what the process really holds, so a slow leak shows in minutes.
 */
export class LiveHeap {
  private nextId = 0;
  private constructor(private readonly ws: WebSocket) {}

  static async connect(port: number): Promise<LiveHeap> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
    const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const heap = new LiveHeap(ws);
    await heap.call('HeapProfiler.enable');
    return heap;
  }

  private call(method: string, params: object = {}): Promise<{ result?: { value?: unknown } }> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`${method}: no answer from the inspector in 30 s`)), 30_000);
      const onMessage = (data: WebSocket.RawData) => {
        const message = JSON.parse((data as Buffer).toString('utf8')) as { id?: number; result?: { result?: { value?: unknown } } };
        if (message.id === id) done(undefined, message.result);
      };
      const done = (error?: Error, result?: { result?: { value?: unknown } }) => {
        clearTimeout(timer);
        this.ws.off('message', onMessage);
        if (error) reject(error);
        else resolve(result ?? {});
      };
      this.ws.on('message', onMessage);
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async bytes(): Promise<number> {
    await this.call('HeapProfiler.collectGarbage');
    const answer = await this.call('Runtime.evaluate', { expression: 'process.memoryUsage().heapUsed' });
    return Number(answer.result?.value);
  }

  close(): void {
    this.ws.close();
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
