/**
 * Pool benchmark. In one run, on this machine:
 * - acquire latency from a warm pool at 1, 10 and 50 concurrent clients: each acquire's
 *   HTTP round trip (undici, keep-alive sockets), p50 and p99, beside GET /healthz at the
 *   same concurrency (the HTTP stack alone: the baseline) and GET /browser_pools/{id}
 *   (auth and one pool lookup);
 * - refill: a pool of 10 from POST .../flush until all 10 are idle again, beside 10 bare
 *   Chromiums (same binary, flags and user as the agent) started with the parallelism
 *   the service fills with, from the first spawn until every CDP endpoint answers.
 * - throughput on 2 cores: THROUGHPUT_CLIENTS clients each sending its next request as soon
 *   as the last is answered, for THROUGHPUT_SECONDS, of GET /healthz (the baseline), GET
 *   /browsers/{id} (a leased browser) and acquire+release cycles (reuse: each release
 *   resets the browser before it answers), alternated and repeated.
 * Goals from issue 20: acquire p50 ≤ 3 ms and p99 ≤ 25 ms at 1 client; at 10 and 50
 * clients p50 ≤ 2× the GET /healthz p50 at the same concurrency.
 */
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import { resolveSystemUser } from '../lib/system-user.js';
import { defaultPoolLaunchConcurrency } from '../api/src/modules/browser-pools/manager.js';
import { launchBareChromium, type BareChromium } from './chromium.js';
import { descendantsNamed, schedTimes } from './load-support.js';
import { cleanupServices, startService } from '../test/support/service.js';

// One idle browser per client of the largest wave (50), unless the machine cannot hold them
// (os.freemem() is MemAvailable on Linux: page cache counts as free).
const WANTED_POOL_SIZE = Number(process.env.BENCH_POOL_SIZE ?? 50);
/** What one idle headless pool browser holds (Chromium and its agent, about 200 MiB PSS), with room to spare. */
const BROWSER_MIB = 250;
/** Left for everything else on the machine while the pool is full. */
const KEEP_FREE_MIB = 2048;
const POOL_SIZE = Math.max(1, Math.min(WANTED_POOL_SIZE, Math.floor((os.freemem() / 2 ** 20 - KEEP_FREE_MIB) / BROWSER_MIB)));
const SAMPLES = Number(process.env.BENCH_ACQUIRE_SAMPLES ?? 200);
const REFILL_SIZE = Number(process.env.BENCH_REFILL_SIZE ?? 10);
const REFILL_RUNS = Number(process.env.BENCH_REFILL_RUNS ?? 1);
const LEVELS = [1, 10, 50];
const TARGET_P50_MS = 3;
const TARGET_P99_MS = 25;
/** Above one client: acquire p50 at most this many times the /healthz p50 at the same concurrency. */
const TARGET_HEALTHZ_RATIO = 2;
const THROUGHPUT_SECONDS = Number(process.env.BENCH_THROUGHPUT_SECONDS ?? 4);
const THROUGHPUT_CLIENTS = Number(process.env.BENCH_THROUGHPUT_CLIENTS ?? 10);
const THROUGHPUT_RUNS = Number(process.env.BENCH_THROUGHPUT_RUNS ?? 2);
// Generous: 50 Chromiums, a few at a time, on a small shared machine take a while.
const FILL_TIMEOUT_MS = 300_000;
const POLL_MS = 20;
const SETTLE_MS = 1000;
// The service's warm launches in flight at once (the default of BROWSERPLANE_POOL_LAUNCH_CONCURRENCY).
const LAUNCH_CONCURRENCY = defaultPoolLaunchConcurrency();

interface Answer {
  status: number;
  ms: number;
  body: unknown;
}

interface Pool {
  id: string;
  available_count: number;
  acquired_count: number;
}

/** Raw HTTP over keep-alive sockets, timed from the call until the body is read. */
class Client {
  private readonly dispatcher = new Agent();
  constructor(
    private readonly url: string,
    private readonly key: string,
  ) {}

  async call(method: 'GET' | 'POST' | 'DELETE', route: string, body?: unknown): Promise<Answer> {
    const t0 = performance.now();
    const res = await request(this.url + route, {
      method,
      dispatcher: this.dispatcher,
      headers: { authorization: `Bearer ${this.key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.body.text();
    const ms = performance.now() - t0;
    return { status: res.statusCode, ms, body: text ? (JSON.parse(text) as unknown) : undefined };
  }

  async expect(status: number, method: 'GET' | 'POST' | 'DELETE', route: string, body?: unknown): Promise<Answer> {
    const answer = await this.call(method, route, body);
    if (answer.status !== status) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer;
  }

  /** `count` requests at once, each timed on its own. */
  async together(count: number, method: 'GET' | 'POST', route: string, body?: unknown): Promise<Answer[]> {
    return Promise.all(Array.from({ length: count }, () => this.call(method, route, body)));
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}

async function main(): Promise<void> {
  const user = await resolveSystemUser('browserplane');
  const service = await startService({ inheritEnv: true, echoStderr: true });
  let client: Client | undefined;
  try {
    const warmTimes = tapWarmTimes(service.child);
    client = new Client(service.url, service.adminKey);
    printMachine(user?.name ?? os.userInfo().username);
    console.log(`Lease commit: ${process.env.BROWSERPLANE_POOL_LEASE_COMMIT ?? 'durable'} (BROWSERPLANE_POOL_LEASE_COMMIT)`);
    const { results: acquire, route } = await measureAcquire(client, new CpuProbe(service.pid));
    const throughput = await measureThroughput(client, route);
    await client.expect(204, 'DELETE', route, { force: true });
    const refill = REFILL_RUNS > 0 ? await measureRefill(client, user, warmTimes) : undefined;
    printAcquire(acquire);
    printThroughput(throughput);
    if (refill) printRefill(refill);
  } finally {
    await client?.close();
    await service.stop();
    await cleanupServices();
  }
}

function printMachine(userName: string): void {
  const cpus = os.cpus();
  const gib = (bytes: number) => (bytes / 1024 ** 3).toFixed(1);
  console.log(`\nMachine: ${cpus.length} cores (${cpus[0]?.model ?? 'unknown'}), ${gib(os.totalmem())} GiB memory (${gib(os.freemem())} free)`);
  console.log(`Load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; browsers headless, sandboxed as ${userName}`);
}

type Measure = 'healthz' | 'lookup' | 'acquire';

interface LevelResult {
  clients: number;
  healthz: number[];
  lookup: number[];
  acquire: number[];
  /** CPU spent while each measure's waves ran, summed over its waves. */
  cpu: Record<Measure, CpuSpent>;
}

/** CPU and run-queue wait in ms over some waves, and the requests they answered. */
interface CpuSpent {
  requests: number;
  service: number;
  postgres: number;
  bench: number;
  /** Time the service's and Postgres's threads were runnable but had no CPU. */
  waited: number;
}

const noCpu = (): CpuSpent => ({ requests: 0, service: 0, postgres: 0, bench: 0, waited: 0 });

/**
 * The CPU each side spends on a wave: the service's threads, every Postgres process of its
 * embedded database (backends, WAL writer…) and this bench's own, from the kernel's
 * per-thread run times (ns), so the figures hold on a shared machine where wall-clock
 * times do not. An external database (DATABASE_URL) is not seen.
 */
class CpuProbe {
  private postgres: number[] = [];
  constructor(private readonly servicePid: number) {}

  /** Looks for Postgres processes again (a new pool connection is a new backend). */
  async refresh(): Promise<void> {
    this.postgres = await descendantsNamed(this.servicePid, 'postgres');
  }

  async around<T>(into: CpuSpent, requests: number, work: () => Promise<T>): Promise<T> {
    const [service0, postgres0] = await Promise.all([schedTimes([this.servicePid]), schedTimes(this.postgres)]);
    const bench0 = process.cpuUsage();
    const result = await work();
    const bench = process.cpuUsage(bench0);
    const [service1, postgres1] = await Promise.all([schedTimes([this.servicePid]), schedTimes(this.postgres)]);
    into.requests += requests;
    into.service += service1.cpuMs - service0.cpuMs;
    into.postgres += postgres1.cpuMs - postgres0.cpuMs;
    into.bench += (bench.user + bench.system) / 1000;
    into.waited += service1.waitMs - service0.waitMs + postgres1.waitMs - postgres0.waitMs;
    return result;
  }
}

/**
 * Waves of `c` clients acquiring at once, each finding an idle browser, so the figure is
 * the lease itself and never a wait. A round is as many waves as the pool has browsers
 * for (50 single acquires, 5 waves of 10, 1 of 50); then every lease is released with
 * reuse (not measured) and the round ends when the pool is full again, so resets never
 * overlap a measure. Each wave is preceded by the two baselines at the same
 * concurrency, taken when the pool is just as quiet.
 */
async function measureAcquire(client: Client, probe: CpuProbe): Promise<{ results: LevelResult[]; route: string }> {
  const levels = LEVELS.filter((c) => c <= POOL_SIZE);
  const skipped = LEVELS.filter((c) => c > POOL_SIZE);
  if (POOL_SIZE < WANTED_POOL_SIZE) {
    console.log(`Pool of ${POOL_SIZE}, not ${WANTED_POOL_SIZE}: the machine has memory for no more idle browsers (${BROWSER_MIB} MiB each, ${KEEP_FREE_MIB} MiB kept free)`);
  }
  if (skipped.length) console.log(`Skipping ${skipped.join(', ')} clients: more than the pool's ${POOL_SIZE} idle browsers (BENCH_POOL_SIZE)`);
  const pool = (await client.expect(200, 'POST', '/browser_pools', { name: 'bench-acquire', size: POOL_SIZE, fill_rate_per_minute: 6000, headless: true }))
    .body as Pool;
  const route = `/browser_pools/${pool.id}`;
  const fillMs = await waitForAvailable(client, route, POOL_SIZE, FILL_TIMEOUT_MS);
  console.log(`Pool of ${POOL_SIZE} warm in ${(fillMs / 1000).toFixed(1)} s`);
  await settle();

  const results: LevelResult[] = [];
  for (const c of levels) {
    const t0 = performance.now();
    const result: LevelResult = { clients: c, healthz: [], lookup: [], acquire: [], cpu: { healthz: noCpu(), lookup: noCpu(), acquire: noCpu() } };
    let rounds = 0;
    while (result.acquire.length < SAMPLES) {
      const leased: string[] = [];
      await probe.refresh();
      for (let wave = 0; wave < Math.floor(POOL_SIZE / c) && result.acquire.length < SAMPLES; wave++) {
        leased.push(...(await acquireWave(client, route, c, result, probe)));
      }
      await Promise.all(leased.map((id) => client.expect(204, 'POST', `${route}/release`, { session_id: id, reuse: true })));
      await waitForAvailable(client, route, POOL_SIZE, FILL_TIMEOUT_MS);
      rounds++;
    }
    console.log(`${c} client(s): ${result.acquire.length} acquires in ${rounds} round(s), ${((performance.now() - t0) / 1000).toFixed(1)} s with releases`);
    results.push(result);
  }
  return { results, route };
}

interface ThroughputResult {
  /** Completed requests per second, one figure per run. */
  healthz: number[];
  getBrowser: number[];
  /** Acquire+release cycles per second (two requests each). */
  cycles: number[];
}

/**
 * Requests per second with THROUGHPUT_CLIENTS clients, each sending its next request when
 * the last is answered. The three measures alternate, THROUGHPUT_RUNS times, so drift in
 * machine load hits them alike. Cycles lease from the warm pool and release with reuse.
 */
async function measureThroughput(client: Client, route: string): Promise<ThroughputResult> {
  const held = (await client.expect(200, 'POST', `${route}/acquire`, {})).body as { session_id: string };
  const result: ThroughputResult = { healthz: [], getBrowser: [], cycles: [] };
  for (let run = 0; run < THROUGHPUT_RUNS; run++) {
    await settle();
    result.healthz.push(await sustained(() => client.expect(200, 'GET', '/healthz')));
    result.getBrowser.push(await sustained(() => client.expect(200, 'GET', `/browsers/${held.session_id}`)));
    result.cycles.push(
      await sustained(async () => {
        const lease = (await client.expect(200, 'POST', `${route}/acquire`, { acquire_timeout_seconds: 30 })).body as { session_id: string };
        await client.expect(204, 'POST', `${route}/release`, { session_id: lease.session_id, reuse: true });
      }),
    );
    await waitForAvailable(client, route, POOL_SIZE - 1, FILL_TIMEOUT_MS);
  }
  await client.expect(204, 'POST', `${route}/release`, { session_id: held.session_id, reuse: true });
  return result;
}

/** Completions per second of `once`, run back to back by THROUGHPUT_CLIENTS clients for THROUGHPUT_SECONDS. */
async function sustained(once: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  const deadline = t0 + THROUGHPUT_SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: THROUGHPUT_CLIENTS }, async () => {
      while (performance.now() < deadline) {
        await once();
        done++;
      }
    }),
  );
  return done / ((performance.now() - t0) / 1000);
}

/** One wave: the baselines, then `c` acquires at once; the leased session ids. */
async function acquireWave(client: Client, route: string, c: number, result: LevelResult, probe: CpuProbe): Promise<string[]> {
  // Every client gets an open socket first, so no measure pays a TCP connect.
  await client.together(c, 'GET', '/healthz');
  // Not at one client: the probe's /proc reads around every single request doubled the
  // latencies beside them (/healthz 0.73 → 1.5 ms p50 against the same service).
  const timed = <T>(into: CpuSpent, work: () => Promise<T>) => (c > 1 ? probe.around(into, c, work) : work());
  result.healthz.push(...(await timed(result.cpu.healthz, () => client.together(c, 'GET', '/healthz'))).map((a) => a.ms));
  result.lookup.push(...(await timed(result.cpu.lookup, () => client.together(c, 'GET', route))).map((a) => a.ms));
  const leases = await timed(result.cpu.acquire, () => client.together(c, 'POST', `${route}/acquire`, {}));
  const ids = leases.filter((a) => a.status === 200).map((a) => (a.body as { session_id: string }).session_id);
  const failed = leases.find((a) => a.status !== 200);
  if (failed) {
    await Promise.all(ids.map((id) => client.call('POST', `${route}/release`, { session_id: id, reuse: true })));
    throw new Error(`acquire answered ${failed.status} ${JSON.stringify(failed.body)} though an idle browser waited for every client`);
  }
  result.acquire.push(...leases.map((a) => a.ms));
  return ids;
}

interface RefillResult {
  bareWallMs: number[];
  bareEachMs: number[];
  flushMs: number[];
  refillMs: number[];
  /** Each refilled browser's launch → ready, from the service's log. */
  warmEachMs: number[];
}

/**
 * A flushed pool of 10 back to 10 idle browsers, beside 10 bare Chromiums started with
 * the parallelism the pool fills with (fill_rate_per_minute 6000 allows the whole pool at
 * once, so the service's launch slots are the limit). Alternated, with a settle before
 * each, so drift in machine load hits both alike.
 */
async function measureRefill(client: Client, user: { uid: number; gid: number } | undefined, warmTimes: Map<string, number[]>): Promise<RefillResult> {
  const pool = (
    await client.expect(200, 'POST', '/browser_pools', { name: 'bench-refill', size: REFILL_SIZE, fill_rate_per_minute: 6000, headless: true })
  ).body as Pool;
  const route = `/browser_pools/${pool.id}`;
  await waitForAvailable(client, route, REFILL_SIZE, FILL_TIMEOUT_MS);
  const result: RefillResult = { bareWallMs: [], bareEachMs: [], flushMs: [], refillMs: [], warmEachMs: [] };
  const warmed = () => warmTimes.get(pool.id) ?? [];
  for (let run = 0; run < REFILL_RUNS; run++) {
    await settle();
    const t0 = performance.now();
    const bares = await launchSeveral(REFILL_SIZE, user);
    result.bareWallMs.push(performance.now() - t0);
    result.bareEachMs.push(...bares.map((b) => b.readyMs));
    await Promise.all(bares.map((b) => b.stop()));

    await settle();
    const before = warmed().length;
    const t1 = performance.now();
    await client.expect(204, 'POST', `${route}/flush`);
    result.flushMs.push(performance.now() - t1);
    await waitForAvailable(client, route, REFILL_SIZE, FILL_TIMEOUT_MS, { mustDrop: true });
    result.refillMs.push(performance.now() - t1);
    result.warmEachMs.push(...warmed().slice(before));
  }
  await client.expect(204, 'DELETE', route, { force: true });
  return result;
}

/** Each pool browser's launch → ready time the service logs ('pool browser warm'), by pool id. */
function tapWarmTimes(child: ChildProcess): Map<string, number[]> {
  const byPool = new Map<string, number[]>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    // Every lease logs a line: parsing each would put this bench's CPU into the waves it times.
    if (!line.includes('"pool browser warm"')) return;
    let entry: { msg?: string; poolId?: string; ms?: number };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return; // not a log line
    }
    if (entry.msg !== 'pool browser warm' || !entry.poolId || typeof entry.ms !== 'number') return;
    byPool.set(entry.poolId, [...(byPool.get(entry.poolId) ?? []), entry.ms]);
  });
  return byPool;
}

/** `count` bare Chromiums, LAUNCH_CONCURRENCY in flight at a time, as the pool fills. */
async function launchSeveral(count: number, user: { uid: number; gid: number } | undefined): Promise<BareChromium[]> {
  const bares: BareChromium[] = [];
  let next = 0;
  const slot = async () => {
    while (next < count) {
      next++;
      bares.push(await launchBareChromium(user));
    }
  };
  await Promise.all(Array.from({ length: Math.min(LAUNCH_CONCURRENCY, count) }, slot));
  return bares;
}

/**
 * Polls the pool until `target` browsers are idle; ms waited. With mustDrop, a count
 * already at target counts only once it has been seen below it, so a flush that empties
 * the pool after answering cannot pass for an instant refill.
 */
async function waitForAvailable(client: Client, route: string, target: number, timeoutMs: number, options: { mustDrop?: boolean } = {}): Promise<number> {
  const t0 = performance.now();
  let dropped = !options.mustDrop;
  for (;;) {
    const pool = (await client.expect(200, 'GET', route)).body as Pool;
    if (pool.available_count < target) dropped = true;
    else if (dropped) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) {
      throw new Error(`pool ${route} has ${pool.available_count}/${target} idle after ${timeoutMs} ms (acquired ${pool.acquired_count})`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
const ms = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(1));

function printAcquire(results: LevelResult[]): void {
  console.log(`\nAcquire from a warm pool of ${POOL_SIZE}: c clients at once per round, ~${SAMPLES} samples per level, undici keep-alive over loopback\n`);
  console.log('| clients | measure | samples | p50 ms | p99 ms | p50 vs baseline | p99 vs baseline |');
  console.log('|---|---|---|---|---|---|---|');
  const missed: string[] = [];
  for (const r of results) {
    const base50 = quantile(r.healthz, 0.5);
    const base99 = quantile(r.healthz, 0.99);
    const rows: [string, number[]][] = [
      ['GET /healthz (baseline)', r.healthz],
      ['GET /browser_pools/{id}', r.lookup],
      ['POST /browser_pools/{id}/acquire', r.acquire],
    ];
    for (const [name, values] of rows) {
      const p50 = quantile(values, 0.5);
      const p99 = quantile(values, 0.99);
      console.log(`| ${r.clients} | ${name} | ${values.length} | ${ms(p50)} | ${ms(p99)} | ${(p50 / base50).toFixed(2)}x | ${(p99 / base99).toFixed(2)}x |`);
    }
    const p50 = quantile(r.acquire, 0.5);
    const p99 = quantile(r.acquire, 0.99);
    // The baseline beside a miss tells a slow acquire from a machine too busy for any request.
    if (r.clients === 1) {
      if (p50 > TARGET_P50_MS) missed.push(`1 client: acquire p50 ${ms(p50)} ms > ${TARGET_P50_MS} ms (GET /healthz alone: ${ms(base50)} ms)`);
      if (p99 > TARGET_P99_MS) missed.push(`1 client: acquire p99 ${ms(p99)} ms > ${TARGET_P99_MS} ms (GET /healthz alone: ${ms(base99)} ms)`);
    } else if (p50 > TARGET_HEALTHZ_RATIO * base50) {
      missed.push(`${r.clients} clients: acquire p50 ${ms(p50)} ms is ${(p50 / base50).toFixed(2)}x GET /healthz's ${ms(base50)} ms (> ${TARGET_HEALTHZ_RATIO}x)`);
    }
  }
  console.log(
    `\nGoals (1 client: acquire p50 ≤ ${TARGET_P50_MS} ms, p99 ≤ ${TARGET_P99_MS} ms; 10 and 50 clients: acquire p50 ≤ ${TARGET_HEALTHZ_RATIO}x GET /healthz p50): ` +
      (missed.length ? `MISSED\n- ${missed.join('\n- ')}` : `met at every level measured (${results.map((r) => r.clients).join(', ')} clients)`),
  );
  printCpu(results);
}

/** Where each request's time went, in CPU per request: what a loaded machine's wall clock hides. */
function printCpu(results: LevelResult[]): void {
  console.log('\nCPU per request while the waves ran (kernel run times; ms per request; Postgres = its embedded processes; wait = run-queue wait of service + Postgres)\n');
  console.log('| clients | measure | service | Postgres | bench client | service + Postgres vs baseline | wait |');
  console.log('|---|---|---|---|---|---|---|');
  const names: Record<Measure, string> = { healthz: 'GET /healthz (baseline)', lookup: 'GET /browser_pools/{id}', acquire: 'POST /browser_pools/{id}/acquire' };
  for (const r of results) {
    if (r.cpu.healthz.requests === 0) continue; // not sampled (one client)
    const per = (spent: CpuSpent, value: number) => value / Math.max(1, spent.requests);
    const base = per(r.cpu.healthz, r.cpu.healthz.service + r.cpu.healthz.postgres);
    for (const m of ['healthz', 'lookup', 'acquire'] as const) {
      const spent = r.cpu[m];
      const both = per(spent, spent.service + spent.postgres);
      console.log(
        `| ${r.clients} | ${names[m]} | ${per(spent, spent.service).toFixed(3)} | ${per(spent, spent.postgres).toFixed(3)} | ${per(spent, spent.bench).toFixed(3)} | ${(both / base).toFixed(2)}x | ${per(spent, spent.waited).toFixed(3)} |`,
      );
    }
  }
}

function printThroughput(r: ThroughputResult): void {
  const median = (values: number[]) => quantile(values, 0.5);
  const base = median(r.healthz);
  const rate = (value: number) => value.toFixed(0);
  console.log(
    `\nThroughput on ${os.cpus().length} cores: ${THROUGHPUT_CLIENTS} clients back to back, ${THROUGHPUT_SECONDS} s per measure, ${THROUGHPUT_RUNS} alternating runs, median\n`,
  );
  console.log('| measure | req/s | ratio to baseline | runs |');
  console.log('|---|---|---|---|');
  console.log(`| GET /healthz (baseline) | ${rate(base)} | 1.00x | ${r.healthz.map(rate).join(', ')} |`);
  console.log(`| GET /browsers/{id} | ${rate(median(r.getBrowser))} | ${(median(r.getBrowser) / base).toFixed(2)}x | ${r.getBrowser.map(rate).join(', ')} |`);
  const cycles = median(r.cycles);
  console.log(
    `| acquire + release (reuse) cycles, ${rate(cycles)}/s | ${rate(2 * cycles)} | ${((2 * cycles) / base).toFixed(2)}x | ${r.cycles.map((c) => rate(2 * c)).join(', ')} |`,
  );
  console.log('\nA release with reuse answers once the browser is reset (clients cut off, tabs closed, cookies restored): the cycles measure that reset as well.');
}

function printRefill(r: RefillResult): void {
  const median = (values: number[]) => quantile(values, 0.5);
  const base = median(r.bareWallMs);
  const runs = REFILL_RUNS === 1 ? 'one run' : `${REFILL_RUNS} alternating runs, median`;
  console.log(`\nRefill: pool of ${REFILL_SIZE} (fill_rate_per_minute 6000) after a flush, ${runs}\n`);
  console.log('| measure | wall time | ratio to baseline |');
  console.log('|---|---|---|');
  console.log(`| ${REFILL_SIZE} bare Chromiums, ${LAUNCH_CONCURRENCY} at a time, first spawn → last CDP answers (baseline) | ${ms(base)} ms | 1.00x |`);
  console.log(`| POST flush → available_count ${REFILL_SIZE} again | ${ms(median(r.refillMs))} ms | ${(median(r.refillMs) / base).toFixed(2)}x |`);
  console.log(
    `\nRuns: bare ${r.bareWallMs.map(ms).join(', ')} ms (one Chromium p50 ${ms(median(r.bareEachMs))} ms); ` +
      `refill ${r.refillMs.map(ms).join(', ')} ms, of which the flush answer ${r.flushMs.map(ms).join(', ')} ms ` +
      `(one pool browser launch → ready p50 ${r.warmEachMs.length ? ms(median(r.warmEachMs)) : '?'} ms, service log)`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
