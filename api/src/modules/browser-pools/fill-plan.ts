import type { PoolBrowserCounts } from './browsers-store.js';
import type { PoolRow } from './store.js';

/**
 * The fill's decisions, without I/O: what one pass does to one pool, given its row, its
 * browsers, and the room there is to start new ones. fill.ts reads the inputs under the
 * pool's lock and carries the plan out.
 */

/**
 * The fill rate allows this much of a burst: a pool that was full for a while may start
 * up to this many milliseconds' worth of browsers at once (and always at least one).
 */
export const FILL_BURST_MS = 5_000;
/** A pool whose launches fail waits this long before it tries again, doubling to MAX. */
export const FAILURE_BACKOFF_MS = 1_000;
export const MAX_FAILURE_BACKOFF_MS = 60_000;

export type FillPool = Pick<PoolRow, 'size' | 'fill_rate_per_minute' | 'next_fill_at'>;

/** What there is to start new browsers with, now. */
export interface FillRoom {
  /** This machine's warm launch slots still free (across pools). */
  launchSlots: number;
  /** The machine has less memory available than the pools' minimum. */
  memoryLow: boolean;
  /**
   * Sessions the project and the organisation may still run (their caps). Reading it takes
   * the org's session-create lock, so the executor plans first with Infinity and reads it
   * only when that plan launches, then plans again with it.
   */
  sessions: number;
}

export type FillPlan =
  /** More browsers than the size: close this many idle ones. */
  | { kind: 'shrink'; discard: number }
  /** At its size: nothing to do. */
  | { kind: 'full' }
  /** Short of its size, but the rate or the launch slots allow nothing yet: the next pass looks again. */
  | { kind: 'wait' }
  /** Short of its size and held back by the machine's memory or the session caps. */
  | { kind: 'blocked'; reason: 'memory' | 'caps'; missing: number }
  /** Admit and warm `launch` browsers; the rate's clock (next_fill_at) moves to `nextFillAt`. */
  | { kind: 'launch'; launch: number; nextFillAt: Date };

/**
 * One pass over one pool: closes idle browsers beyond its size, or starts new ones (rows in
 * phase 'starting', which count toward the size at once) at its fill rate, within the launch
 * slots, memory and session caps. The rate's clock lives in the pool row (next_fill_at) so
 * that it holds across replicas: each launch advances it by one interval, and a pool that
 * was full a while may start FILL_BURST_MS' worth (at least one) at once.
 */
export function planFill(pool: FillPool, counts: Pick<PoolBrowserCounts, 'total'>, room: FillRoom, now: Date): FillPlan {
  if (counts.total > pool.size) return { kind: 'shrink', discard: counts.total - pool.size };
  const deficit = pool.size - counts.total;
  if (deficit === 0) return { kind: 'full' };
  const intervalMs = 60_000 / ((pool.size * pool.fill_rate_per_minute) / 100);
  const since = Math.max(pool.next_fill_at?.getTime() ?? 0, now.getTime() - Math.max(intervalMs, FILL_BURST_MS));
  const allowed = Math.floor((now.getTime() - since) / intervalMs);
  const n = Math.min(deficit, allowed, room.launchSlots);
  if (n <= 0) return { kind: 'wait' };
  if (room.memoryLow) return { kind: 'blocked', reason: 'memory', missing: deficit };
  const launch = Math.min(n, room.sessions);
  if (launch <= 0) return { kind: 'blocked', reason: 'caps', missing: deficit };
  return { kind: 'launch', launch, nextFillAt: new Date(since + launch * intervalMs) };
}

export interface Backoff {
  /** No launch before this (epoch ms). */
  until: number;
  failures: number;
}

/** After one more failure: the wait doubles from FAILURE_BACKOFF_MS up to MAX_FAILURE_BACKOFF_MS. */
export function nextBackoff(previous: Backoff | undefined, now: number): Backoff & { delayMs: number } {
  const failures = previous?.failures ?? 0;
  const delayMs = Math.min(FAILURE_BACKOFF_MS * 2 ** failures, MAX_FAILURE_BACKOFF_MS);
  return { until: now + delayMs, failures: failures + 1, delayMs };
}

/**
 * The fill's progress in one line, logged once per launch step (not per browser):
 * "pool crawlers: 3 of 10 warm, 2 starting, launching 1, next in 2.4 s". Warm counts
 * the pool's running browsers, idle or leased.
 */
export function fillProgress(pool: Pick<PoolRow, 'id' | 'name' | 'size'>, counts: Omit<PoolBrowserCounts, 'total'>, plan: { launch: number; nextFillAt: Date }, now: Date): string {
  const warm = counts.idle + counts.leased;
  const short = pool.size - warm - counts.starting - plan.launch;
  const next = short > 0 ? `, next in ${(Math.max(0, plan.nextFillAt.getTime() - now.getTime()) / 1000).toFixed(1)} s` : '';
  const starting = counts.starting > 0 ? `, ${counts.starting} starting` : '';
  return `pool ${pool.name ?? pool.id}: ${warm} of ${pool.size} warm${starting}, launching ${plan.launch}${next}`;
}
