import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  LeaderElector,
  decideLease,
  type LeaseRecord,
  type LeaseStore,
  type StoredLease,
} from '../../operator/src/k8s/leader-election.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const record = (holder: string, over: Partial<LeaseRecord> = {}): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: new Date(T0).toISOString(),
  renewTime: new Date(T0).toISOString(),
  leaseTransitions: 3,
  ...over,
});

describe('decideLease', () => {
  const base = { identity: 'me', now: T0 + 20_000, leaseDurationMs: 15_000 };
  it.each([
    ['creates a missing lease', undefined, T0, 'create'],
    ['renews its own lease', record('me'), T0, 'renew'],
    ['waits while another holder changed the record within the duration', record('other'), T0 + 6_000, 'wait'],
    ['takes over once the record has not changed for a whole duration', record('other'), T0 + 5_000, 'take-over'],
    ['takes over a released lease at once', record('', { leaseDurationSeconds: 1 }), T0 + 20_000, 'take-over'],
    ['reads the holder’s own duration from the record', record('other', { leaseDurationSeconds: 30 }), T0 + 5_000, 'wait'],
  ] as const)('%s', (_name, rec, observedChangeAt, action) => {
    const lease = rec ? { record: rec, resourceVersion: '7' } : undefined;
    expect(decideLease({ ...base, lease, observedChangeAt }).action).toBe(action);
  });

  it('counts a transition on take-over and keeps acquireTime on renew', () => {
    const lease = { record: record('other'), resourceVersion: '7' };
    const taken = decideLease({ ...base, lease, observedChangeAt: T0 });
    expect(taken).toMatchObject({ action: 'take-over', record: { holderIdentity: 'me', leaseTransitions: 4, acquireTime: new Date(base.now).toISOString() } });
    const renewed = decideLease({ ...base, lease: { record: record('me'), resourceVersion: '8' }, observedChangeAt: T0 });
    expect(renewed).toMatchObject({ action: 'renew', record: { acquireTime: new Date(T0).toISOString(), renewTime: new Date(base.now).toISOString(), leaseTransitions: 3 } });
  });

  it('says how long the holder still has', () => {
    const decision = decideLease({ ...base, lease: { record: record('other'), resourceVersion: '7' }, observedChangeAt: T0 + 10_000 });
    expect(decision).toEqual({ action: 'wait', holder: 'other', expiresInMs: 5_000 });
  });
});

/**
 * A Lease store with the API server's compare-and-swap on resourceVersion. A stand-in for
 * the unit tier only; the Kubernetes tier runs the elector against a real kube-apiserver.
 */
class MemoryLeaseStore {
  lease: StoredLease | undefined;
  private version = 0;
  writes: string[] = [];

  forCandidate(reachable: () => boolean = () => true): LeaseStore {
    const check = (): void => {
      if (!reachable()) throw new Error('connect ECONNREFUSED');
    };
    return {
      get: () => {
        check();
        return Promise.resolve(this.lease && structuredClone(this.lease));
      },
      create: (rec) => {
        check();
        if (this.lease) return Promise.resolve(false);
        this.lease = { record: rec, resourceVersion: String(++this.version) };
        this.writes.push(rec.holderIdentity);
        return Promise.resolve(true);
      },
      update: (rec, resourceVersion) => {
        check();
        if (this.lease?.resourceVersion !== resourceVersion) return Promise.resolve(false);
        this.lease = { record: rec, resourceVersion: String(++this.version) };
        this.writes.push(rec.holderIdentity);
        return Promise.resolve(true);
      },
    };
  }
}

describe('LeaderElector', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
    vi.spyOn(Math, 'random').mockReturnValue(0);
  });
  afterEach(() => {
    vi.restoreAllMocks();
    vi.useRealTimers();
  });

  function candidate(name: string, store: LeaseStore, events: string[]) {
    const stop = new AbortController();
    const elector = new LeaderElector({
      identity: name,
      store,
      onStartedLeading: (signal) => {
        events.push(`${name} leads @${Date.now() - T0}`);
        signal.addEventListener('abort', () => events.push(`${name} work stopped @${Date.now() - T0}`));
      },
      onStoppedLeading: () => events.push(`${name} stopped leading @${Date.now() - T0}`),
    });
    return { elector, stop, done: elector.run(stop.signal) };
  }

  it('of candidates starting together exactly one leads', async () => {
    const store = new MemoryLeaseStore();
    const events: string[] = [];
    const all = ['a', 'b', 'c', 'd', 'e'].map((name) => candidate(name, store.forCandidate(), events));
    await vi.advanceTimersByTimeAsync(30_000);
    expect(all.filter(({ elector }) => elector.isLeader)).toHaveLength(1);
    expect(events.filter((event) => event.includes('leads'))).toHaveLength(1);
    for (const { stop } of all) stop.abort();
    await Promise.all(all.map(({ done }) => done));
  });

  it('a leader that stops cleanly releases the Lease and a successor leads within one retry period', async () => {
    const store = new MemoryLeaseStore();
    const events: string[] = [];
    const a = candidate('a', store.forCandidate(), events);
    await vi.advanceTimersByTimeAsync(100);
    const b = candidate('b', store.forCandidate(), events);
    await vi.advanceTimersByTimeAsync(10_000);
    a.stop.abort();
    await expect(a.done).resolves.toBe('stopped');
    await vi.advanceTimersByTimeAsync(2_500);
    expect(events).toEqual(['a leads @0', 'a work stopped @10100', 'a stopped leading @10100', 'b leads @12100']);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it('on a clean stop the Lease is released only after the leader’s work has drained', async () => {
    const store = new MemoryLeaseStore();
    const events: string[] = [];
    const stop = new AbortController();
    const a = new LeaderElector({
      identity: 'a',
      store: store.forCandidate(),
      // Work that takes 3 s to drain after its signal aborts, as reconciles in flight do.
      onStartedLeading: (signal) =>
        new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => setTimeout(() => (events.push(`a drained @${Date.now() - T0}`), resolve()), 3_000)),
        ),
    });
    const done = a.run(stop.signal);
    await vi.advanceTimersByTimeAsync(100);
    const b = candidate('b', store.forCandidate(), events);
    await vi.advanceTimersByTimeAsync(5_000);
    stop.abort();
    await vi.advanceTimersByTimeAsync(10_000);
    await expect(done).resolves.toBe('stopped');
    const drainedAt = Number(/a drained @(\d+)/.exec(events.join('\n'))![1]);
    const successorAt = Number(/b leads @(\d+)/.exec(events.join('\n'))![1]);
    expect(drainedAt).toBe(5_100 + 3_000);
    expect(successorAt).toBeGreaterThanOrEqual(drainedAt);
    // Released, not expired: b leads within a retry period of the drain, not 15 s later.
    expect(successorAt).toBeLessThanOrEqual(drainedAt + 2_500);
    b.stop.abort();
    await b.done;
  });

  it('a drain that outlasts the renew deadline does not hold the Lease longer', async () => {
    const store = new MemoryLeaseStore();
    const stop = new AbortController();
    const a = new LeaderElector({ identity: 'a', store: store.forCandidate(), onStartedLeading: () => new Promise<void>(() => {}) });
    const done = a.run(stop.signal);
    await vi.advanceTimersByTimeAsync(1_000);
    stop.abort();
    await vi.advanceTimersByTimeAsync(10_000);
    await expect(done).resolves.toBe('stopped');
    expect(store.lease?.record.holderIdentity).toBe('');
  });

  it('a leader cut off from the API server stops its work before a successor takes over', async () => {
    const store = new MemoryLeaseStore();
    const events: string[] = [];
    let aReachable = true;
    const a = candidate('a', store.forCandidate(() => aReachable), events);
    await vi.advanceTimersByTimeAsync(100);
    const b = candidate('b', store.forCandidate(), events);
    await vi.advanceTimersByTimeAsync(5_000);
    aReachable = false;
    await vi.advanceTimersByTimeAsync(30_000);
    await expect(a.done).resolves.toBe('lost');
    const stoppedAt = Number(/a work stopped @(\d+)/.exec(events.join('\n'))![1]);
    const successorAt = Number(/b leads @(\d+)/.exec(events.join('\n'))![1]);
    // a's last renewal was at 4 s: it gives up by its 10 s renew deadline; b waits out
    // the 15 s duration from when it last saw the record change.
    expect(stoppedAt).toBeLessThanOrEqual(4_000 + 10_000 + 2_000);
    expect(successorAt).toBeGreaterThanOrEqual(4_000 + 15_000);
    expect(stoppedAt).toBeLessThan(successorAt);
    // The cut-off leader did not release (it could not), and b counted the transition.
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it('refuses timings where a leader could still act after its lease expired', () => {
    const store = new MemoryLeaseStore().forCandidate();
    expect(() => new LeaderElector({ identity: 'x', store, leaseDurationMs: 10_000, renewDeadlineMs: 10_000, onStartedLeading: () => {} })).toThrow(
      /leaseDuration > renewDeadline > retryPeriod/,
    );
  });
});
