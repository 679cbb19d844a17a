import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { notFound } from '../../http/errors.js';
import type { ProjectScope } from '../../scope.js';
import { DELETE_REASONS, endSession } from '../browsers/service.js';
import { pushTelemetry, sameAgentCategories } from '../browsers/telemetry-door.js';
import { countPoolBrowsers, endIdleBrowsers, lockLease, returnToIdle, revokeLease, type LeasedBrowser, type PoolBrowserCounts } from './browsers-store.js';
import type { BrowserCloser } from './closer.js';
import type { PoolMetrics } from './metrics.js';
import { bumpProfileRefreshingPools, type PoolRow } from './store.js';
import { getPool } from './lookup.js';
import type { ReleasePoolInput } from './schema.js';

/** What taking browsers back needs from the manager. */
export interface ReturnContext {
  deps: AppDeps;
  closer: BrowserCloser;
  metrics: PoolMetrics;
  /** A pass over every pool soon: the fill replaces what was closed. */
  poke(): void;
  /** A browser of the pool is idle again: wake its waiters (here and on other replicas). */
  announceIdle(poolId: string): Promise<void>;
}

/**
 * Whether a released browser goes back to the pool: asked for, still made as the pool now
 * makes its browsers (generation, proxy, viewport, no profile written back), and the pool
 * not over its size.
 */
export function keepsReleased(pool: PoolRow, leased: LeasedBrowser, counts: PoolBrowserCounts, reuse: boolean | undefined): boolean {
  return (
    reuse !== false &&
    leased.pool_generation === pool.generation &&
    counts.total <= pool.size &&
    !leased.profile_save_changes &&
    leased.proxy_id === pool.proxy_id &&
    leased.viewport_width === pool.viewport_width &&
    leased.viewport_height === pool.viewport_height &&
    leased.viewport_refresh_rate === pool.viewport_refresh_rate
  );
}

/**
 * Takes a leased browser back. With reuse (the default) and a browser still made as the
 * pool now makes them, the holder's URLs are revoked, the browser is reset (clients cut
 * off, tabs and contexts closed, cookies back to the profile's) and it waits in the pool
 * again; otherwise, or when the reset fails, it is closed and the fill warms a new one.
 */
export async function releaseBrowser(ctx: ReturnContext, scope: ProjectScope, idOrName: string, input: ReleasePoolInput): Promise<void> {
  const { deps } = ctx;
  const pool = await getPool(deps.db, scope, idOrName);
  const { keep, leased } = await inTransaction(deps.db, async (tx) => {
    const leased = await lockLease(tx, pool.id, input.session_id);
    if (!leased) throw notFound('Leased browser session', input.session_id);
    const keep = keepsReleased(pool, leased, await countPoolBrowsers(tx, pool.id), input.reuse);
    if (keep) await revokeLease(tx, leased.id, deps.clock.now());
    return { keep, leased };
  });
  if (!keep) {
    await endSession(deps, leased, DELETE_REASONS.poolReleased);
    ctx.metrics.released(pool.id, 'closed');
    ctx.poke();
    return;
  }
  try {
    const report = await deps.runtime.reset(leased.id, { ...(pool.start_url !== null ? { startUrl: pool.start_url } : {}), signal: deps.shutdown });
    // The lease's categories were for that lease alone: the agent captures the pool's again.
    if (!sameAgentCategories(leased.telemetry, pool.telemetry)) await pushTelemetry(deps, leased.id, pool.telemetry);
    deps.log.info({ poolId: pool.id, sessionId: leased.id, ...report }, 'pool browser reset for reuse');
  } catch (error) {
    deps.log.warn({ err: error, poolId: pool.id, sessionId: leased.id }, 'resetting a released browser failed; replacing it');
    await endSession(deps, leased, DELETE_REASONS.poolResetFailed);
    ctx.metrics.released(pool.id, 'reset_failed');
    ctx.poke();
    return;
  }
  ctx.metrics.released(pool.id, 'reused');
  if (await returnToIdle(deps.db, leased.id, pool, deps.clock.now())) await ctx.announceIdle(pool.id);
}

/** Closes the pool's idle browsers (leased and starting ones stay); the fill replaces them. */
export async function flushPool(ctx: ReturnContext, scope: ProjectScope, idOrName: string): Promise<number> {
  const { deps } = ctx;
  const pool = await getPool(deps.db, scope, idOrName);
  const ended = await endIdleBrowsers(deps.db, pool.id, DELETE_REASONS.poolFlushed, deps.clock.now());
  deps.sessionEnds.ended(DELETE_REASONS.poolFlushed, ended.length);
  deps.log.info({ poolId: pool.id, browsers: ended.length }, 'browser pool flushed');
  ctx.closer.closeLater(ended);
  ctx.poke();
  return ended.length;
}

/** discard_all_idle of a PATCH: the idle browsers close now, and the fill warms them anew. */
export async function discardIdle(ctx: ReturnContext, poolId: string): Promise<void> {
  const { deps } = ctx;
  const ended = await endIdleBrowsers(deps.db, poolId, DELETE_REASONS.poolRefreshed, deps.clock.now());
  deps.sessionEnds.ended(DELETE_REASONS.poolRefreshed, ended.length);
  ctx.closer.closeLater(ended);
}

/** The profile was saved: pools that refresh on it rebuild their idle browsers (those of older generations). */
export async function refreshProfilePools(ctx: ReturnContext, profileId: string): Promise<void> {
  const { deps } = ctx;
  const pools = await bumpProfileRefreshingPools(deps.db, profileId, deps.clock.now());
  for (const pool of pools) {
    const ended = await endIdleBrowsers(deps.db, pool.id, DELETE_REASONS.poolRefreshed, deps.clock.now(), { olderThanGeneration: pool.generation });
    deps.sessionEnds.ended(DELETE_REASONS.poolRefreshed, ended.length);
    deps.log.info({ poolId: pool.id, profileId, browsers: ended.length }, 'profile saved: rebuilding the pool’s idle browsers');
    ctx.closer.closeLater(ended);
  }
  if (pools.length > 0) ctx.poke();
}
