/**
 * A keyed work queue with the semantics of client-go's `workqueue` (the one every
 * Kubernetes controller is built on), because reconcilers depend on exactly them:
 *
 * - A key is queued at most once however many events name it (dirty set), so a burst of
 *   watch events for one object costs one reconcile.
 * - A key being processed is never handed to a second worker. Adds that arrive while it
 *   is processed are remembered and the key is queued again when `done()` is called, so
 *   an event that raced the reconcile is never lost.
 * - Failures are retried with per-key exponential backoff combined with an overall token
 *   bucket (client-go's DefaultControllerRateLimiter: 5 ms doubling to 1000 s; 10 qps,
 *   burst 100), so one broken object cannot starve the others or hammer the API server.
 * - `addAfter` delays an add (periodic resync, requeue-after); the earliest pending time
 *   for a key wins.
 *
 * No npm package offers these semantics (p-queue and friends limit concurrency, they do
 * not deduplicate by key or hold a key back while it is processed), hence this module.
 */

export interface RateLimiter {
  /** How long to wait before this key may be retried; counts one more failure. */
  when(key: string): number;
  /** The key succeeded: forget its failures. */
  forget(key: string): void;
  /** Failures counted for the key since it was last forgotten. */
  retries(key: string): number;
}

/** Per-key exponential backoff: base × 2^failures, capped at max. */
export class ExponentialBackoffRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly baseMs = 5,
    private readonly maxMs = 1_000_000,
  ) {}

  when(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    // 2^failures overflows to Infinity long after the cap; min() keeps it finite.
    return Math.min(this.baseMs * 2 ** failures, this.maxMs);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/**
 * An overall token bucket: `burst` retries at once, then `qps` a second, whichever keys
 * they are for. Each call reserves a token and returns how long until it is available
 * (golang.org/x/time/rate's Reserve().Delay()).
 */
export class TokenBucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps = 10,
    private readonly burst = 100,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  when(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }

  forget(): void {}

  retries(): number {
    return 0;
  }
}

/** The longest wait any of the limiters asks for. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(...this.limiters.map((limiter) => limiter.when(key)));
  }

  forget(key: string): void {
    for (const limiter of this.limiters) limiter.forget(key);
  }

  retries(key: string): number {
    return Math.max(...this.limiters.map((limiter) => limiter.retries(key)));
  }
}

/** client-go's DefaultControllerRateLimiter. */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfRateLimiter(new ExponentialBackoffRateLimiter(5, 1_000_000), new TokenBucketRateLimiter(10, 100));
}

/** Counts a queue reports, for /metrics (operator/src/metrics.ts) and logs. */
export interface WorkQueueObserver {
  added?(key: string): void;
  retried?(key: string): void;
  depth?(depth: number): void;
  /** A worker took the key after it waited `waitedMs` since it was added. */
  taken?(key: string, waitedMs: number): void;
  processed?(key: string, durationMs: number): void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Map<string, number>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly drained: (() => void)[] = [];
  /** When each dirty key was added, for the time it waits (client-go's queue latency). */
  private readonly addedAt = new Map<string, number>();
  private stopping = false;

  constructor(
    private readonly limiter: RateLimiter = defaultControllerRateLimiter(),
    private readonly observer: WorkQueueObserver = {},
  ) {}

  /** Queues the key unless it is already queued; a key being processed is queued again at done(). */
  add(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.addedAt.set(key, performance.now());
    this.observer.added?.(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter(this.take(key));
    else {
      this.queue.push(key);
      this.observer.depth?.(this.queue.length);
    }
  }

  /** Adds the key after `delayMs`; of several pending delays for one key the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopping) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    // A pending resync must not keep a stopping process alive.
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  /** Adds the key after the rate limiter's backoff for it (a failed reconcile). */
  addRateLimited(key: string): void {
    if (this.stopping) return;
    this.observer.retried?.(key);
    this.addAfter(key, this.limiter.when(key));
  }

  /** Forgets the key's failures (a successful reconcile); pending delayed adds stay. */
  forget(key: string): void {
    this.limiter.forget(key);
  }

  retries(key: string): number {
    return this.limiter.retries(key);
  }

  /** The next key to process, waiting for one; undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.observer.depth?.(this.queue.length);
      return Promise.resolve(this.take(key));
    }
    if (this.stopping) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Ends processing of the key; queues it again if it was added meanwhile. */
  done(key: string): void {
    const started = this.processing.get(key);
    if (started === undefined) return;
    this.processing.delete(key);
    this.observer.processed?.(key, performance.now() - started);
    if (this.dirty.has(key) && !this.stopping) {
      const waiter = this.waiters.shift();
      if (waiter) waiter(this.take(key));
      else {
        this.queue.push(key);
        this.observer.depth?.(this.queue.length);
      }
    }
    if (this.stopping && this.processing.size === 0) this.drained.splice(0).forEach((resolve) => resolve());
  }

  /** Keys waiting to be processed (not counting delayed adds or keys being processed). */
  get length(): number {
    return this.queue.length;
  }

  get shuttingDown(): boolean {
    return this.stopping;
  }

  /**
   * Stops handing out keys: waiting get() calls resolve undefined, adds are ignored,
   * delayed adds are cancelled. Resolves once every key being processed is done.
   */
  shutDown(): Promise<void> {
    this.stopping = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.addedAt.clear();
    this.observer.depth?.(0);
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private take(key: string): string {
    const now = performance.now();
    this.dirty.delete(key);
    this.processing.set(key, now);
    this.observer.taken?.(key, now - (this.addedAt.get(key) ?? now));
    this.addedAt.delete(key);
    return key;
  }
}

export interface ReconcileOutcome {
  /** Reconcile this key again after this long even if nothing changes (external state). */
  requeueAfterMs?: number;
}

/** How a reconcile ended, as controller-runtime's reconcile_total labels it. */
export type ReconcileResult = 'success' | 'requeue_after' | 'error';

export interface RunWorkersOptions {
  workers: number;
  /** Called for each failed reconcile, before the key is re-queued with backoff. */
  onError?(key: string, error: unknown, retries: number): void;
  /** Called after each reconcile with its result and how long it took (for /metrics). */
  onReconciled?(key: string, result: ReconcileResult, durationMs: number): void;
}

/**
 * Runs `workers` loops that take keys and reconcile them: success forgets the key's
 * failures (and re-queues it after `requeueAfterMs` when asked), failure re-queues it with
 * backoff. Resolves when the queue has shut down and every worker has returned.
 */
export async function runWorkers(
  queue: WorkQueue,
  reconcile: (key: string) => Promise<ReconcileOutcome | void>,
  options: RunWorkersOptions,
): Promise<void> {
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const started = performance.now();
      try {
        const outcome = await reconcile(key);
        queue.forget(key);
        if (outcome?.requeueAfterMs !== undefined) queue.addAfter(key, outcome.requeueAfterMs);
        options.onReconciled?.(key, outcome?.requeueAfterMs !== undefined ? 'requeue_after' : 'success', performance.now() - started);
      } catch (error) {
        options.onReconciled?.(key, 'error', performance.now() - started);
        options.onError?.(key, error, queue.retries(key));
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: options.workers }, worker));
}
