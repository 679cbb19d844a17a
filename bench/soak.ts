/**
 * Soak: the built service under steady mixed work for SOAK_MINUTES (default 60), with its
 * resources sampled every SOAK_SAMPLE_SECONDS (default: 10, fewer in short runs). Fails
 * (exit 1, with the reasons) when a resource grows beyond its bound after warm-up, an
 * operation fails too often, or anything is left once the work has stopped and the
 * service is stopped. The bounds are explained at BOUNDS.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type pg from 'pg';
import { freePort } from '../api/src/db/embedded-postgres.js';
import { Api, churnLoop, poolClientLoop, sessionLoop, Tally, type LoopContext } from './soak-loops.js';
import { summarise, type Sample } from './soak-report.js';
import {
  connectToDataDir,
  countProcesses,
  databaseFigures,
  leftWorkDirs,
  LiveHeap,
  processFigures,
  sleep,
  startPageServer,
  type PageServer,
} from './soak-support.js';
import { cleanupServices, startService } from '../test/support/service.js';

const env = (name: string, fallback: number) => (process.env[name] === undefined ? fallback : Number(process.env[name]));
const MINUTES = env('SOAK_MINUTES', 60);
const SAMPLE_SECONDS = env('SOAK_SAMPLE_SECONDS', Math.min(10, Math.max(2, (MINUTES * 60) / 36)));
const SESSION_LOOPS = env('SOAK_SESSION_LOOPS', 2);
const POOL_SIZE = env('SOAK_POOL_SIZE', 2);
/** More clients than browsers, so acquires wait for releases. */
const POOL_CLIENTS = POOL_SIZE + 1;
const STANDBY_AGENTS = 1;
const CHURN_PAUSE_MS = 250;
/** Pool fill, first launches and Node's own warm-up (JIT, pools, caches) are not growth. */
const WARMUP_SECONDS = Math.min(60, MINUTES * 12);
/** Every operation has a limit of at most 90 s, so loops end within this of the deadline. */
const DRAIN_MS = 200_000;
const QUIESCE_MS = 120_000;

async function main(): Promise<void> {
  if (!(MINUTES > 0) || !(SAMPLE_SECONDS > 0)) throw new Error('SOAK_MINUTES and SOAK_SAMPLE_SECONDS must be positive numbers');
  // The inspector on a loopback port lets the soak read the heap after a full collection (LiveHeap).
  const inspectorPort = await freePort();
  const service = await startService({
    inheritEnv: true, echoStderr: true,
    env: {
      BROWSERPLANE_STANDBY_AGENTS: String(STANDBY_AGENTS),
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:${inspectorPort}`.trim(),
    },
  });
  const log = tapServiceLog(service.child);
  const failures: string[] = [];
  const pages: PageServer[] = [];
  let probe: pg.Client | undefined;
  let heap: LiveHeap | undefined;
  const browserIds = new Set<string>();
  const samples: Sample[] = [];
  const tally = new Tally();
  try {
    const url = service.url;
    const pid = service.child.pid!;
    probe = await connectToDataDir(service.dataDir);
    heap = await LiveHeap.connect(inspectorPort);
    pages.push(await startPageServer('127.0.0.2'), await startPageServer('127.0.0.3'));
    const api = new Api(url, service.adminKey);
    const t0 = Date.now();
    const take = async (phase: Sample['phase']) => {
      const s = await sample(pid, heap!, probe!, tally, browserIds, service.dataDir, phase, (Date.now() - t0) / 1000);
      samples.push(s);
      console.log(formatSample(s, tally));
      return s;
    };
    console.log(
      `Soak: ${MINUTES} min, a sample every ${SAMPLE_SECONDS.toFixed(1)} s, warm-up ${WARMUP_SECONDS} s; ` +
        `${SESSION_LOOPS} session loops, a pool of ${POOL_SIZE} with ${POOL_CLIENTS} clients, API churn with SSE; service pid ${pid}`,
    );
    console.log('  time | ops ok/failed | service RSS, live heap MiB, fds | processes: service tree, ours: agents chromium Xvfb other, of them outside the tree | PG conns | rows: starting live leased open-invocations');

    const pool = await api.call('POST', '/browser_pools', {
      // The rate is a percentage of the size per minute: 1500 % of 2 is one browser every 2 s,
      // so browsers closed by reuse-false releases come back while clients wait.
      body: { name: 'soak', size: POOL_SIZE, fill_rate_per_minute: 1500, headless: true, timeout_seconds: 120 },
      expect: [200],
    });
    const route = `/browser_pools/${(pool.body as { id: string }).id}`;
    const deadline = t0 + MINUTES * 60_000;
    const ctx = (perSecond: number): LoopContext => ({ api, tally, stopping: () => Date.now() >= deadline, maxIterations: Math.ceil(MINUTES * 60 * perSecond) });
    let running = true;
    const loops = Promise.all([
      ...Array.from({ length: SESSION_LOOPS }, (_, i) => sessionLoop(ctx(1), i, pages[0]!.url)),
      ...Array.from({ length: POOL_CLIENTS }, (_, i) => poolClientLoop(ctx(1), route, i, pages[1]!.url)),
      churnLoop(ctx(4), CHURN_PAUSE_MS),
    ]).finally(() => (running = false));

    for (let tick = 1; running; tick++) {
      await Promise.race([sleep(t0 + tick * SAMPLE_SECONDS * 1000 - Date.now()), loops]);
      if (running) await take('load');
      if (running && Date.now() > deadline + DRAIN_MS) {
        failures.push(`the loops did not stop within ${DRAIN_MS / 1000} s of the deadline`);
        break;
      }
    }
    await cleanUp(api, route, failures);
    const clean = await waitUntilQuiet(take, browserIds, service.dataDir);
    if (clean.length) failures.push(`left after cleanup (${QUIESCE_MS / 1000} s): ${clean.join(', ')}`);
    failures.push(...summarise(samples, tally, { warmupSeconds: WARMUP_SECONDS, poolMax: env('DATABASE_POOL_MAX', 10) }));
    await probe.end();
    probe = undefined;
    heap.close();
    heap = undefined;
    const postmaster = Number(readFileSync(path.join(service.dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
    await service.stop();
    const afterStop = await leftAfterStop(pid, postmaster, browserIds);
    if (afterStop.length) failures.push(`left after the service stopped: ${afterStop.join(', ')}`);
    else console.log('After the service stopped: no process, work dir or Postgres server of it left.');
  } finally {
    heap?.close();
    await probe?.end().catch(() => undefined);
    await Promise.all(pages.map((p) => p.close()));
    await service.stop();
    await cleanupServices();
  }
  console.log(log.line());
  if (failures.length) {
    console.log(`\nSOAK FAILED:\n${failures.map((f) => `- ${f}`).join('\n')}`);
    process.exitCode = 1;
  } else {
    console.log('\nSOAK PASSED: resources flat within their bounds, error rates within bounds, nothing left behind.');
  }
}

async function sample(
  pid: number,
  heap: LiveHeap,
  probe: pg.Client,
  tally: Tally,
  browserIds: Set<string>,
  dataDir: string,
  phase: Sample['phase'],
  t: number,
): Promise<Sample> {
  // A missed reading (the inspector busy) is a gap in the figures, not a reason to stop the soak.
  const heapBytes = await heap.bytes().catch(() => NaN);
  const [figures, db] = await Promise.all([processFigures(pid), databaseFigures(probe)]);
  for (const id of db.browserIds) browserIds.add(id);
  const procs = await countProcesses(pid, browserIds);
  const { browserIds: _ids, ...rows } = db;
  return {
    t,
    phase,
    cycles: tally.cycles,
    rssBytes: figures.rssBytes,
    heapBytes,
    fds: figures.fds,
    procs,
    rows,
    workDirs: phase === 'cleanup' ? leftWorkDirs(browserIds).length : undefined,
    records: phase === 'cleanup' ? browserRecords(dataDir) : undefined,
  };
}

/** Browsers the local runtime still keeps a record of (data dir's browsers/<id>.json). */
function browserRecords(dataDir: string): number {
  const dir = path.join(dataDir, 'browsers');
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')).length : 0;
}

function formatSample(s: Sample, tally: Tally): string {
  const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
  const p = s.procs;
  return (
    `${s.t.toFixed(0).padStart(5)}s${s.phase === 'cleanup' ? '*' : ' '}| ${tally.line()} | ${mib(s.rssBytes)} ${mib(s.heapBytes)} ${s.fds} | ` +
    `${p.tree}; ${p.agents} ${p.chromium} ${p.xvfb} ${p.other} ${p.detached} | ${s.rows.connections} | ` +
    `${s.rows.starting} ${s.rows.live} ${s.rows.leased} ${s.rows.openInvocations}` +
    (s.phase === 'cleanup' ? ` | work dirs ${s.workDirs}, runtime records ${s.records}` : '')
  );
}

/** The pool deleted; any session the loops left is a finding (each loop deletes its own), and is deleted. */
async function cleanUp(api: Api, route: string, failures: string[]): Promise<void> {
  await api.call('DELETE', route, { body: { force: true }, expect: [204] });
  const left = (await api.call('GET', '/browsers?limit=100', { expect: [200] })).body as { session_id: string }[];
  if (left.length) failures.push(`${left.length} session(s) still active after the loops ended`);
  for (const s of left) await api.call('DELETE', `/browsers/${s.session_id}`, { expect: [204, 404] });
}

/** Samples until nothing but the standby agent is left; what is still there after QUIESCE_MS. */
async function waitUntilQuiet(take: (phase: Sample['phase']) => Promise<Sample>, browserIds: Set<string>, dataDir: string): Promise<string[]> {
  const deadline = Date.now() + QUIESCE_MS;
  for (;;) {
    const s = await take('cleanup');
    const left = [
      s.rows.live && `${s.rows.live} live session rows`,
      s.rows.starting && `${s.rows.starting} rows in phase starting`,
      s.rows.openInvocations && `${s.rows.openInvocations} open invocations`,
      s.procs.agents > STANDBY_AGENTS && `${s.procs.agents} agents (standby: ${STANDBY_AGENTS})`,
      s.procs.chromium && `${s.procs.chromium} Chromium processes`,
      s.procs.xvfb && `${s.procs.xvfb} Xvfb`,
      s.procs.other && `${s.procs.other} other processes`,
      s.procs.detached && `${s.procs.detached} processes outside the service's tree`,
      s.workDirs && `${s.workDirs} work dirs (${leftWorkDirs(browserIds).slice(0, 3).join(' ')})`,
      s.records && `${s.records} runtime records in ${path.join(dataDir, 'browsers')}`,
    ].filter((x): x is string => typeof x === 'string');
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(2000);
  }
}

/** Once the service has exited: none of its processes, work dirs or Postgres server may remain (30 s grace). */
async function leftAfterStop(pid: number, postmaster: number, browserIds: Set<string>): Promise<string[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const procs = await countProcesses(pid, browserIds);
    const ours = procs.agents + procs.chromium + procs.xvfb + procs.other;
    const dirs = leftWorkDirs(browserIds);
    const pgAlive = existsSync(`/proc/${postmaster}`);
    const left = [ours && `${ours} processes`, dirs.length && `${dirs.length} work dirs`, pgAlive && `Postgres (pid ${postmaster})`].filter(
      (x): x is string => typeof x === 'string',
    );
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(1000);
  }
}

/** Counts the service's warnings and errors by message, for the report. */
function tapServiceLog(child: ChildProcess): { line(): string } {
  const counts = new Map<string, number>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string };
      if ((entry.level ?? 0) >= 40) {
        const key = `${entry.level! >= 50 ? 'error' : 'warn'}: ${entry.msg ?? '?'}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    } catch {
      // not a log line
    }
  });
  return {
    line: () =>
      counts.size === 0
        ? 'Service log: no warnings or errors.'
        : `Service log warnings and errors:\n${[...counts].map(([msg, n]) => `  ${n} × ${msg}`).join('\n')}`,
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
