import os from 'node:os';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { channelName } from '../../events/hub.js';
import { AppError, conflict, notFound } from '../../http/errors.js';
import { foldName, newId } from '../../ids.js';
import type { BrowserLaunchSpec } from '../../../../contract/browser-runtime.js';
import { createCdpTokens } from '../browsers/cdp-token.js';
import { profileArchiveUrl } from '../browsers/profile-archive.js';
import { DELETE_REASONS, endSession, launchAdmitted, resolveProxy, sessionConflict, sessionRoom, terminateGraceMs } from '../browsers/service.js';
import { findLiveSessionById, findSession, insertSession, lockOrgSessionCreates, type SessionRow } from '../browsers/store.js';
import { applyTelemetry, type TelemetryConfig } from '../browsers/telemetry.js';
import {
  countPoolBrowsers,
  endIdleBrowsers,
  isPoolLive,
  leaseIdleBrowser,
  listLivePoolIds,
  lockLease,
  returnToIdle,
  revokeLease,
  type EndedBrowser,
  type Lease,
  type PoolRef,
} from './browsers-store.js';
import { MAX_ACQUIRE_WAIT_SECONDS, type AcquirePoolInput, type ReleasePoolInput } from './schema.js';
import { getPool } from './service.js';
import { findPool, lockPoolForFill, setNextFillAt, type PoolRow, type PoolScope } from './store.js';
import { databaseUnavailable } from '../../db/unavailable.js';

/** How often every pool is looked at (fill, shrink) and waiters re-try, as a safety net behind the wake-ups. */
export const POOL_RECONCILE_INTERVAL_MS = 1_000;
/**
 * The fill rate allows this much of a burst: a pool that was full for a while may start
 * up to this many milliseconds' worth of browsers at once (and always at least one).
 */
const FILL_BURST_MS = 5_000;
/** A pool whose launches fail waits this long before it tries again, doubling to MAX. */
const FAILURE_BACKOFF_MS = 1_000;
const MAX_FAILURE_BACKOFF_MS = 60_000;
/** Warm browsers are not started while the machine has less memory available than this (default of the setting). */
export const MIN_FREE_MEMORY_BYTES = 512 * 1024 * 1024;
/** Warm launches in flight at once, across pools (this machine's share of the work; default of the setting). */
export const defaultPoolLaunchConcurrency = (): number => Math.max(2, os.availableParallelism());

/** One channel for every pool: "a browser of pool X became idle" (payload {pool_id}). */
const IDLE_CHANNEL = channelName('pools', 'idle');

interface PoolDefaults {
  startUrl: string | null;
  telemetry: TelemetryConfig | null;
  timeoutSeconds: number;
}

interface Waiter {
  poolId: string;
  projectId: string;
  lease: Lease;
  settled: boolean;
  finish(row: SessionRow | undefined): void;
  fail(error: unknown): void;
}

const defaultsOf = (pool: PoolRow): PoolDefaults => ({
  startUrl: pool.start_url,
  telemetry: pool.telemetry,
  timeoutSeconds: pool.timeout_seconds,
});

/**
 * Warm browser pools at run time: keeps each pool at its size (the fill), leases idle
 * browsers to acquirers and queues the ones that must wait, and takes browsers back.
 *
 * Postgres is the authority for who holds which browser: a lease is one UPDATE of the
 * browser's row (leaseIdleBrowser), so no browser is leased twice whichever replica or
 * request asks. What lives here is only what makes it fast and fair: the waiters of this
 * replica in arrival order (served first come, first served by one drain per pool), the
 * fill's launches in flight, and wake-ups (a browser became idle) sent in-process and
 * across replicas through NOTIFY, with a periodic pass as the safety net behind them.
 * Across replicas, waiting acquirers compete only through their replica's oldest waiter.
 */
export class PoolManager {
  private readonly waiters = new Map<string, Waiter[]>();
  /** Waiters per project: while any wait, the project's acquires queue instead of taking the fast path. */
  private readonly waitingIn = new Map<string, number>();
  private readonly draining = new Set<string>();
  private readonly redrain = new Set<string>();
  private readonly launches = new Set<Promise<void>>();
  private readonly closing = new Set<Promise<void>>();
  private readonly backoff = new Map<string, { until: number; failures: number }>();
  private readonly tokens;
  private readonly launchConcurrency: number;
  private readonly minFreeMemoryBytes: number;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private tickAgain = false;
  private unsubscribe: (() => Promise<void>) | undefined;
  private stopped = false;
  private readonly warned = new Map<string, string>();

  constructor(private readonly deps: AppDeps) {
    this.tokens = createCdpTokens(deps);
    this.launchConcurrency = deps.settings.poolLaunchConcurrency ?? defaultPoolLaunchConcurrency();
    this.minFreeMemoryBytes = deps.settings.poolMinFreeMemoryBytes ?? MIN_FREE_MEMORY_BYTES;
  }

  /** Starts the fill (a pass every `intervalMs`, and at every wake-up) and listens for other replicas' wake-ups. */
  async start(options: { intervalMs?: number } = {}): Promise<void> {
    if (this.timer || this.stopped) return;
    this.unsubscribe = await this.deps.events.subscribe(
      IDLE_CHANNEL,
      (payload) => {
        const poolId = (payload as { pool_id?: unknown } | null)?.pool_id;
        if (typeof poolId === 'string') this.drain(poolId);
      },
      // Wake-ups sent while the listener was down are lost: every queue looks again.
      () => {
        for (const poolId of this.waiters.keys()) this.drain(poolId);
      },
    );
    this.timer = setInterval(() => this.poke(), options.intervalMs ?? POOL_RECONCILE_INTERVAL_MS);
    this.timer.unref();
    this.poke();
  }

  /** Stops filling, answers every waiter with "no browser" (204: the SDK's caller retries elsewhere), and waits for launches in flight. */
  async stop(): Promise<void> {
    // Synchronously, before the first await: a shutting-down service drains its requests
    // right after calling this, and a waiting acquire must not hold the drain up.
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const queue of this.waiters.values()) for (const w of [...queue]) w.finish(undefined);
    await this.ticking;
    await this.unsubscribe?.().catch(() => undefined);
    await Promise.allSettled([...this.launches, ...this.closing]);
  }

  /** A pass over every pool soon (now, or right after the one running). */
  poke(): void {
    // Only a started manager fills (the service starts it; a test app only when asked).
    if (this.timer === undefined || this.stopped) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.ticking = (async () => {
      do {
        this.tickAgain = false;
        await this.tick();
      } while (this.tickAgain && !this.stopped);
    })().finally(() => (this.ticking = undefined));
  }

  /** One pass: fill or shrink every live pool, and let waiting acquirers try again. */
  async tick(): Promise<void> {
    try {
      if (!this.stopped) {
        for (const poolId of await listLivePoolIds(this.deps.db)) {
          await this.fill(poolId).catch((error: unknown) => this.deps.log.error({ err: error, poolId }, 'filling a browser pool failed; the next pass retries'));
        }
      }
      for (const poolId of [...this.waiters.keys()]) {
        if (await isPoolLive(this.deps.db, poolId)) this.drain(poolId);
        else this.failWaiters(poolId, notFound('Browser pool', poolId));
      }
    } catch (error) {
      this.deps.log.error({ err: error }, 'the browser pool pass failed');
    }
  }

  // ---- acquire -------------------------------------------------------------------------

  /**
   * Leases an idle browser of the pool, waiting (first come, first served) up to
   * min(acquire_timeout_seconds, 55 s) for one; undefined when none came (204). `signal`
   * is the client going away: a browser leased for a client that left goes back.
   *
   * The fast path (a browser is idle, nobody of the project waits here) is one statement
   * after authentication; the pool is read only when the lease needs it (telemetry) or
   * there is nothing to lease.
   */
  async acquire(scope: PoolScope, idOrName: string, input: AcquirePoolInput, signal: AbortSignal): Promise<SessionRow | undefined> {
    const name = input.name === undefined || input.name === '' ? null : input.name;
    if (name !== null) {
      // Checked before waiting as well, so a taken name fails now rather than when a browser frees.
      const holder = await findSession(this.deps.db, scope, name);
      if (holder?.name !== undefined && holder.name !== null && foldName(holder.name) === foldName(name)) {
        throw conflict('browser_name_taken', `An active browser session named ${JSON.stringify(name)} already exists in this project`);
      }
    }
    const lease: Lease = { name, tags: input.tags ?? {}, startUrl: input.start_url ?? null };
    let pool: PoolRow | undefined;
    if (input.telemetry !== undefined && input.telemetry !== null && Object.keys(input.telemetry).length > 0) {
      pool = await getPool(this.deps.db, scope, idOrName);
      lease.telemetry = applyTelemetry(pool.telemetry, input.telemetry);
    }

    // A newcomer must not overtake those already waiting here.
    let row = this.waitingIn.has(scope.projectId) ? undefined : await this.tryLease({ scope, idOrName }, lease);
    if (row === undefined) {
      pool ??= await getPool(this.deps.db, scope, idOrName);
      const waitSeconds = Math.min(input.acquire_timeout_seconds ?? defaultWaitSeconds(pool), MAX_ACQUIRE_WAIT_SECONDS);
      if (waitSeconds > 0 && !this.stopped) row = await this.wait(scope.projectId, pool.id, lease, waitSeconds * 1000, signal);
      else if (!this.waiters.get(pool.id)?.length) row = await this.tryLease({ id: pool.id }, lease);
    }
    if (row === undefined) return undefined;
    if (signal.aborted) {
      await this.unlease(scope, row);
      return undefined;
    }
    if (lease.startUrl !== null) {
      // Best effort (CONTRACT §3): the lease's page replaces the warm one before the client connects.
      await this.deps.runtime
        .reset(row.id, { startUrl: lease.startUrl, signal: this.deps.shutdown })
        .catch((error: unknown) => this.deps.log.warn({ err: error, sessionId: row.id }, 'opening the lease start_url failed; the browser keeps its page'));
    }
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

  private async tryLease(ref: PoolRef, lease: Lease): Promise<SessionRow | undefined> {
    try {
      return await leaseIdleBrowser(this.deps.db, ref, lease, this.deps.clock.now());
    } catch (error) {
      throw sessionConflict(error, lease.name);
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
      this.drain(poolId);
    });
  }

  /**
   * Hands idle browsers to the pool's waiters in arrival order. One drain per pool at a
   * time; a wake-up during a drain makes it go round once more.
   */
  private drain(poolId: string): void {
    if (this.draining.has(poolId)) {
      this.redrain.add(poolId);
      return;
    }
    if (!this.waiters.get(poolId)?.length) return;
    this.draining.add(poolId);
    void (async () => {
      try {
        do {
          this.redrain.delete(poolId);
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
        } while (this.redrain.has(poolId));
      } catch (error) {
        this.deps.log.error({ err: error, poolId }, 'serving waiting acquirers failed; the next pass retries');
      } finally {
        this.draining.delete(poolId);
      }
    })();
  }

  private failWaiters(poolId: string, error: AppError): void {
    for (const w of [...(this.waiters.get(poolId) ?? [])]) w.fail(error);
  }

  /** A lease nobody received (its client left): back to idle at once, untouched by any client. */
  private async unlease(scope: PoolScope, row: SessionRow): Promise<void> {
    const pool = row.pool_id === null ? undefined : await findPool(this.deps.db, scope, row.pool_id);
    if (!pool) return; // the pool is gone with its browsers
    if (await returnToIdle(this.deps.db, row.id, defaultsOf(pool), this.deps.clock.now())) await this.announceIdle(pool.id);
  }

  private async announceIdle(poolId: string): Promise<void> {
    this.drain(poolId);
    await this.deps.events.publish(IDLE_CHANNEL, { pool_id: poolId }).catch((error: unknown) => this.deps.log.warn({ err: error, poolId }, 'announcing an idle pool browser failed'));
  }

  // ---- release, flush, delete ------------------------------------------------------------

  /**
   * Takes a leased browser back. With reuse (the default) and a browser still made as the
   * pool now makes them, the holder's URLs are revoked, the browser is reset (clients cut
   * off, tabs and contexts closed, cookies back to the profile's) and it waits in the pool
   * again; otherwise, or when the reset fails, it is closed and the fill warms a new one.
   */
  async release(scope: PoolScope, idOrName: string, input: ReleasePoolInput): Promise<void> {
    const pool = await getPool(this.deps.db, scope, idOrName);
    const { keep, leased } = await inTransaction(this.deps.db, async (tx) => {
      const leased = await lockLease(tx, pool.id, input.session_id);
      if (!leased) throw notFound('Leased browser session', input.session_id);
      const counts = await countPoolBrowsers(tx, pool.id);
      const keep =
        input.reuse !== false &&
        leased.pool_generation === pool.generation &&
        counts.total <= pool.size &&
        !leased.profile_save_changes &&
        leased.proxy_id === pool.proxy_id &&
        leased.viewport_width === pool.viewport_width &&
        leased.viewport_height === pool.viewport_height &&
        leased.viewport_refresh_rate === pool.viewport_refresh_rate;
      if (keep) await revokeLease(tx, leased.id, this.deps.clock.now());
      return { keep, leased };
    });
    if (!keep) {
      await endSession(this.deps, leased, DELETE_REASONS.poolReleased);
      this.poke();
      return;
    }
    try {
      const report = await this.deps.runtime.reset(leased.id, { ...(pool.start_url !== null ? { startUrl: pool.start_url } : {}), signal: this.deps.shutdown });
      this.deps.log.info({ poolId: pool.id, sessionId: leased.id, ...report }, 'pool browser reset for reuse');
    } catch (error) {
      this.deps.log.warn({ err: error, poolId: pool.id, sessionId: leased.id }, 'resetting a released browser failed; replacing it');
      await endSession(this.deps, leased, DELETE_REASONS.poolResetFailed);
      this.poke();
      return;
    }
    if (await returnToIdle(this.deps.db, leased.id, defaultsOf(pool), this.deps.clock.now())) await this.announceIdle(pool.id);
  }

  /** Closes the pool's idle browsers (leased and starting ones stay); the fill replaces them. */
  async flush(scope: PoolScope, idOrName: string): Promise<number> {
    const pool = await getPool(this.deps.db, scope, idOrName);
    const ended = await endIdleBrowsers(this.deps.db, pool.id, DELETE_REASONS.poolFlushed, this.deps.clock.now());
    this.deps.log.info({ poolId: pool.id, browsers: ended.length }, 'browser pool flushed');
    this.closeLater(ended);
    this.poke();
    return ended.length;
  }

  /** After a PATCH: discard_all_idle closes the idle browsers now; the fill does the rest (size, new configuration). */
  async afterUpdate(pool: PoolRow, options: { discardAllIdle: boolean }): Promise<void> {
    if (options.discardAllIdle) {
      this.closeLater(await endIdleBrowsers(this.deps.db, pool.id, DELETE_REASONS.poolRefreshed, this.deps.clock.now()));
    }
    this.poke();
  }

  /** The pool's profile was saved: pools that refresh on it rebuild their idle browsers. */
  async profileSaved(profileId: string): Promise<void> {
    const { rows } = await this.deps.db.query<{ id: string; generation: number }>(
      `UPDATE browser_pools SET generation = generation + 1, updated_at = $2
        WHERE profile_id = $1 AND refresh_on_profile_update AND deleted_at IS NULL RETURNING id, generation`,
      [profileId, this.deps.clock.now()],
    );
    for (const pool of rows) {
      const ended = await endIdleBrowsers(this.deps.db, pool.id, DELETE_REASONS.poolRefreshed, this.deps.clock.now(), { olderThanGeneration: pool.generation });
      this.deps.log.info({ poolId: pool.id, profileId, browsers: ended.length }, 'profile saved: rebuilding the pool’s idle browsers');
      this.closeLater(ended);
    }
    if (rows.length > 0) this.poke();
  }

  /** The pool was deleted (its browsers marked ended in the same transaction): close them and turn its waiters away. */
  async poolDeleted(poolId: string, ended: EndedBrowser[]): Promise<void> {
    this.failWaiters(poolId, notFound('Browser pool', poolId));
    this.backoff.delete(poolId);
    await this.close(ended);
  }

  /**
   * Closes browsers whose rows are already marked ended, without holding up the caller:
   * the rows already say they are gone (no acquire can take them), and a graceful close
   * takes a while. stop() waits for these.
   */
  private closeLater(ended: EndedBrowser[]): void {
    if (ended.length === 0) return;
    const closing = this.close(ended).finally(() => this.closing.delete(closing));
    this.closing.add(closing);
  }

  /** Closes browsers whose rows are already marked ended; a failure is logged (the browser has no session any more). */
  private async close(ended: EndedBrowser[]): Promise<void> {
    await Promise.all(
      ended.map((b) =>
        this.deps.runtime
          .terminate(b.id, { graceMs: terminateGraceMs(b) })
          .catch((error: unknown) => this.deps.log.error({ err: error, sessionId: b.id }, 'closing a pool browser failed')),
      ),
    );
  }

  // ---- fill ----------------------------------------------------------------------------

  /**
   * Brings one pool toward its size: closes idle browsers beyond it, or admits new ones
   * (rows in phase 'starting', which count toward the size at once) at the fill rate,
   * within the project's and org's session caps and this machine's launch slots and
   * memory, then launches them after the commit. The pool row is locked with SKIP
   * LOCKED, so two replicas never fill the same pool at once, and the rate's clock
   * (next_fill_at) lives in it, so the rate holds across replicas.
   */
  private async fill(poolId: string): Promise<void> {
    const backoff = this.backoff.get(poolId);
    if (backoff && backoff.until > Date.now()) return;
    const toClose: EndedBrowser[] = [];
    const toLaunch: { row: { id: string }; spec: BrowserLaunchSpec }[] = [];
    await inTransaction(this.deps.db, async (tx) => {
      const pool = await lockPoolForFill(tx, poolId);
      if (!pool) return;
      const counts = await countPoolBrowsers(tx, poolId);
      const now = this.deps.clock.now();
      if (counts.total > pool.size) {
        toClose.push(...(await endIdleBrowsers(tx, poolId, DELETE_REASONS.poolShrunk, now, { limit: counts.total - pool.size })));
        return;
      }
      const deficit = pool.size - counts.total;
      if (deficit === 0) return this.clearWarning(poolId);
      const intervalMs = 60_000 / ((pool.size * pool.fill_rate_per_minute) / 100);
      const since = Math.max(pool.next_fill_at?.getTime() ?? 0, now.getTime() - Math.max(intervalMs, FILL_BURST_MS));
      const allowed = Math.floor((now.getTime() - since) / intervalMs);
      let n = Math.min(deficit, allowed, this.launchConcurrency - this.launches.size);
      if (n <= 0) return;
      if (os.freemem() < this.minFreeMemoryBytes) {
        return this.warnOnce(poolId, 'memory', { freeBytes: os.freemem() }, 'browser pool not filling: too little memory available on this machine');
      }
      const scope = { orgId: pool.org_id, projectId: pool.project_id };
      await lockOrgSessionCreates(tx, pool.org_id);
      const room = await sessionRoom(this.deps, tx, scope);
      n = Math.min(n, room);
      if (n <= 0) {
        return this.warnOnce(poolId, 'caps', { missing: deficit }, 'browser pool not filling: the project or organisation is at its concurrent session cap');
      }
      const proxy = pool.proxy_id === null ? undefined : await resolveProxy(this.deps, tx, scope, pool.proxy_id);
      for (let i = 0; i < n; i++) {
        const id = newId('bs');
        const archiveUrl = pool.profile_id === null ? undefined : await profileArchiveUrl(this.deps, this.tokens, id);
        await insertSession(tx, scope, {
          id,
          name: null,
          headless: pool.headless,
          stealth: pool.stealth,
          gpu: false,
          kioskMode: pool.kiosk_mode,
          startUrl: pool.start_url,
          timeoutSeconds: pool.timeout_seconds,
          proxyId: pool.proxy_id,
          profileId: pool.profile_id,
          profileSaveChanges: false,
          viewport: { width: pool.viewport_width, height: pool.viewport_height, refresh_rate: pool.viewport_refresh_rate },
          chromePolicy: pool.chrome_policy,
          tags: {},
          telemetry: pool.telemetry,
          invocationId: null,
          pool: { id: pool.id, generation: pool.generation },
          now,
        });
        toLaunch.push({
          row: { id },
          spec: {
            browserId: id,
            orgId: pool.org_id,
            projectId: pool.project_id,
            headless: pool.headless,
            stealth: pool.stealth,
            kioskMode: pool.kiosk_mode,
            viewport: { width: pool.viewport_width, height: pool.viewport_height, refreshRate: pool.viewport_refresh_rate },
            ...(pool.start_url !== null ? { startUrl: pool.start_url } : {}),
            ...(proxy ? { proxy: proxy.endpoint } : {}),
            ...(pool.profile_id !== null && archiveUrl ? { profile: { id: pool.profile_id, archiveUrl, saveChanges: false } } : {}),
            chromePolicy: pool.chrome_policy,
            labels: { 'browserplane.dev/pool': pool.id },
          },
        });
      }
      await setNextFillAt(tx, poolId, new Date(since + n * intervalMs));
      this.clearWarning(poolId);
    }).catch((error: unknown) => {
      // A pool that cannot make browsers (its proxy is gone, no internal URL for its
      // profile yet) backs off rather than failing every pass.
      if (error instanceof AppError) return this.failed(poolId, error);
      throw error;
    });
    if (toClose.length > 0) {
      this.deps.log.info({ poolId, browsers: toClose.length }, 'browser pool shrunk');
      this.closeLater(toClose);
    }
    if (toLaunch.length > 0) this.deps.log.info({ poolId, browsers: toLaunch.length }, 'warming pool browsers');
    for (const { row, spec } of toLaunch) {
      // Nothing awaits a warm launch: a failure past the launch itself (the database gone
      // as it finished) is logged here, or it would be an unhandled rejection that ends the process.
      const launch = this.warm(poolId, row, spec)
        .catch((error: unknown) => this.deps.log.error({ err: error, poolId, sessionId: row.id }, 'a warm pool browser could not be recorded; the reaper ends it'))
        .finally(() => this.launches.delete(launch));
      this.launches.add(launch);
    }
  }

  private async warm(poolId: string, row: { id: string }, spec: BrowserLaunchSpec): Promise<void> {
    const started = performance.now();
    try {
      await launchAdmitted(this.deps, row, spec);
    } catch (error) {
      // A database outage is not the pool's fault: backing off for it would keep the pool
      // empty for up to a minute after the database is back (the launch's row is left to the reaper).
      if (databaseUnavailable(error)) this.deps.log.warn({ err: error, poolId, sessionId: row.id }, 'a warm pool browser could not be recorded: the database is unavailable');
      else this.failed(poolId, error);
      return;
    }
    this.backoff.delete(poolId);
    const live = await findLiveSessionById(this.deps.db, row.id);
    if (!live) {
      // The pool was deleted or flushed while this browser started.
      await this.deps.runtime.terminate(row.id, { graceMs: 0 }).catch(() => undefined);
      return;
    }
    this.deps.log.info({ poolId, sessionId: row.id, ms: Math.round(performance.now() - started) }, 'pool browser warm');
    await this.announceIdle(poolId);
    // A slot is free again: the pool (or another) may start the next one without waiting for the pass.
    this.poke();
  }

  private failed(poolId: string, error: unknown): void {
    const previous = this.backoff.get(poolId)?.failures ?? 0;
    const delay = Math.min(FAILURE_BACKOFF_MS * 2 ** previous, MAX_FAILURE_BACKOFF_MS);
    this.backoff.set(poolId, { until: Date.now() + delay, failures: previous + 1 });
    this.deps.log.warn({ err: error, poolId, retryInMs: delay }, 'browser pool could not warm a browser');
  }

  /** Logs a reason the pool cannot fill once, until it changes or the pool fills again. */
  private warnOnce(poolId: string, reason: string, fields: Record<string, unknown>, message: string): void {
    if (this.warned.get(poolId) === reason) return;
    this.warned.set(poolId, reason);
    this.deps.log.warn({ poolId, reason, ...fields }, message);
  }

  private clearWarning(poolId: string): void {
    this.warned.delete(poolId);
  }
}

/** The default wait of an acquire: how long the pool takes to fill at its rate (CONTRACT §3). */
function defaultWaitSeconds(pool: Pick<PoolRow, 'fill_rate_per_minute'>): number {
  return 6000 / pool.fill_rate_per_minute;
}

const managers = new WeakMap<AppDeps, PoolManager>();

/** The app's one PoolManager (routes and the composition root share it). */
export function poolManager(deps: AppDeps): PoolManager {
  let manager = managers.get(deps);
  if (!manager) {
    manager = new PoolManager(deps);
    managers.set(deps, manager);
  }
  return manager;
}
