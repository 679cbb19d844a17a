/**
 * The soak's verdict on its samples: each figure's median over the first and the last
 * third of the run after warm-up, the growth between them (and per hour), and the bound
 * the growth must stay within; then the error rate of each kind of operation.
 *
 * BOUNDS. A leak worth catching is one more fd, process or connection per operation,
 * or memory that keeps climbing. Medians over a third of the run smooth out what is
 * merely busy at the moment of a sample (a browser starting, a request in flight), so
 * what remains is noise of a few browsers' worth plus growth. n is the number of browser
 * cycles (a session created, driven and deleted; a lease taken, driven and given back)
 * completed between the middles of the two thirds:
 * - fds: growth <= 24 + n/4. In flight at once are at most a few CDP proxy sockets (2 per
 *   client), agent and keep-alive sockets per loop: 24 covers them. A leak of one fd per
 *   cycle grows by n, which exceeds 24 + n/4 once n > 32.
 * - processes (the service's tree, ours machine-wide, ours outside the tree): growth <= 12 + n/4; one
 *   browser is an agent and 6-9 Chromium processes, and 12 tolerates one more live
 *   browser at the median. One leaked process per cycle shows once n > 16.
 * - Postgres connections: growth <= 4 and never more than the pool's max + 3 (the events
 *   listener and slack): connections are pooled, so a leak would show as the count
 *   climbing to the max and then as failed operations, which the error bound catches.
 * - service live heap (heap used right after a forced full collection, so the collector's
 *   timing is no noise): growth <= 8 MiB + 10 %. Runs here stay within about 1 MiB; a leak
 *   of 1 KiB per API operation (some 100,000 an hour) shows within the hour.
 * - service RSS: growth <= 64 MiB + 25 %: the allocator and V8 keep freed pages for reuse,
 *   so RSS settles slowly; this catches memory that keeps growing over an hour. The growth
 *   per hour is printed beside each figure for judging shorter runs.
 * - errors: at most 1 % of each kind of operation; every kind must have succeeded.
 */
import type { DatabaseFigures, ProcessCounts } from './soak-support.js';
import { median } from './soak-support.js';
import type { Tally } from './soak-loops.js';

export interface Sample {
  /** Seconds since the work began. */
  t: number;
  /** load: the loops running; cleanup: after they stopped. */
  phase: 'load' | 'cleanup';
  cycles: number;
  rssBytes: number;
  heapBytes: number;
  fds: number;
  procs: ProcessCounts;
  rows: Omit<DatabaseFigures, 'browserIds'>;
  workDirs?: number;
  records?: number;
}

interface Figure {
  name: string;
  read: (s: Sample) => number;
  bound: (first: number, n: number) => number;
}

const MIB = 1024 * 1024;
const ERROR_RATE_BOUND = 0.01;
const MUST_SUCCEED = ['session.create', 'session.use', 'session.delete', 'pool.acquire', 'pool.use', 'pool.release', 'profile.create', 'credential.totp', 'sse.stream'];

const FIGURES: Figure[] = [
  { name: 'service RSS (MiB)', read: (s) => s.rssBytes / MIB, bound: (first) => 64 + 0.25 * first },
  { name: 'service live heap (MiB)', read: (s) => s.heapBytes / MIB, bound: (first) => 8 + 0.1 * first },
  { name: 'service open fds', read: (s) => s.fds, bound: (_, n) => 24 + n / 4 },
  { name: 'processes in the service tree', read: (s) => s.procs.tree, bound: (_, n) => 12 + n / 4 },
  { name: 'our processes machine-wide', read: (s) => s.procs.agents + s.procs.chromium + s.procs.xvfb + s.procs.other, bound: (_, n) => 12 + n / 4 },
  { name: 'our processes outside the service tree', read: (s) => s.procs.detached, bound: (_, n) => 12 + n / 4 },
  { name: 'Postgres connections', read: (s) => s.rows.connections, bound: () => 4 },
];

/** Prints the summary; the reasons to fail, if any. */
export function summarise(samples: Sample[], tally: Tally, options: { warmupSeconds: number; poolMax: number }): string[] {
  const failures: string[] = [];
  const load = samples.filter((s) => s.phase === 'load' && s.t >= options.warmupSeconds);
  const third = Math.floor(load.length / 3);
  console.log(`\nSummary: ${load.length} samples after a ${options.warmupSeconds} s warm-up, first and last third (${third} samples each) compared`);
  if (third < 2) {
    failures.push(`too few samples after warm-up (${load.length}) to compare thirds: run longer or sample more often`);
  } else {
    const first = load.slice(0, third);
    const last = load.slice(load.length - third);
    const from = first[Math.floor(third / 2)]!;
    const to = last[Math.floor(third / 2)]!;
    const n = to.cycles - from.cycles;
    const hours = (to.t - from.t) / 3600;
    console.log(`${n} browser cycles and ${((to.t - from.t) / 60).toFixed(1)} min between the middles of the thirds`);
    if (n <= 32) console.log(`note: with n = ${n} <= 32 a leak of one fd per cycle may hide in the fd bound's slack`);
    console.log('| figure | first third | last third | growth | per hour | bound | |');
    console.log('|---|---|---|---|---|---|---|');
    for (const figure of FIGURES) {
      const a = median(first.map(figure.read));
      const b = median(last.map(figure.read));
      const bound = figure.bound(a, n);
      const ok = b - a <= bound;
      console.log(`| ${figure.name} | ${fmt(a)} | ${fmt(b)} | ${fmt(b - a)} | ${fmt((b - a) / hours)} | ${fmt(bound)} | ${ok ? 'ok' : 'GREW'} |`);
      if (!ok) failures.push(`${figure.name} grew from ${fmt(a)} to ${fmt(b)} (bound ${fmt(bound)})`);
    }
    const peak = Math.max(...load.map((s) => s.rows.connections));
    if (peak > options.poolMax + 3) failures.push(`Postgres connections peaked at ${peak}, over the pool's max ${options.poolMax} + 3`);
  }
  failures.push(...errorRates(tally));
  console.log(`Pool: ${tally.acquireWaitLine()}`);
  return failures;
}

function errorRates(tally: Tally): string[] {
  const failures: string[] = [];
  const kinds = [...new Set([...tally.ok.keys(), ...tally.errors.keys(), ...MUST_SUCCEED])].sort();
  console.log('\n| operation | ok | failed | error rate | first errors |');
  console.log('|---|---|---|---|---|');
  for (const kind of kinds) {
    const ok = tally.ok.get(kind) ?? 0;
    const failed = tally.errors.get(kind) ?? 0;
    const rate = failed / Math.max(1, ok + failed);
    console.log(`| ${kind} | ${ok} | ${failed} | ${(rate * 100).toFixed(2)} % | ${(tally.messages.get(kind) ?? []).join('; ')} |`);
    if (rate > ERROR_RATE_BOUND) failures.push(`${kind}: ${failed} of ${ok + failed} failed (bound ${ERROR_RATE_BOUND * 100} %)`);
    if (ok === 0 && MUST_SUCCEED.includes(kind)) failures.push(`${kind}: never succeeded`);
  }
  return failures;
}

const fmt = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(1));
