import client from 'prom-client';
import { databaseUnavailable } from '../../db/unavailable.js';
import { AppError } from '../../http/errors.js';

/** Acquire waits: from a few milliseconds (a browser freed at once) to the 55 s cap. */
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60];
/** Warm launches: a local Chromium starts in about a second, a pod in several. */
const LAUNCH_BUCKETS = [0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120];

/** How a queued acquire ended: a browser leased, none came in time (or the client left, or shutdown), or an error. */
export type WaitOutcome = 'leased' | 'none' | 'failed';
/** What a release did with the browser: back in the pool after a reset, closed (not reusable), or closed because its reset failed. */
export type ReleaseOutcome = 'reused' | 'closed' | 'reset_failed';

/**
 * This replica's pool metrics, counted where things happen (in memory, per pool id: a
 * bounded label set, pools only, never sessions). Counters and histograms of N replicas
 * add up to the service's; the gauges read this replica's own state (its waiters, its
 * launches in flight), so they add up too.
 *
 * Built unregistered, like the audit recorder's: the app registers them on its registry
 * (registerMetrics), so tests may build many apps.
 */
export class PoolMetrics {
  private readonly leases = new client.Counter({
    name: 'browserplane_pool_leases_total',
    help: 'Browsers leased by acquire, per pool, on this replica (a lease is an event: the current number leased is browserplane_pool_browsers{state="leased"})',
    labelNames: ['pool'] as const,
    registers: [],
  });
  private readonly waits = new client.Histogram({
    name: 'browserplane_pool_acquire_wait_seconds',
    help: 'How long acquires that found no idle browser waited, per pool and outcome (leased, none, failed)',
    labelNames: ['pool', 'outcome'] as const,
    buckets: WAIT_BUCKETS,
    registers: [],
  });
  private readonly launches = new client.Counter({
    name: 'browserplane_pool_launches_total',
    help: 'Warm browser launches started by the fill, per pool, on this replica',
    labelNames: ['pool'] as const,
    registers: [],
  });
  private readonly failures = new client.Counter({
    name: 'browserplane_pool_launch_failures_total',
    help: 'Warm browser launches or fill steps that failed, per pool and reason (the error code: browser_launch_failed, browser_launch_timeout, database_unavailable, …)',
    labelNames: ['pool', 'reason'] as const,
    registers: [],
  });
  private readonly launchSeconds = new client.Histogram({
    name: 'browserplane_pool_launch_duration_seconds',
    help: 'How long a warm browser took from launch to ready, per pool',
    labelNames: ['pool'] as const,
    buckets: LAUNCH_BUCKETS,
    registers: [],
  });
  private readonly releases = new client.Counter({
    name: 'browserplane_pool_releases_total',
    help: 'Leased browsers released, per pool and outcome (reused after a reset, closed, reset_failed)',
    labelNames: ['pool', 'outcome'] as const,
    registers: [],
  });
  /** The failure reasons seen per pool, to remove their series with the pool. */
  private readonly reasons = new Map<string, Set<string>>();
  private readonly all = [this.leases, this.waits, this.launches, this.failures, this.launchSeconds, this.releases];

  registerMetrics(registry: client.Registry, state: { waiters(): Map<string, number>; launching(): Map<string, number> }): void {
    for (const metric of this.all) registry.registerMetric(metric);
    new client.Gauge({
      name: 'browserplane_pool_acquire_waiters',
      help: 'Acquires waiting for an idle browser, per pool, on this replica',
      labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [pool, n] of state.waiters()) this.set({ pool }, n);
      },
    });
    new client.Gauge({
      name: 'browserplane_pool_launches_in_flight',
      help: 'Warm browser launches this replica has started and not finished, per pool',
      labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [pool, n] of state.launching()) this.set({ pool }, n);
      },
    });
  }

  leased(pool: string): void {
    this.leases.inc({ pool });
  }

  waited(pool: string, outcome: WaitOutcome, seconds: number): void {
    this.waits.observe({ pool, outcome }, seconds);
  }

  launchStarted(pool: string): void {
    this.launches.inc({ pool });
  }

  launchFailed(pool: string, error: unknown): void {
    const reason = reasonOf(error);
    this.failures.inc({ pool, reason });
    let reasons = this.reasons.get(pool);
    if (!reasons) this.reasons.set(pool, (reasons = new Set()));
    reasons.add(reason);
  }

  launched(pool: string, seconds: number): void {
    this.launchSeconds.observe({ pool }, seconds);
  }

  released(pool: string, outcome: ReleaseOutcome): void {
    this.releases.inc({ pool, outcome });
  }

  /** The pool is deleted: its series go, so deleted pools do not pile up in every scrape. */
  forget(pool: string): void {
    for (const metric of [this.leases, this.launches, this.launchSeconds]) metric.remove({ pool });
    for (const outcome of WAIT_OUTCOMES) this.waits.remove({ pool, outcome });
    for (const outcome of RELEASE_OUTCOMES) this.releases.remove({ pool, outcome });
    for (const reason of this.reasons.get(pool) ?? []) this.failures.remove({ pool, reason });
    this.reasons.delete(pool);
  }
}

const WAIT_OUTCOMES: readonly WaitOutcome[] = ['leased', 'none', 'failed'];
const RELEASE_OUTCOMES: readonly ReleaseOutcome[] = ['reused', 'closed', 'reset_failed'];

/** A bounded reason: the error's code when it is the service's own error, else "error". */
export function reasonOf(error: unknown): string {
  if (databaseUnavailable(error)) return 'database_unavailable';
  return error instanceof AppError ? error.code : 'error';
}
