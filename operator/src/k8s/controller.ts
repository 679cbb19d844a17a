/**
 * A controller as client-go's controllers are built: informers (list + watch, a local
 * cache) feed keys into a rate-limited work queue, and workers reconcile keys, never one
 * key on two workers at once. Level-triggered: a reconcile reads the current state from
 * the caches and the API, never the event that woke it, so a missed or merged event costs
 * nothing but latency.
 *
 * Watches: client-node's ListWatch resumes a watch the server closed normally from its
 * last resourceVersion and relists when the server answers 410 Gone. A watch that fails
 * (network, API server restart) stops with an error; this module restarts it after a
 * backoff (1 s doubling to 30 s), as client-go's reflector does. Every `resyncMs` all
 * cached keys are queued again, which repairs anything a bug or an outside change
 * outside the watched kinds left behind.
 */
import type { Informer, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import { runWorkers, WorkQueue, type RateLimiter, type ReconcileOutcome, type ReconcileResult, type WorkQueueObserver } from './work-queue.js';
import { keepInformerRunning, WATCH_RESTART_BACKOFF } from '../../../lib/informer-restart.js';

export interface ControllerSource<T extends KubernetesObject = KubernetesObject> {
  name: string;
  informer: Informer<T> & ObjectCache<T>;
  /** The keys an object's change should reconcile: itself, or its owner for a child. */
  keysOf(object: T): string[];
}

export interface ControllerLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** What controllers report for /metrics; operator/src/metrics.ts implements it (this module stays free of prom-client). */
export interface ControllerMetrics {
  /** The observer of the named controller's work queue. */
  queueObserver(controller: string): WorkQueueObserver;
  reconciled(controller: string, result: ReconcileResult, durationMs: number): void;
}

export interface ControllerOptions {
  name: string;
  sources: ControllerSource[];
  reconcile(key: string): Promise<ReconcileOutcome | void>;
  workers?: number;
  resyncMs?: number;
  log: ControllerLog;
  rateLimiter?: RateLimiter;
  observer?: WorkQueueObserver;
  metrics?: ControllerMetrics;
  /** First and longest wait before restarting a failed watch. */
  watchBackoffMs?: { initial: number; max: number };
}

/** `namespace/name`, or `name` for cluster-scoped objects: client-go's key format. */
export function objectKey(object: KubernetesObject): string {
  const { namespace, name } = object.metadata ?? {};
  return namespace ? `${namespace}/${name}` : `${name}`;
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export class Controller {
  readonly queue: WorkQueue;
  private readonly restarts = new Map<string, number>();

  constructor(private readonly options: ControllerOptions) {
    this.queue = new WorkQueue(options.rateLimiter, options.observer ?? options.metrics?.queueObserver(options.name));
  }

  /** How often each source's watch had to be restarted after an error. */
  get watchRestarts(): ReadonlyMap<string, number> {
    return this.restarts;
  }

  /** Runs until `signal` aborts; then stops the watches and waits for reconciles in flight. */
  async run(signal: AbortSignal): Promise<void> {
    const { sources, log, name } = this.options;
    const backoff = this.options.watchBackoffMs ?? WATCH_RESTART_BACKOFF;
    const enqueue = (source: ControllerSource) => (object: KubernetesObject) => {
      for (const key of source.keysOf(object)) this.queue.add(key);
    };
    for (const source of sources) {
      const add = enqueue(source);
      source.informer.on('add', add);
      source.informer.on('update', add);
      source.informer.on('delete', add);
      keepInformerRunning(source.informer, {
        backoff,
        stopped: () => signal.aborted,
        onFailure: (error, retryInMs) => {
          this.restarts.set(source.name, (this.restarts.get(source.name) ?? 0) + 1);
          log.warn({ controller: name, source: source.name, err: error, retryInMs }, 'watch failed; restarting');
        },
      });
    }
    // The first list of every source completes before workers start, so a reconcile
    // never mistakes an empty cache for "nothing exists" (client-go's WaitForCacheSync).
    // client-node's start() resolves after a failed list too (reporting it through
    // 'error', where keepInformerRunning retries): only a resource version means listed.
    await Promise.all(sources.map((source) => source.informer.start()));
    await Promise.all(sources.map((source) => untilListed(source.informer, signal)));
    if (signal.aborted) {
      await Promise.all(sources.map((source) => source.informer.stop()));
      return;
    }
    log.info({ controller: name, sources: sources.map((s) => s.name) }, 'caches synced; reconciling');

    const resync = setInterval(() => {
      for (const source of sources) for (const object of source.informer.list()) enqueue(source)(object);
    }, this.options.resyncMs ?? 300_000);
    resync.unref();
    const workers = runWorkers(this.queue, (key) => this.options.reconcile(key), {
      workers: this.options.workers ?? 2,
      onError: (key, error, retries) => log.warn({ controller: name, resource: key, err: error, retries }, 'reconcile failed; retrying with backoff'),
      onReconciled: (_key, result, durationMs) => this.options.metrics?.reconciled(name, result, durationMs),
    });

    await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    clearInterval(resync);
    await Promise.all(sources.map((source) => source.informer.stop()));
    await this.queue.shutDown();
    await workers;
  }
}

/**
 * Resolves once the informer's cache holds a successful list, or `signal` aborts. An
 * informer that cannot tell (not client-node's ListWatch) counts as listed once started.
 */
async function untilListed(informer: object, signal: AbortSignal): Promise<void> {
  const listed = informer as { latestResourceVersion?: () => string };
  if (typeof listed.latestResourceVersion !== 'function') return;
  while (!signal.aborted && listed.latestResourceVersion() === '') {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, 100);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
