import type { AppDeps } from '../../app-deps.js';
import { channelName } from '../../events/hub.js';
import { conflict, type AppError } from '../../http/errors.js';
import { foldName } from '../../ids.js';
import type { ProjectScope } from '../../scope.js';
import { sessionConflict } from '../browsers/service.js';
import { findSession, type SessionRow } from '../browsers/store.js';
import { applyTelemetry } from '../browsers/telemetry.js';
import { pushTelemetry } from '../browsers/telemetry-door.js';
import { leaseIdleBrowser, leaseIdleBrowsers, returnToIdle, type Lease, type PoolRef } from './browsers-store.js';
import { LeaseBatcher } from './lease-batch.js';
import { getPool } from './lookup.js';
import type { PoolMetrics } from './metrics.js';
import { MAX_ACQUIRE_WAIT_SECONDS, type AcquirePoolInput } from './schema.js';
import { findPool, type PoolRow } from './store.js';

/** One channel for every pool: "a browser of pool X became idle" (payload {pool_id}). */
export const IDLE_CHANNEL = channelName('pools', 'idle');

interface Waiter {
  poolId: string;
  projectId: string;
  lease: Lease;
  settled: boolean;
  finish(row: SessionRow | undefined): void;
  fail(error: unknown): void;
}

/**
 * The acquirers of this replica: leases an idle browser at once when there is one and
 * nobody of the project waits, else queues the acquirer and serves each pool's queue first
 * come, first served (one pass over a pool's waiters at a time) as browsers become idle.
 *
 * Postgres is the authority for who holds which browser: a lease is one UPDATE of the
 * browser's row (leaseIdleBrowser), so no browser is leased twice whichever replica or
 * request asks. Across replicas, waiting acquirers compete only through their replica's
 * oldest waiter.
 */
export class LeaseQueue {
  private readonly waiters = new Map<string, Waiter[]>();
  /** Waiters per project: while any wait, the project's acquires queue instead of taking the fast path. */
  private readonly waitingIn = new Map<string, number>();
  private readonly serving = new Set<string>();
  private readonly serveAgain = new Set<string>();
  private closed = false;
  /** The fast path's leases of one pool reference, coalesced while a statement is in flight (lease-batch.ts). */
  private readonly batcher = new LeaseBatcher<{ ref: PoolRef; lease: Lease }, SessionRow | undefined>((_key, items) =>
    leaseIdleBrowsers(
      this.deps.db,
      items[0]!.ref,
      items.map((i) => i.lease),
      this.deps.clock.now(),
    ),
  );

  constructor(
    private readonly deps: AppDeps,
    private readonly metrics: PoolMetrics,
  ) {}

  /** Waiting acquirers per pool (the acquire-waiters gauge). */
  waitersByPool(): Map<string, number> {
    return new Map([...this.waiters].map(([poolId, queue]) => [poolId, queue.filter((w) => !w.settled).length]));
  }

  /** The pools some acquirer of this replica waits for. */
  poolIds(): string[] {
    return [...this.waiters.keys()];
  }

  /** Answers every waiter with "no browser" (204) and queues nobody from now on. */
  close(): void {
    this.closed = true;
    for (const queue of this.waiters.values()) for (const w of [...queue]) w.finish(undefined);
  }

  /**
   * Leases an idle browser of the pool, waiting (first come, first served) up to
   * min(acquire_timeout_seconds, 55 s) for one; undefined when none came (204). `signal`
   * is the client going away: a browser leased for a client that left goes back.
   *
   * The fast path (a browser is idle, nobody of the project waits here) is one statement
   * after authentication; the pool is read only when the lease needs it (telemetry) or
   * there is nothing to lease.
   */
  async acquire(scope: ProjectScope, idOrName: string, input: AcquirePoolInput, signal: AbortSignal): Promise<SessionRow | undefined> {
    const name = input.name === undefined || input.name === '' ? null : input.name;
    if (name !== null) {
      // Checked before waiting as well, so a taken name fails now rather than when a browser frees.
      const holder = await findSession(this.deps.db, scope, name);
      if (holder?.name !== undefined && holder.name !== null && foldName(holder.name) === foldName(name)) {
        throw conflict('browser_name_taken', `An active browser session named ${JSON.stringify(name)} already exists in this project`);
      }
    }
    const lease: Lease = { name, tags: input.tags ?? {}, startUrl: input.start_url ?? null, fastCommit: this.deps.settings.poolLeaseCommit === 'fast' };
    let pool: PoolRow | undefined;
    if (input.telemetry !== undefined && input.telemetry !== null && Object.keys(input.telemetry).length > 0) {
      pool = await getPool(this.deps.db, scope, idOrName);
      lease.telemetry = applyTelemetry(pool.telemetry, input.telemetry);
    }

    // A newcomer must not overtake those already waiting here.
    let row = this.waitingIn.has(scope.projectId) ? undefined : await this.leaseNow(scope, idOrName, lease);
    if (row === undefined) {
      pool ??= await getPool(this.deps.db, scope, idOrName);
      const waitSeconds = Math.min(input.acquire_timeout_seconds ?? defaultWaitSeconds(pool), MAX_ACQUIRE_WAIT_SECONDS);
      if (waitSeconds > 0 && !this.closed) row = await this.timedWait(scope.projectId, pool.id, lease, waitSeconds * 1000, signal);
      else if (!this.waiters.get(pool.id)?.length) row = await this.tryLease({ id: pool.id }, lease);
    }
    if (row === undefined) return undefined;
    if (signal.aborted) {
      await this.unlease(scope, row);
      return undefined;
    }
    if (lease.telemetry !== undefined) {
      // Best effort, as start_url: the row already holds the lease's categories, and the
      // agent, made with its pool's, is told them before the client connects.
      await pushTelemetry(this.deps, row.id, lease.telemetry).catch((error: unknown) =>
        this.deps.log.warn({ err: error, sessionId: row.id }, 'the lease telemetry could not be sent to the browser; it captures its pool’s'),
      );
    }
    if (lease.startUrl !== null) {
      // Best effort (CONTRACT §3): the lease's page replaces the warm one before the client connects.
      await this.deps.runtime
        .reset(row.id, { startUrl: lease.startUrl, signal: this.deps.shutdown })
        .catch((error: unknown) => this.deps.log.warn({ err: error, sessionId: row.id }, 'opening the lease start_url failed; the browser keeps its page'));
    }
    if (row.pool_id !== null) this.metrics.leased(row.pool_id);
    this.deps.log.info({ poolId: row.pool_id, sessionId: row.id, leaseSeq: row.lease_seq }, 'pool browser leased');
    return row;
  }

  private queueOf(poolId: string): Waiter[] {
    let queue = this.waiters.get(poolId);
    if (!queue) {
      queue = [];
      this.waiters.set(poolId, queue);
    }
    return queue;
  }

  /**
   * The fast path's lease, batched with the project's other acquires of the same pool.
   * A named lease goes alone: its name taken by another session fails its statement, and
   * that must not fail the leases sharing it.
   */
  private async leaseNow(scope: ProjectScope, idOrName: string, lease: Lease): Promise<SessionRow | undefined> {
    const ref: PoolRef = { scope, idOrName };
    if (lease.name !== null) return this.tryLease(ref, lease);
    try {
      return await this.batcher.submit(`${scope.orgId}\0${scope.projectId}\0${idOrName}`, { ref, lease });
    } catch (error) {
      throw sessionConflict(error, lease.name);
    }
  }

  private async tryLease(ref: PoolRef, lease: Lease): Promise<SessionRow | undefined> {
    try {
      return await leaseIdleBrowser(this.deps.db, ref, lease, this.deps.clock.now());
    } catch (error) {
      throw sessionConflict(error, lease.name);
    }
  }

  /** wait(), with the time it took in the acquire-wait histogram. */
  private async timedWait(projectId: string, poolId: string, lease: Lease, ms: number, signal: AbortSignal): Promise<SessionRow | undefined> {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const row = await this.wait(projectId, poolId, lease, ms, signal);
      this.metrics.waited(poolId, row === undefined ? 'none' : 'leased', seconds());
      return row;
    } catch (error) {
      this.metrics.waited(poolId, 'failed', seconds());
      throw error;
    }
  }

  private wait(projectId: string, poolId: string, lease: Lease, ms: number, signal: AbortSignal): Promise<SessionRow | undefined> {
    return new Promise<SessionRow | undefined>((resolve, reject) => {
      const queue = this.queueOf(poolId);
      this.waitingIn.set(projectId, (this.waitingIn.get(projectId) ?? 0) + 1);
      const settle = () => {
        waiter.settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        const at = queue.indexOf(waiter);
        if (at >= 0) queue.splice(at, 1);
        if (queue.length === 0 && this.waiters.get(poolId) === queue) this.waiters.delete(poolId);
        const left = (this.waitingIn.get(projectId) ?? 1) - 1;
        if (left > 0) this.waitingIn.set(projectId, left);
        else this.waitingIn.delete(projectId);
      };
      const waiter: Waiter = {
        poolId,
        projectId,
        lease,
        settled: false,
        finish: (row) => {
          if (waiter.settled) return;
          settle();
          resolve(row);
        },
        fail: (error) => {
          if (waiter.settled) return;
          settle();
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      };
      const onAbort = () => waiter.finish(undefined);
      const timer = setTimeout(() => waiter.finish(undefined), ms);
      signal.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.serveWaiters(poolId);
    });
  }

  /**
   * Hands idle browsers to the pool's waiters in arrival order. One pass per pool at a
   * time; a wake-up during a pass makes it go round once more.
   */
  serveWaiters(poolId: string): void {
    if (this.serving.has(poolId)) {
      this.serveAgain.add(poolId);
      return;
    }
    if (!this.waiters.get(poolId)?.length) return;
    this.serving.add(poolId);
    void (async () => {
      try {
        do {
          this.serveAgain.delete(poolId);
          for (;;) {
            const head = this.waiters.get(poolId)?.find((w) => !w.settled);
            if (!head) break;
            let row: SessionRow | undefined;
            try {
              row = await this.tryLease({ id: poolId }, head.lease);
            } catch (error) {
              head.fail(error);
              continue;
            }
            if (row === undefined) break;
            // The waiter gave up while its lease was being taken: the browser goes back.
            if (head.settled) await this.unlease({ orgId: row.org_id, projectId: head.projectId }, row);
            else head.finish(row);
          }
        } while (this.serveAgain.has(poolId));
      } catch (error) {
        this.deps.log.error({ err: error, poolId }, 'serving waiting acquirers failed; the next pass retries');
      } finally {
        this.serving.delete(poolId);
      }
    })();
  }

  /** Turns the pool's waiters away (the pool is gone). */
  failWaiters(poolId: string, error: AppError): void {
    for (const w of [...(this.waiters.get(poolId) ?? [])]) w.fail(error);
  }

  /** A lease nobody received (its client left): back to idle at once, untouched by any client. */
  private async unlease(scope: ProjectScope, row: SessionRow): Promise<void> {
    const pool = row.pool_id === null ? undefined : await findPool(this.deps.db, scope, row.pool_id);
    if (!pool) return; // the pool is gone with its browsers
    if (await returnToIdle(this.deps.db, row.id, pool, this.deps.clock.now())) await this.announceIdle(pool.id);
  }

  /** A browser of the pool became idle: this replica's waiters first, then every replica's (NOTIFY). */
  async announceIdle(poolId: string): Promise<void> {
    this.serveWaiters(poolId);
    await this.deps.events.publish(IDLE_CHANNEL, { pool_id: poolId }).catch((error: unknown) => this.deps.log.warn({ err: error, poolId }, 'announcing an idle pool browser failed'));
  }
}

/** The default wait of an acquire: how long the pool takes to fill at its rate (CONTRACT §3). */
function defaultWaitSeconds(pool: Pick<PoolRow, 'fill_rate_per_minute'>): number {
  return 6000 / pool.fill_rate_per_minute;
}
