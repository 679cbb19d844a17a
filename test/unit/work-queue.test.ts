import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ExponentialBackoffRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
  WorkQueue,
  defaultControllerRateLimiter,
  runWorkers,
} from '../../operator/src/k8s/work-queue.js';

/** A limiter that never delays, so tests of queue semantics do not depend on time. */
const noDelay = { when: () => 0, forget: () => {}, retries: () => 0 };

describe('WorkQueue', () => {
  it('queues a key once however often it is added, in first-add order', async () => {
    const queue = new WorkQueue(noDelay);
    for (const key of ['a', 'b', 'a', 'c', 'b', 'a']) queue.add(key);
    expect(queue.length).toBe(3);
    expect([await queue.get(), await queue.get(), await queue.get()]).toEqual(['a', 'b', 'c']);
  });

  it('never hands a key being processed to a second worker, and re-queues it at done() when it was added meanwhile', async () => {
    const queue = new WorkQueue(noDelay);
    queue.add('a');
    const first = await queue.get();
    queue.add('a');
    queue.add('a');
    expect(queue.length).toBe(0);
    let second: string | undefined;
    void queue.get().then((key) => (second = key));
    await Promise.resolve();
    expect(second).toBeUndefined();
    queue.done(first!);
    await Promise.resolve();
    expect(second).toBe('a');
    queue.done('a');
    expect(queue.length).toBe(0);
  });

  it('does not re-queue a key at done() when nothing added it meanwhile', async () => {
    const queue = new WorkQueue(noDelay);
    queue.add('a');
    queue.done((await queue.get())!);
    expect(queue.length).toBe(0);
  });

  it('hands a key added later to a worker already waiting', async () => {
    const queue = new WorkQueue(noDelay);
    const waiting = queue.get();
    queue.add('x');
    await expect(waiting).resolves.toBe('x');
  });

  describe('with fake timers', () => {
    beforeEach(() => {
      vi.useFakeTimers();
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it('adds after a delay, and the earliest of several pending delays wins', async () => {
      const queue = new WorkQueue(noDelay);
      queue.addAfter('a', 1000);
      queue.addAfter('a', 300);
      queue.addAfter('a', 5000);
      await vi.advanceTimersByTimeAsync(299);
      expect(queue.length).toBe(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(queue.length).toBe(1);
      await queue.get().then((key) => queue.done(key!));
      await vi.advanceTimersByTimeAsync(10_000);
      expect(queue.length).toBe(0);
    });

    it('backs a failing key off exponentially and forgets its failures on success', () => {
      const limiter = new ExponentialBackoffRateLimiter(5, 1000);
      expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map(() => limiter.when('k'))).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1000]);
      expect(limiter.retries('k')).toBe(9);
      expect(limiter.when('other')).toBe(5);
      limiter.forget('k');
      expect(limiter.retries('k')).toBe(0);
      expect(limiter.when('k')).toBe(5);
    });

    it('lets a burst through the token bucket, then spaces retries at its rate', () => {
      const limiter = new TokenBucketRateLimiter(10, 3);
      expect([limiter.when(), limiter.when(), limiter.when()]).toEqual([0, 0, 0]);
      expect(limiter.when()).toBe(100);
      expect(limiter.when()).toBe(200);
      vi.advanceTimersByTime(1000);
      // Ten tokens refilled, two were owed, the bucket holds at most three.
      expect(limiter.when()).toBe(0);
    });

    it('the default limiter waits as long as the slower of backoff and bucket', () => {
      const limiter = new MaxOfRateLimiter(new ExponentialBackoffRateLimiter(5, 1000), new TokenBucketRateLimiter(10, 1));
      expect(limiter.when('a')).toBe(5);
      expect(limiter.when('b')).toBe(100);
      expect(defaultControllerRateLimiter().when('x')).toBe(5);
    });

    it('shutDown wakes waiting workers with undefined, drops delayed adds and waits for keys in flight', async () => {
      const queue = new WorkQueue(noDelay);
      queue.add('busy');
      const busy = (await queue.get())!;
      const waiting = queue.get();
      queue.addAfter('later', 1000);
      let drained = false;
      const stopping = queue.shutDown().then(() => (drained = true));
      await expect(waiting).resolves.toBeUndefined();
      queue.add('ignored');
      await vi.advanceTimersByTimeAsync(2000);
      expect(queue.length).toBe(0);
      expect(drained).toBe(false);
      queue.done(busy);
      await stopping;
      expect(drained).toBe(true);
      await expect(queue.get()).resolves.toBeUndefined();
    });
  });
});

describe('runWorkers', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('retries a failing key with growing backoff until it succeeds, then forgets its failures', async () => {
    const queue = new WorkQueue(new ExponentialBackoffRateLimiter(100, 10_000));
    const attempts: number[] = [];
    const errors: number[] = [];
    const running = runWorkers(
      queue,
      () => {
        attempts.push(Date.now());
        return attempts.length < 4 ? Promise.reject(new Error('not yet')) : Promise.resolve();
      },
      { workers: 2, onError: (_key, _error, retries) => errors.push(retries) },
    );
    const start = Date.now();
    queue.add('k');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(attempts.map((at) => at - start)).toEqual([0, 100, 300, 700]);
    expect(errors).toEqual([0, 1, 2]);
    expect(queue.retries('k')).toBe(0);
    await queue.shutDown();
    await running;
  });

  it('requeues after requeueAfterMs on success (periodic resync)', async () => {
    const queue = new WorkQueue(noDelay);
    let count = 0;
    const running = runWorkers(queue, () => Promise.resolve({ requeueAfterMs: count++ < 2 ? 1000 : undefined }), { workers: 1 });
    queue.add('k');
    await vi.advanceTimersByTimeAsync(5000);
    expect(count).toBe(3);
    await queue.shutDown();
    await running;
  });

  it('reconciles each key once per burst of adds and never the same key on two workers at once', async () => {
    const queue = new WorkQueue(noDelay);
    const active = new Set<string>();
    const overlaps: string[] = [];
    const runs = new Map<string, number>();
    const running = runWorkers(
      queue,
      async (key) => {
        if (active.has(key)) overlaps.push(key);
        active.add(key);
        runs.set(key, (runs.get(key) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 50));
        active.delete(key);
      },
      { workers: 4 },
    );
    for (let i = 0; i < 100; i++) queue.add(`k${i % 5}`);
    await vi.advanceTimersByTimeAsync(10);
    // Four keys are in flight and k4 waits in the queue. Adds now: each in-flight key is
    // reconciled exactly once more; k4, still queued, is not queued twice.
    for (let i = 0; i < 100; i++) queue.add(`k${i % 5}`);
    await vi.advanceTimersByTimeAsync(1000);
    expect(overlaps).toEqual([]);
    expect(Object.fromEntries(runs)).toEqual({ k0: 2, k1: 2, k2: 2, k3: 2, k4: 1 });
    await queue.shutDown();
    await running;
  });
});
