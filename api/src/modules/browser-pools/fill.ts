import os from 'node:os';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { databaseUnavailable } from '../../db/unavailable.js';
import { AppError } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { BrowserLaunchSpec } from '../../../../contract/browser-runtime.js';
import type { CdpTokens } from '../browsers/cdp-token.js';
import { launchSpecOf } from '../browsers/launch-spec.js';
import { profileArchiveUrl } from '../browsers/profile-archive.js';
import { telemetrySpecOf } from '../browsers/telemetry-door.js';
import { DELETE_REASONS, launchAdmitted, resolveProxy, sessionRoom } from '../browsers/service.js';
import { findLiveSessionById, insertSession, lockOrgSessionCreates } from '../browsers/store.js';
import { countPoolBrowsers, endIdleBrowsers, type EndedBrowser } from './browsers-store.js';
import type { BrowserCloser } from './closer.js';
import type { PoolMetrics } from './metrics.js';
import { fillProgress, nextBackoff, planFill, type Backoff, type FillPlan, type FillRoom } from './fill-plan.js';
import { poolExtensionTargets } from './pool-extensions.js';
import { lockPoolForFill, setNextFillAt, type PoolRow } from './store.js';

/** Warm browsers are not started while the machine has less memory available than this (default of the setting). */
export const MIN_FREE_MEMORY_BYTES = 512 * 1024 * 1024;
/** Warm launches in flight at once, across pools (this machine's share of the work; default of the setting). */
export const defaultPoolLaunchConcurrency = (): number => Math.max(2, os.availableParallelism());

/** What the fill tells the rest of the manager. */
export interface FillEvents {
  /** A warm browser is ready in the pool. */
  warmed(poolId: string): Promise<void>;
}

/**
 * Carries out the fill's plans (fill-plan.ts): reads a pool and its browsers under the
 * pool's lock (SKIP LOCKED, so two replicas never fill the same pool at once), closes the
 * browsers a shrink discards, admits the browsers a plan launches and launches them after
 * the commit, within this machine's launch slots and memory. A pool whose launches fail
 * backs off.
 */
export class PoolFill {
  private readonly launches = new Set<Promise<void>>();
  /** Launches in flight per pool (the launches-in-flight gauge). */
  private readonly launching = new Map<string, number>();
  private readonly backoff = new Map<string, Backoff>();
  private readonly warned = new Map<string, string>();
  private readonly launchConcurrency: number;
  private readonly minFreeMemoryBytes: number;

  constructor(
    private readonly deps: AppDeps,
    private readonly tokens: CdpTokens,
    private readonly closer: BrowserCloser,
    private readonly metrics: PoolMetrics,
    private readonly events: FillEvents,
  ) {
    this.launchConcurrency = deps.settings.poolLaunchConcurrency ?? defaultPoolLaunchConcurrency();
    this.minFreeMemoryBytes = deps.settings.poolMinFreeMemoryBytes ?? MIN_FREE_MEMORY_BYTES;
  }

  /** The pool is gone: its failures are forgotten. */
  forget(poolId: string): void {
    this.backoff.delete(poolId);
  }

  /** Launches in flight per pool. */
  launchingByPool(): Map<string, number> {
    return new Map(this.launching);
  }

  /** The launches in flight, settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.launches]);
  }

  /** Brings one pool toward its size (one pass). */
  async fill(poolId: string): Promise<void> {
    const backoff = this.backoff.get(poolId);
    if (backoff && backoff.until > Date.now()) return;
    const toClose: EndedBrowser[] = [];
    const toLaunch: { row: { id: string }; spec: BrowserLaunchSpec }[] = [];
    let progress: string | undefined;
    await inTransaction(this.deps.db, async (tx) => {
      const pool = await lockPoolForFill(tx, poolId);
      if (!pool) return;
      const counts = await countPoolBrowsers(tx, poolId);
      const now = this.deps.clock.now();
      const room: FillRoom = {
        launchSlots: this.launchConcurrency - this.launches.size,
        memoryLow: os.freemem() < this.minFreeMemoryBytes,
        sessions: Number.POSITIVE_INFINITY,
      };
      let plan = planFill(pool, counts, room, now);
      if (plan.kind === 'launch') {
        // Read under the per-org lock session creates take, so the caps hold against them.
        await lockOrgSessionCreates(tx, pool.org_id);
        plan = planFill(pool, counts, { ...room, sessions: await sessionRoom(this.deps, tx, scopeOf(pool)) }, now);
      }
      if (plan.kind === 'shrink') toClose.push(...(await endIdleBrowsers(tx, poolId, DELETE_REASONS.poolShrunk, now, { limit: plan.discard })));
      else if (plan.kind === 'launch') {
        toLaunch.push(...(await this.admit(tx, pool, plan, now)));
        progress = fillProgress(pool, counts, plan, now);
      }
      this.report(poolId, plan);
    }).catch((error: unknown) => {
      // A pool that cannot make browsers (its proxy is gone, no internal URL for its
      // profile yet) backs off rather than failing every pass.
      if (error instanceof AppError) {
        this.metrics.launchFailed(poolId, error);
        return this.failed(poolId, error);
      }
      throw error;
    });
    if (toClose.length > 0) {
      this.deps.sessionEnds.ended(DELETE_REASONS.poolShrunk, toClose.length);
      this.deps.log.info({ poolId, browsers: toClose.length }, 'browser pool shrunk');
      this.closer.closeLater(toClose);
    }
    if (toLaunch.length > 0) this.deps.log.info({ poolId, browsers: toLaunch.length }, progress ?? 'warming pool browsers');
    for (const { row, spec } of toLaunch) {
      // Nothing awaits a warm launch: a failure past the launch itself (the database gone
      // as it finished) is logged here, or it would be an unhandled rejection that ends the process.
      const launch = this.warm(poolId, row, spec)
        .catch((error: unknown) => this.deps.log.error({ err: error, poolId, sessionId: row.id }, 'a warm pool browser could not be recorded; the reaper ends it'))
        .finally(() => this.launches.delete(launch));
      this.launches.add(launch);
    }
  }

  /** Inserts the plan's browsers (phase 'starting', counting toward the size at once) and moves the rate's clock. */
  private async admit(tx: Queryable, pool: PoolRow, plan: Extract<FillPlan, { kind: 'launch' }>, now: Date) {
    const scope = scopeOf(pool);
    const proxy = pool.proxy_id === null ? undefined : await resolveProxy(this.deps, tx, scope, pool.proxy_id);
    const admitted: { row: { id: string }; spec: BrowserLaunchSpec }[] = [];
    for (let i = 0; i < plan.launch; i++) {
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
      // The pool's telemetry is the browser's baseline from its start; a lease may change it (lease-telemetry.ts).
      const telemetry = await telemetrySpecOf(this.deps, this.tokens, id, pool.telemetry);
      const extensions = await poolExtensionTargets(this.deps, tx, pool, id);
      const spec = launchSpecOf(id, scope, pool, { proxy: proxy?.endpoint, archiveUrl, saveProfile: false, labels: { 'browserplane.dev/pool': pool.id }, telemetry, extensions });
      admitted.push({ row: { id }, spec });
    }
    await setNextFillAt(tx, pool.id, plan.nextFillAt);
    return admitted;
  }

  /** Logs a reason the pool cannot fill once, until it changes or the pool fills again. */
  private report(poolId: string, plan: FillPlan): void {
    if (plan.kind === 'full' || plan.kind === 'launch') this.warned.delete(poolId);
    if (plan.kind !== 'blocked' || this.warned.get(poolId) === plan.reason) return;
    this.warned.set(poolId, plan.reason);
    if (plan.reason === 'memory') {
      this.deps.log.warn({ poolId, reason: plan.reason, freeBytes: os.freemem() }, 'browser pool not filling: too little memory available on this machine');
    } else {
      this.deps.log.warn({ poolId, reason: plan.reason, missing: plan.missing }, 'browser pool not filling: the project or organisation is at its concurrent session cap');
    }
  }

  private async warm(poolId: string, row: { id: string }, spec: BrowserLaunchSpec): Promise<void> {
    const started = performance.now();
    this.metrics.launchStarted(poolId);
    this.launching.set(poolId, (this.launching.get(poolId) ?? 0) + 1);
    try {
      await launchAdmitted(this.deps, row, spec);
      this.metrics.launched(poolId, (performance.now() - started) / 1000);
    } catch (error) {
      this.metrics.launchFailed(poolId, error);
      // A database outage is not the pool's fault: backing off for it would keep the pool
      // empty for up to a minute after the database is back (the launch's row is left to the reaper).
      if (databaseUnavailable(error)) this.deps.log.warn({ err: error, poolId, sessionId: row.id }, 'a warm pool browser could not be recorded: the database is unavailable');
      else this.failed(poolId, error);
      return;
    } finally {
      const left = (this.launching.get(poolId) ?? 1) - 1;
      if (left > 0) this.launching.set(poolId, left);
      else this.launching.delete(poolId);
    }
    this.backoff.delete(poolId);
    const live = await findLiveSessionById(this.deps.db, row.id);
    if (!live) {
      // The pool was deleted or flushed while this browser started.
      await this.deps.runtime.terminate(row.id, { graceMs: 0 }).catch(() => undefined);
      return;
    }
    this.deps.log.debug({ poolId, sessionId: row.id, ms: Math.round(performance.now() - started) }, 'pool browser warm');
    await this.events.warmed(poolId);
  }

  private failed(poolId: string, error: unknown): void {
    const next = nextBackoff(this.backoff.get(poolId), Date.now());
    this.backoff.set(poolId, { until: next.until, failures: next.failures });
    this.deps.log.warn({ err: error, poolId, retryInMs: next.delayMs }, 'browser pool could not warm a browser');
  }
}

const scopeOf = (pool: PoolRow) => ({ orgId: pool.org_id, projectId: pool.project_id });
