import { describe, expect, it } from 'vitest';
import {
  FAILURE_BACKOFF_MS,
  FILL_BURST_MS,
  fillProgress,
  MAX_FAILURE_BACKOFF_MS,
  nextBackoff,
  planFill,
  type FillPool,
  type FillRoom,
} from '../../api/src/modules/browser-pools/fill-plan.js';

// The warm fill's decisions for one pool in one pass: size against its browsers, the fill
// rate's clock, the launch slots, memory and the session caps. No database, no clock.

const now = new Date('2026-08-01T09:00:00.000Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
const plenty: FillRoom = { launchSlots: 100, memoryLow: false, sessions: Number.POSITIVE_INFINITY };
/** size 100 at 100 %/min: one browser every 600 ms. */
const fast: FillPool = { size: 100, fill_rate_per_minute: 100, next_fill_at: null };

describe('planFill: size', () => {
  it('shrinks a pool over its size by the browsers too many', () => {
    expect(planFill({ ...fast, size: 2 }, { total: 5 }, plenty, now)).toEqual({ kind: 'shrink', discard: 3 });
  });

  it('shrinks whatever the room (a shrink starts nothing)', () => {
    expect(planFill({ ...fast, size: 0 }, { total: 1 }, { launchSlots: 0, memoryLow: true, sessions: 0 }, now)).toEqual({ kind: 'shrink', discard: 1 });
  });

  it('does nothing to a full pool', () => {
    expect(planFill({ ...fast, size: 3 }, { total: 3 }, plenty, now)).toEqual({ kind: 'full' });
    expect(planFill({ ...fast, size: 0 }, { total: 0 }, plenty, now)).toEqual({ kind: 'full' });
  });

  it('never launches more than the pool is short of', () => {
    // At 10000 %/min the rate would allow 25 at once.
    expect(planFill({ size: 3, fill_rate_per_minute: 10_000, next_fill_at: null }, { total: 1 }, plenty, now)).toMatchObject({ kind: 'launch', launch: 2 });
  });
});

describe('planFill: rate', () => {
  it('lets a pool that was idle a while start a burst of FILL_BURST_MS worth of browsers', () => {
    const plan = planFill(fast, { total: 0 }, plenty, now);
    const burst = Math.floor(FILL_BURST_MS / 600);
    expect(plan).toEqual({ kind: 'launch', launch: burst, nextFillAt: at(-FILL_BURST_MS + burst * 600) });
  });

  it('always allows one browser per interval, even when the interval is longer than the burst', () => {
    // size 10 at 10 %/min: one browser a minute.
    const slow: FillPool = { size: 10, fill_rate_per_minute: 10, next_fill_at: null };
    expect(planFill(slow, { total: 0 }, plenty, now)).toEqual({ kind: 'launch', launch: 1, nextFillAt: now });
  });

  it('counts from the stored clock (next_fill_at), so the rate holds across passes and replicas', () => {
    expect(planFill({ ...fast, next_fill_at: at(-1_300) }, { total: 0 }, plenty, now)).toEqual({ kind: 'launch', launch: 2, nextFillAt: at(-100) });
  });

  it('waits while the clock allows no browser yet', () => {
    expect(planFill({ ...fast, next_fill_at: at(-599) }, { total: 0 }, plenty, now)).toEqual({ kind: 'wait' });
    expect(planFill({ ...fast, next_fill_at: at(5_000) }, { total: 0 }, plenty, now)).toEqual({ kind: 'wait' });
  });
});

describe('planFill: room', () => {
  it('launches within the free launch slots, and waits when there are none', () => {
    expect(planFill(fast, { total: 0 }, { ...plenty, launchSlots: 3 }, now)).toEqual({ kind: 'launch', launch: 3, nextFillAt: at(-FILL_BURST_MS + 3 * 600) });
    expect(planFill(fast, { total: 0 }, { ...plenty, launchSlots: 0 }, now)).toEqual({ kind: 'wait' });
  });

  it('is blocked by low memory only when it would launch', () => {
    expect(planFill(fast, { total: 10 }, { ...plenty, memoryLow: true }, now)).toEqual({ kind: 'blocked', reason: 'memory', missing: 90 });
    expect(planFill(fast, { total: 10 }, { ...plenty, memoryLow: true, launchSlots: 0 }, now)).toEqual({ kind: 'wait' });
  });

  it('launches within the session caps, and is blocked by them when there is no room', () => {
    expect(planFill(fast, { total: 0 }, { ...plenty, sessions: 2 }, now)).toEqual({ kind: 'launch', launch: 2, nextFillAt: at(-FILL_BURST_MS + 2 * 600) });
    expect(planFill(fast, { total: 40 }, { ...plenty, sessions: 0 }, now)).toEqual({ kind: 'blocked', reason: 'caps', missing: 60 });
    expect(planFill(fast, { total: 40 }, { ...plenty, sessions: -3 }, now)).toEqual({ kind: 'blocked', reason: 'caps', missing: 60 });
  });

  it('reports memory before the caps (the caps are read only when memory allows a launch)', () => {
    expect(planFill(fast, { total: 0 }, { ...plenty, memoryLow: true, sessions: 0 }, now)).toMatchObject({ kind: 'blocked', reason: 'memory' });
  });

  it('plans with the session room unknown (Infinity) no less than with it known', () => {
    const unknown = planFill(fast, { total: 95 }, plenty, now);
    const known = planFill(fast, { total: 95 }, { ...plenty, sessions: 2 }, now);
    expect(unknown).toMatchObject({ kind: 'launch', launch: 5 });
    expect(known).toMatchObject({ kind: 'launch', launch: 2 });
  });
});

describe('nextBackoff', () => {
  it('waits FAILURE_BACKOFF_MS after a first failure, doubling after each next one', () => {
    const first = nextBackoff(undefined, 1_000);
    expect(first).toEqual({ until: 1_000 + FAILURE_BACKOFF_MS, failures: 1, delayMs: FAILURE_BACKOFF_MS });
    const second = nextBackoff(first, 5_000);
    expect(second).toEqual({ until: 5_000 + 2 * FAILURE_BACKOFF_MS, failures: 2, delayMs: 2 * FAILURE_BACKOFF_MS });
    expect(nextBackoff(second, 0).delayMs).toBe(4 * FAILURE_BACKOFF_MS);
  });

  it('waits no longer than MAX_FAILURE_BACKOFF_MS', () => {
    expect(nextBackoff({ until: 0, failures: 30 }, 0)).toEqual({ until: MAX_FAILURE_BACKOFF_MS, failures: 31, delayMs: MAX_FAILURE_BACKOFF_MS });
  });
});

describe('fillProgress: one line per launch step', () => {
  const pool = { id: 'bp_1', name: 'crawlers', size: 10 };

  it('says how many are warm, starting and launched, and when the next launch comes', () => {
    const line = fillProgress(pool, { idle: 2, leased: 1, starting: 2 }, { launch: 1, nextFillAt: at(2_400) }, now);
    expect(line).toBe('pool crawlers: 3 of 10 warm, 2 starting, launching 1, next in 2.4 s');
  });

  it('leaves out the next launch when this step starts the last browser missing', () => {
    expect(fillProgress(pool, { idle: 7, leased: 0, starting: 2 }, { launch: 1, nextFillAt: at(600) }, now)).toBe('pool crawlers: 7 of 10 warm, 2 starting, launching 1');
  });

  it('names a pool without a name by its id, and never counts a past launch time as negative', () => {
    expect(fillProgress({ ...pool, name: null }, { idle: 0, leased: 0, starting: 0 }, { launch: 2, nextFillAt: at(-50) }, now)).toBe('pool bp_1: 0 of 10 warm, launching 2, next in 0.0 s');
  });
});
