import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PostgresSupervisor } from '../../api/src/db/postgres-supervisor.js';
import type { Postmaster, PostmasterExit } from '../../api/src/db/postmaster.js';

/**
 * The supervisor's restart policy (delays, their reset, the failure budget, a clean stop)
 * under fake timers. FAKE: the postmasters here are in-memory stand-ins whose exit the
 * test triggers, and `launch` succeeds or fails as the test says; the real processes,
 * killed and restarted, are in test/faults/postgres-supervision.test.ts, which cannot
 * wait out minutes of backoff.
 */

interface FakePostmaster extends Postmaster {
  die(exit?: PostmasterExit): void;
}

let nextPid = 1000;
function fakePostmaster(): FakePostmaster {
  let resolveExit!: (exit: PostmasterExit) => void;
  const state: { exit?: PostmasterExit } = {};
  const exited = new Promise<PostmasterExit>((resolve) => (resolveExit = resolve));
  return {
    pid: nextPid++,
    exited,
    get exit() {
      return state.exit;
    },
    die(exit = { code: null, signal: 'SIGKILL' }) {
      state.exit ??= exit;
      resolveExit(state.exit);
    },
    stop() {
      this.die({ code: 0, signal: null });
      return Promise.resolve();
    },
  };
}

const log = pino({ level: 'silent' });

/** A supervisor whose launches answer from `outcomes` (true: a server starts), recording when each was made. */
function setUp(outcomes: boolean[], policy = { limit: 100, windowMs: 3_600_000 }) {
  const launches: number[] = [];
  const servers: FakePostmaster[] = [];
  const start = Date.now();
  const supervisor = new PostgresSupervisor(
    () => {
      launches.push(Date.now() - start);
      if (outcomes.shift() === false) return Promise.reject(new Error('could not start'));
      const server = fakePostmaster();
      servers.push(server);
      return Promise.resolve(server);
    },
    policy,
    log,
  );
  const first = fakePostmaster();
  servers.push(first);
  supervisor.watch(first);
  return { supervisor, launches, servers, start };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('PostgresSupervisor', () => {
  it('waits 0.5 s doubling to 30 s between failed attempts, and reports each one', async () => {
    const { supervisor, launches, servers } = setUp(Array(9).fill(false));
    servers[0]!.die();
    await vi.advanceTimersByTimeAsync(0);
    expect(supervisor.status()).toMatchObject({ state: 'restarting', attempt: 1, next_attempt_in_ms: 500, reason: expect.stringContaining('SIGKILL') });
    await vi.advanceTimersByTimeAsync(125_000); // the 9th fails at 121.5 s; the 10th would be at 151.5 s
    const gaps = launches.map((at, i) => at - (launches[i - 1] ?? 0));
    expect(gaps).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(supervisor.status()).toMatchObject({ state: 'restarting', attempt: 10, reason: 'restart attempt 9 failed: could not start', failures_in_window: 10 });
    await supervisor.stop();
  });

  it('starts again from 0.5 s once a server has stayed up a minute, not before', async () => {
    const { supervisor, launches, servers } = setUp([false, true, true, true]);
    servers[0]!.die();
    await vi.advanceTimersByTimeAsync(1500); // 500: fails, 1000 later: a server
    expect(supervisor.status()).toEqual({ state: 'running', restarts: 1 });
    await vi.advanceTimersByTimeAsync(10_000);
    servers[1]!.die(); // up 10 s: the backoff carries on (2 s)
    await vi.advanceTimersByTimeAsync(2000);
    expect(supervisor.status()).toEqual({ state: 'running', restarts: 2 });
    await vi.advanceTimersByTimeAsync(60_000);
    servers[2]!.die(); // up a minute: 0.5 s again
    await vi.advanceTimersByTimeAsync(500);
    expect(supervisor.status()).toEqual({ state: 'running', restarts: 3 });
    expect(launches).toEqual([500, 1500, 13_500, 74_000]);
    await supervisor.stop();
  });

  it('gives up at the limit of failures within the window; older failures no longer count', async () => {
    const { supervisor, servers } = setUp([true, true, false, false], { limit: 3, windowMs: 60_000 });
    servers[0]!.die(); // failure 1
    await vi.advanceTimersByTimeAsync(500);
    await vi.advanceTimersByTimeAsync(61_000);
    servers[1]!.die(); // failure 1 again: the first is out of the window
    await vi.advanceTimersByTimeAsync(500);
    expect(supervisor.status()).toEqual({ state: 'running', restarts: 2 });
    servers[2]!.die(); // 2
    await vi.advanceTimersByTimeAsync(1000); // attempt fails: 3
    expect(supervisor.status()).toMatchObject({ state: 'failed', failures_in_window: 3, failure_limit: 3, window_seconds: 60, reason: 'restart attempt 1 failed: could not start' });
    await vi.advanceTimersByTimeAsync(600_000);
    expect(supervisor.status()).toMatchObject({ state: 'failed' });
    await supervisor.stop();
  });

  it('a stop restarts nothing, even with an attempt scheduled', async () => {
    const { supervisor, launches, servers } = setUp([true]);
    servers[0]!.die();
    await vi.advanceTimersByTimeAsync(100);
    await supervisor.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(launches).toEqual([]);
    expect(supervisor.status()).toEqual({ state: 'stopped' });
  });
});
