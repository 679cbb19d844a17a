import type { Logger } from 'pino';
import { describeExit, type Postmaster } from './postmaster.js';

/**
 * Keeps the embedded Postgres running: when its postmaster exits without being asked to,
 * a new one is started with exponential backoff (0.5 s doubling to 30 s; back to 0.5 s
 * once a server has stayed up a minute). Every unexpected exit and every failed start is
 * a failure; `limit` failures within `windowMs` and it gives up, and the service's
 * /healthz fails so whatever supervises the process restarts it. A clean stop restarts
 * nothing. Postgres itself runs crash recovery when it starts after a kill.
 */

export interface RestartPolicy {
  /** Failures (unexpected exits and failed restarts) within the window that make it give up. */
  limit: number;
  windowMs: number;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** A server up this long has recovered: the next failure waits the initial delay again. */
  stableAfterMs?: number;
}

export const DEFAULT_RESTART_POLICY = { limit: 10, windowMs: 300_000 } as const;
const INITIAL_DELAY_MS = 500;
const MAX_DELAY_MS = 30_000;
const STABLE_AFTER_MS = 60_000;
/** How long a clean stop gives Postgres's fast shutdown (as `pg_ctl stop -t 60` did). */
export const STOP_TIMEOUT_MS = 60_000;

/** What the supervisor is doing, as the health endpoints report it. */
export type DatabaseSupervision =
  | { state: 'running'; restarts: number }
  | {
      state: 'restarting';
      /** The restart attempt under way or next, from 1 since the server was last up. */
      attempt: number;
      /** 0 while the attempt is starting Postgres. */
      next_attempt_in_ms: number;
      /** The last failure: how the server exited, or why the last attempt failed. */
      reason: string;
      down_since: string;
      failures_in_window: number;
      failure_limit: number;
      window_seconds: number;
    }
  | { state: 'failed'; reason: string; failed_at: string; failures_in_window: number; failure_limit: number; window_seconds: number }
  | { state: 'stopped' };

export class PostgresSupervisor {
  private current: Postmaster | undefined;
  private upSince = 0;
  private downSince = 0;
  private consecutive = 0;
  private attempt = 0;
  private restarts = 0;
  private failures: number[] = [];
  private reason = '';
  private nextAttemptAt = 0;
  private failedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopping = false;
  /** Pids of postmasters this process started and reaped: their lock file is stale. */
  private readonly reaped = new Set<number>();
  private readonly policy: Required<RestartPolicy>;

  constructor(
    /**
     * Starts a postmaster and resolves once it accepts connections, or rejects with why
     * not; given the pids of the postmasters that exited, whose lock file is stale.
     */
    private readonly launch: (reaped: ReadonlySet<number>) => Promise<Postmaster>,
    policy: RestartPolicy,
    private readonly log: Logger,
  ) {
    this.policy = {
      initialDelayMs: INITIAL_DELAY_MS,
      maxDelayMs: MAX_DELAY_MS,
      stableAfterMs: STABLE_AFTER_MS,
      ...policy,
    };
  }

  /** Supervises a postmaster that has started and accepts connections. */
  watch(postmaster: Postmaster): void {
    this.current = postmaster;
    this.upSince = Date.now();
    void postmaster.exited.then((exit) => {
      this.reaped.add(postmaster.pid);
      if (this.stopping || this.current !== postmaster) return;
      this.current = undefined;
      this.downSince = Date.now();
      this.attempt = 0;
      if (this.downSince - this.upSince >= this.policy.stableAfterMs) this.consecutive = 0;
      this.failed(`the Postgres server (pid ${postmaster.pid}) ${describeExit(exit)}`, 'embedded Postgres exited unexpectedly');
    });
  }

  status(): DatabaseSupervision {
    const budget = { failures_in_window: this.recentFailures(), failure_limit: this.policy.limit, window_seconds: this.policy.windowMs / 1000 };
    if (this.stopping) return { state: 'stopped' };
    if (this.current) return { state: 'running', restarts: this.restarts };
    if (this.failedAt) return { state: 'failed', reason: this.reason, failed_at: new Date(this.failedAt).toISOString(), ...budget };
    return {
      state: 'restarting',
      attempt: this.attempt,
      next_attempt_in_ms: Math.max(0, this.nextAttemptAt - Date.now()),
      reason: this.reason,
      down_since: new Date(this.downSince).toISOString(),
      ...budget,
    };
  }

  /** Stops the server (fast shutdown) and restarts nothing after; waits for an attempt under way. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.inFlight;
    if (this.current) await this.current.stop(STOP_TIMEOUT_MS);
  }

  private recentFailures(): number {
    const since = Date.now() - this.policy.windowMs;
    this.failures = this.failures.filter((at) => at > since);
    return this.failures.length;
  }

  /** Counts a failure, then gives up or schedules the next attempt. */
  private failed(reason: string, message: string): void {
    this.failures.push(Date.now());
    this.reason = reason;
    const failures = this.recentFailures();
    const fields = {
      component: 'postgres',
      ...(this.attempt ? { failed_attempt: this.attempt } : {}),
      reason,
      failures_in_window: failures,
      failure_limit: this.policy.limit,
    };
    if (failures >= this.policy.limit) {
      this.failedAt = Date.now();
      this.log.error(
        { ...fields, attempts: this.attempt, window_seconds: this.policy.windowMs / 1000 },
        `${message}; giving up after ${failures} failures within ${this.policy.windowMs / 1000} s: /healthz now fails so the service is restarted`,
      );
      return;
    }
    const delayMs = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** this.consecutive);
    this.consecutive++;
    this.attempt++;
    this.nextAttemptAt = Date.now() + delayMs;
    this.log.warn({ ...fields, attempt: this.attempt, delay_ms: delayMs }, `${message}; restarting it`);
    this.timer = setTimeout(() => (this.inFlight = this.restart()), delayMs);
    this.timer.unref();
  }

  private async restart(): Promise<void> {
    try {
      const postmaster = await this.launch(this.reaped);
      if (this.stopping) {
        await postmaster.stop(STOP_TIMEOUT_MS);
        return;
      }
      this.restarts++;
      this.log.warn(
        { component: 'postgres', attempt: this.attempt, pid: postmaster.pid, down_ms: Date.now() - this.downSince, restarts: this.restarts },
        'embedded Postgres restarted',
      );
      this.watch(postmaster);
    } catch (error) {
      if (this.stopping) return;
      this.failed(`restart attempt ${this.attempt} failed: ${(error as Error).message}`, 'embedded Postgres restart failed');
    } finally {
      this.inFlight = undefined;
    }
  }
}
