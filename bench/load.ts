/**
 * Load benchmark (issue 8, "Load"). In one run of the built service, on this machine:
 * - event streams: BENCH_SSE_STREAMS (1,000) clients follow one invocation at once and
 *   hold for BENCH_SSE_HOLD_S; heartbeats counted per stream, the service's RSS and open
 *   files before, during and after, and two published changes timed until every stream
 *   has them;
 * - the API with 1, 50 and BENCH_IDLE_SESSIONS (100) idle headless sessions: autocannon
 *   against GET /browsers/{id}, GET /browsers (one page of up to 100),
 *   GET /credentials/{id}/totp-code and the baseline GET /healthz, at one connection
 *   (latency) and BENCH_CONNECTIONS (throughput).
 * Every session is deleted and the service stopped on exit, failure or signal included.
 */
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type autocannon from 'autocannon';
import { DEFAULT_HEARTBEAT_MS } from '../api/src/modules/invocations/routes.js';
import {
  callJson,
  machineMemoryUsed,
  mib,
  openFilesLimit,
  processCount,
  processStats,
  quantile,
  runAutocannon,
  tapServiceErrors,
  type ProcessStats,
  type Scenario,
} from './load-support.js';
import { measureStreams, printStreams } from './load-streams.js';
import { cleanupServices, startService, type RunningService } from '../test/support/service.js';

const IDLE_SESSIONS = Number(process.env.BENCH_IDLE_SESSIONS ?? 100);
const STREAMS = Number(process.env.BENCH_SSE_STREAMS ?? 1000);
const HOLD_S = Number(process.env.BENCH_SSE_HOLD_S ?? 45);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
// Sessions started at once: enough to fill 100 in about a minute, few enough that a busy
// 2-core machine starts each within the 30 s launch timeout.
const CREATE_CONCURRENCY = Number(process.env.BENCH_CREATE_CONCURRENCY ?? 4);
// Deletes mostly wait for Chromium to close and its processes to exit, so more overlap.
const DELETE_CONCURRENCY = 16;
const LIST_PAGE = 100;
const TARGET_P99_MS = 50;
// Stop adding sessions below this much available memory: "as many as fit".
const MIN_AVAILABLE_BYTES = 1024 ** 3;
const SETTLE_MS = 3000;

const MAX_CREATE_ATTEMPTS = 3;
const launchFailures: string[] = [];

// Set by SIGINT or SIGTERM: the cleanup has started, so the run must not add to what it removes.
let interrupted = false;
function throwIfInterrupted(): void {
  if (interrupted) throw new Error('interrupted');
}

interface Session {
  id: string;
  agentPid: number;
  workDir: string;
}

interface Phase {
  sessions: number;
  memoryUsed: number;
  /** The 1-minute load average when the phase ended: other work on the machine shows here. */
  loadAverage: number;
  processes: number;
  service: ProcessStats;
  rows: { scenario: Scenario; connections: number; result: autocannon.Result }[];
}

async function main(): Promise<void> {
  const ownLimit = await openFilesLimit('self');
  if (ownLimit < STREAMS + 256) {
    throw new Error(`open files limit ${ownLimit} is too low for ${STREAMS} streams: raise it (ulimit -n ${STREAMS * 2 + 1024}) or lower BENCH_SSE_STREAMS`);
  }
  // The org cap is operator configuration (environment), default 100: room for every idle session.
  const service = await startService({ inheritEnv: true, echoStderr: true, env: { BROWSERPLANE_ORG_MAX_CONCURRENT_SESSIONS: String(Math.max(100, IDLE_SESSIONS)) } });
  const sessions: Session[] = [];
  const reached: { url?: string } = {};
  const cleanup = once(() => cleanUp(service, reached.url, sessions));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      interrupted = true;
      console.error(`\n${signal}: deleting the sessions and stopping the service`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  const serviceErrors = tapServiceErrors(service.child);
  try {
    const url = service.url;
    reached.url = url;
    const pid = service.child.pid!;
    const auth = { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' };
    printMachine(ownLimit, await openFilesLimit(pid));

    const streams = await measureStreams(url, auth, pid, { streams: STREAMS, holdS: HOLD_S });
    printStreams(streams, DEFAULT_HEARTBEAT_MS);

    const credential = await callJson<{ id: string }>(url, 'POST', '/credentials', auth, 200, {
      name: 'bench',
      domain: 'example.com',
      values: { username: 'u', password: 'p' },
      totp_secret: 'JBSWY3DPEHPK3PXP',
    });
    const creates: number[] = [];
    const phases: Phase[] = [];
    for (const target of [...new Set([1, Math.min(50, IDLE_SESSIONS), IDLE_SESSIONS])]) {
      await addSessions(url, auth, service.dataDir, sessions, target, creates);
      await sleep(SETTLE_MS); // let the last Chromiums finish loading about:blank
      phases.push(await measurePhase(url, auth, pid, sessions, credential.id));
      if (sessions.length < target) break; // the machine is full
    }
    const removal = await removeAll(url, auth, service.dataDir, sessions);
    throwIfInterrupted();
    printApi(phases, creates, removal);
    const errors = [...serviceErrors].map(([message, n]) => `${n} × ${message}`);
    console.log(`\nService error log lines during the run: ${errors.length ? `\n- ${errors.join('\n- ')}` : 'none'}`);
  } finally {
    await cleanup();
  }
}

function printMachine(ownLimit: number, serviceLimit: number): void {
  const cpus = os.cpus();
  const gib = (bytes: number) => (bytes / 1024 ** 3).toFixed(1);
  console.log(`\nMachine: ${cpus.length} cores (${cpus[0]?.model ?? 'unknown'}), ${gib(os.totalmem())} GiB memory (${gib(os.freemem())} free)`);
  console.log(`Load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; open files limit: bench ${ownLimit}, service ${serviceLimit}`);
}

/** Starts sessions, CREATE_CONCURRENCY at a time, until there are `target` (or memory runs short). */
async function addSessions(url: string, auth: Record<string, string>, dataDir: string, sessions: Session[], target: number, creates: number[]): Promise<void> {
  const t0 = performance.now();
  const before = sessions.length;
  while (sessions.length < target) {
    throwIfInterrupted();
    const available = os.totalmem() - (await machineMemoryUsed());
    if (available < MIN_AVAILABLE_BYTES) {
      console.log(`Stopping at ${sessions.length} sessions: ${mib(available)} MiB of memory available`);
      return;
    }
    const batch = Math.min(CREATE_CONCURRENCY, target - sessions.length);
    const created = await Promise.allSettled(Array.from({ length: batch }, () => createSession(url, auth, dataDir, creates)));
    for (const result of created) if (result.status === 'fulfilled') sessions.push(result.value);
    const failed = created.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }
  console.log(`${sessions.length - before} session(s) started in ${((performance.now() - t0) / 1000).toFixed(1)} s (now ${sessions.length})`);
}

async function createSession(url: string, auth: Record<string, string>, dataDir: string, creates: number[]): Promise<Session> {
  let session: { session_id: string } | undefined;
  for (let attempt = 1; !session; attempt++) {
    const t0 = performance.now();
    try {
      // An hour without a CDP client: idle for the whole run, never reaped under it.
      session = await callJson<{ session_id: string }>(url, 'POST', '/browsers', auth, 200, { headless: true, timeout_seconds: 3600 });
      creates.push(performance.now() - t0);
    } catch (error) {
      // A failed launch (502) is counted and printed, and retried so one does not void the run.
      const message = (error as Error).message;
      if (!message.includes(': 502 ') || attempt >= MAX_CREATE_ATTEMPTS) throw error;
      launchFailures.push(message);
    }
  }
  const record = JSON.parse(await readFile(path.join(dataDir, 'browsers', `${session.session_id}.json`), 'utf8')) as Omit<Session, 'id'>;
  return { id: session.session_id, agentPid: record.agentPid, workDir: record.workDir };
}

/** Each scenario at one connection (latency) and at CONNECTIONS (throughput). */
async function measurePhase(url: string, auth: Record<string, string>, pid: number, sessions: Session[], credentialId: string): Promise<Phase> {
  const scenarios: Scenario[] = [
    { name: 'GET /healthz (baseline: no auth, no database)', path: '/healthz' },
    { name: 'GET /browsers/{id}', path: `/browsers/${sessions[0]!.id}` },
    { name: `GET /browsers?limit=${LIST_PAGE} (${Math.min(LIST_PAGE, sessions.length)} items)`, path: `/browsers?limit=${LIST_PAGE}` },
    { name: 'GET /credentials/{id}/totp-code', path: `/credentials/${credentialId}/totp-code` },
  ];
  const phase: Phase = { sessions: sessions.length, memoryUsed: await machineMemoryUsed(), service: await processStats(pid), loadAverage: 0, processes: await processCount(), rows: [] };
  for (const connections of [...new Set([1, CONNECTIONS])]) {
    for (const scenario of scenarios) {
      throwIfInterrupted();
      phase.rows.push({ scenario, connections, result: await runAutocannon(url, scenario, auth, { connections, durationS: DURATION_S }) });
    }
  }
  phase.loadAverage = os.loadavg()[0]!;
  return phase;
}

interface Removal {
  ms: number;
  /** Each DELETE's round trip. */
  each: number[];
  leftActive: number;
  leftProcesses: number;
  leftRecords: number;
}

/** Deletes every session, then checks the API, the process table and the runtime's records. */
async function removeAll(url: string, auth: Record<string, string>, dataDir: string, sessions: Session[]): Promise<Removal> {
  const t0 = performance.now();
  const pids = sessions.map((s) => s.agentPid);
  const each = await deleteSessions(url, auth, sessions);
  const ms = performance.now() - t0;
  const active = await callJson<unknown[]>(url, 'GET', `/browsers?limit=${LIST_PAGE}`, auth, 200);
  const records = (await readdir(path.join(dataDir, 'browsers')).catch(() => [])).filter((f) => f.endsWith('.json'));
  return { ms, each, leftActive: active.length, leftProcesses: pids.filter(isAlive).length, leftRecords: records.length };
}

/** DELETE for each session, DELETE_CONCURRENCY at a time; a session is forgotten once its delete answered. Each delete's ms. */
async function deleteSessions(url: string, auth: Record<string, string>, sessions: Session[]): Promise<number[]> {
  const failures: string[] = [];
  const times: number[] = [];
  const worker = async () => {
    for (let s = sessions.pop(); s; s = sessions.pop()) {
      const t0 = performance.now();
      const res = await fetch(`${url}/browsers/${s.id}`, { method: 'DELETE', headers: auth }).catch((error: unknown) => error as Error);
      times.push(performance.now() - t0);
      if (res instanceof Error || (res.status !== 204 && res.status !== 404)) failures.push(`${s.id}: ${res instanceof Error ? res.message : res.status}`);
    }
  };
  await Promise.all(Array.from({ length: DELETE_CONCURRENCY }, worker));
  if (failures.length) throw new Error(`deleting sessions failed: ${failures.join('; ')}`);
  return times;
}

async function cleanUp(service: RunningService, url: string | undefined, sessions: Session[]): Promise<void> {
  if (url && sessions.length && service.child.exitCode === null) {
    const auth = { authorization: `Bearer ${service.adminKey}` };
    await deleteSessions(url, auth, sessions).catch((error: unknown) => console.error('cleanup:', error));
  }
  // Stopping the service also terminates any browser it still runs, then the data dir goes.
  await service.stop();
  await cleanupServices();
}

const ms = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(1));

function printApi(phases: Phase[], creates: number[], removal: Removal): void {
  console.log(`\nAPI under idle sessions: autocannon, ${DURATION_S} s per row, loopback, client and server on the same 2 cores\n`);
  console.log('| sessions | connections | scenario | req/s | p50 ms | p99 ms | req/s vs baseline | p99 vs baseline | non-2xx |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const phase of phases) {
    for (const { scenario, connections, result } of phase.rows) {
      const base = phase.rows.find((r) => r.connections === connections)!.result;
      console.log(
        `| ${phase.sessions} | ${connections} | ${scenario.name} | ${result.requests.average.toFixed(0)} | ${result.latency.p50} | ${result.latency.p99} | ` +
          `${(result.requests.average / base.requests.average).toFixed(2)}x | ${(result.latency.p99 / Math.max(base.latency.p99, 1)).toFixed(2)}x | ${result.non2xx + result.errors} |`,
      );
    }
  }
  console.log('\n| sessions | machine memory used | service RSS | service open files | processes on the machine | load average (1 min) |');
  console.log('|---|---|---|---|---|---|');
  for (const phase of phases) {
    console.log(`| ${phase.sessions} | ${mib(phase.memoryUsed)} MiB | ${mib(phase.service.rssBytes)} MiB | ${phase.service.fds} | ${phase.processes} | ${phase.loadAverage.toFixed(1)} |`);
  }

  // The target is a client's latency: judged at one connection. At CONNECTIONS the
  // server (and autocannon beside it) saturate the two cores, so p99 there is queueing.
  const first = phases[0]!;
  const last = phases[phases.length - 1]!;
  const judged = (phase: Phase) => phase.rows.filter((r) => r.connections === 1 && r.scenario.path.startsWith('/browsers'));
  const verdicts = judged(last).map((r) => {
    const p99 = r.result.latency.p99;
    const without = first.rows.find((f) => f.connections === 1 && f.scenario.path === r.scenario.path)!.result.latency.p99;
    return `${r.scenario.name}: p99 ${p99} ms ${p99 < TARGET_P99_MS ? '<' : '≥'} ${TARGET_P99_MS} ms (with ${first.sessions} session: ${without} ms)`;
  });
  const met = judged(last).every((r) => r.result.latency.p99 < TARGET_P99_MS);
  console.log(`\nTarget (API p99 < ${TARGET_P99_MS} ms at one connection, ${last.sessions} idle sessions): ${met ? 'met' : 'MISSED'}\n- ${verdicts.join('\n- ')}`);
  const perSession = (last.memoryUsed - first.memoryUsed) / Math.max(last.sessions - first.sessions, 1);
  console.log(`Machine memory: +${mib(last.memoryUsed - first.memoryUsed)} MiB from ${first.sessions} to ${last.sessions} sessions, ~${mib(perSession)} MiB per idle session (machine-wide: other processes move it too)`);
  console.log(
    `\nSessions: ${creates.length} created, POST /browsers p50 ${ms(quantile(creates, 0.5))} ms, p99 ${ms(quantile(creates, 0.99))} ms (${CREATE_CONCURRENCY} at a time; ` +
      `${launchFailures.length ? `LAUNCH FAILURES retried: ${launchFailures.length}, first: ${launchFailures[0]}` : 'no launch failed'}); ` +
      `all deleted in ${(removal.ms / 1000).toFixed(1)} s, ${DELETE_CONCURRENCY} at a time (DELETE p50 ${ms(quantile(removal.each, 0.5))} ms, p99 ${ms(quantile(removal.each, 0.99))} ms). Left after delete: ${removal.leftActive} active in the API, ` +
      `${removal.leftProcesses} agent processes, ${removal.leftRecords} runtime records${removal.leftActive + removal.leftProcesses + removal.leftRecords ? ' (LEAK)' : ''}`,
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function once(run: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= run());
}

const sleep = (msToWait: number) => new Promise((resolve) => setTimeout(resolve, msToWait));

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
