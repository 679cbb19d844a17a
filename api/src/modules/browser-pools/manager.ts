import type { AppDeps } from '../../app-deps.js';
import { channelName } from '../../events/hub.js';
import { DELETE_REASONS } from '../browsers/service.js';
import { notFound } from '../../http/errors.js';
import type { ProjectScope } from '../../scope.js';
import { createCdpTokens } from '../browsers/cdp-token.js';
import type { SessionRow } from '../browsers/store.js';
import { isPoolLive, listLivePoolIds, type EndedBrowser } from './browsers-store.js';
import { BrowserCloser } from './closer.js';
import { PoolFill } from './fill.js';
import { IDLE_CHANNEL, LeaseQueue } from './lease-queue.js';
import { PoolMetrics } from './metrics.js';
import { discardIdle, flushPool, refreshProfilePools, releaseBrowser, type ReturnContext } from './release.js';
import type { Registry } from 'prom-client';
import type { AcquirePoolInput, ReleasePoolInput } from './schema.js';
import type { PoolRow } from './store.js';

export { defaultPoolLaunchConcurrency, MIN_FREE_MEMORY_BYTES } from './fill.js';

/** How often every pool is looked at (fill, shrink) and waiters re-try, as a safety net behind the wake-ups. */
export const POOL_RECONCILE_INTERVAL_MS = 1_000;

/**
 * One channel for every pool: "pool X was changed or deleted" (payload {pool_id}). Sent by
 * whichever process changed it (an API replica, or the operator for a BrowserPool
 * resource, which runs no fill), so every replica's fill looks at once.
 */
const CHANGED_CHANNEL = channelName('pools', 'changed');

/**
 * Warm browser pools at run time: keeps each pool at its size (the fill: fill-plan.ts
 * decides, fill.ts carries it out), leases idle browsers to acquirers and queues the ones
 * that must wait (lease-queue.ts), and takes browsers back (release.ts).
 *
 * Postgres is the authority for who holds which browser. What lives here is only what
 * makes it fast and fair: this replica's waiters, the fill's launches in flight, and
 * wake-ups (a browser became idle, a pool changed) sent in-process and across replicas
 * through NOTIFY, with a periodic pass as the safety net behind them.
 */
export class PoolManager {
  private readonly closer: BrowserCloser;
  private readonly queue: LeaseQueue;
  private readonly filler: PoolFill;
  private readonly returns: ReturnContext;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private tickAgain = false;
  private readonly unsubscribes: (() => Promise<void>)[] = [];
  private stopped = false;
  private readonly metrics = new PoolMetrics();

  constructor(private readonly deps: AppDeps) {
    this.closer = new BrowserCloser(deps);
    this.queue = new LeaseQueue(deps, this.metrics);
    this.filler = new PoolFill(deps, createCdpTokens(deps), this.closer, this.metrics, {
      warmed: async (poolId) => {
        await this.queue.announceIdle(poolId);
        // A slot is free again: the pool (or another) may start the next one without waiting for the pass.
        this.poke();
      },
    });
    this.returns = { deps, closer: this.closer, metrics: this.metrics, poke: () => this.poke(), announceIdle: (poolId) => this.queue.announceIdle(poolId) };
  }

  /** The pool metrics of this replica (metrics.ts), served at the app's /metrics. */
  registerMetrics(registry: Registry): void {
    this.metrics.registerMetrics(registry, { waiters: () => this.queue.waitersByPool(), launching: () => this.filler.launchingByPool() });
  }

  /** Starts the fill (a pass every `intervalMs`, and at every wake-up) and listens for other replicas' wake-ups. */
  async start(options: { intervalMs?: number } = {}): Promise<void> {
    if (this.timer || this.stopped) return;
    this.unsubscribes.push(
      await this.deps.events.subscribe(
        IDLE_CHANNEL,
        (payload) => {
          const poolId = (payload as { pool_id?: unknown } | null)?.pool_id;
          if (typeof poolId === 'string') this.queue.serveWaiters(poolId);
        },
        // Wake-ups sent while the listener was down are lost: every queue looks again.
        () => {
          for (const poolId of this.queue.poolIds()) this.queue.serveWaiters(poolId);
        },
      ),
    );
    this.unsubscribes.push(
      await this.deps.events.subscribe(
        CHANGED_CHANNEL,
        () => this.poke(),
        () => this.poke(),
      ),
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
    this.queue.close();
    await this.ticking;
    for (const unsubscribe of this.unsubscribes.splice(0)) await unsubscribe().catch(() => undefined);
    await Promise.allSettled([this.filler.settled(), this.closer.settled()]);
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
          await this.filler.fill(poolId).catch((error: unknown) => this.deps.log.error({ err: error, poolId }, 'filling a browser pool failed; the next pass retries'));
        }
      }
      for (const poolId of this.queue.poolIds()) {
        if (await isPoolLive(this.deps.db, poolId)) this.queue.serveWaiters(poolId);
        else this.queue.failWaiters(poolId, notFound('Browser pool', poolId));
      }
    } catch (error) {
      this.deps.log.error({ err: error }, 'the browser pool pass failed');
    }
  }

  /** Leases an idle browser of the pool, waiting for one as the acquire asks (lease-queue.ts); undefined: none came (204). */
  acquire(scope: ProjectScope, idOrName: string, input: AcquirePoolInput, signal: AbortSignal): Promise<SessionRow | undefined> {
    return this.queue.acquire(scope, idOrName, input, signal);
  }

  /** Takes a leased browser back: reset and idle again, or closed and replaced (release.ts). */
  release(scope: ProjectScope, idOrName: string, input: ReleasePoolInput): Promise<void> {
    return releaseBrowser(this.returns, scope, idOrName, input);
  }

  /** Closes the pool's idle browsers (leased and starting ones stay); the fill replaces them. */
  flush(scope: ProjectScope, idOrName: string): Promise<number> {
    return flushPool(this.returns, scope, idOrName);
  }

  /**
   * The pool was created or changed (the pool service tells): this replica's fill looks at
   * it now, and every other replica's on the NOTIFY. The operator, which runs no fill,
   * reaches the API replicas this way.
   */
  async changed(poolId: string): Promise<void> {
    this.poke();
    await this.deps.events.publish(CHANGED_CHANNEL, { pool_id: poolId }).catch((error: unknown) => this.deps.log.warn({ err: error, poolId }, 'announcing a pool change failed'));
  }

  /** After an update: discard_all_idle closes the idle browsers now; the fill does the rest (size, new configuration). */
  async afterUpdate(pool: PoolRow, options: { discardAllIdle: boolean }): Promise<void> {
    if (options.discardAllIdle) await discardIdle(this.returns, pool.id);
    await this.changed(pool.id);
  }

  /** The pool's profile was saved: pools that refresh on it rebuild their idle browsers. */
  profileSaved(profileId: string): Promise<void> {
    return refreshProfilePools(this.returns, profileId);
  }

  /** The pool was deleted (its browsers marked ended in the same transaction): close them and turn its waiters away. */
  async poolDeleted(poolId: string, ended: EndedBrowser[]): Promise<void> {
    this.queue.failWaiters(poolId, notFound('Browser pool', poolId));
    this.filler.forget(poolId);
    this.metrics.forget(poolId);
    this.deps.sessionEnds.ended(DELETE_REASONS.poolDeleted, ended.length);
    // Other replicas turn their waiters away at once rather than at their next pass.
    await this.changed(poolId);
    await this.closer.close(ended);
  }
}
