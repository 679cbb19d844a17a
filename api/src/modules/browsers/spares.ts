import os from 'node:os';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { databaseUnavailable } from '../../db/unavailable.js';
import { newId } from '../../ids.js';
import type { BrowserLaunchSpec } from '../../../../contract/browser-runtime.js';
import { launchSpecOf } from './launch-spec.js';
import { DEFAULT_TIMEOUT_SECONDS, DEFAULT_VIEWPORT } from './schema.js';
import { DELETE_REASONS, launchAdmitted, sessionRoom, TERMINATE_GRACE_MS } from './service.js';
import { defaultProjects, demandOf, listSpares, recentDemand, retireSpares, tryLockSparePlanning, type Demand, type SpareRow, type Spares } from './spare-store.js';
import { insertSession, lockOrgSessionCreates } from './store.js';

/** How long a configuration stays wanted when the settings say nothing (config.ts's default). */
export const DEFAULT_SPARE_LEARN_MINUTES = 30;
/** The safety net behind the pokes: demand that aged out, a spare that crashed, memory that freed up. */
export const SPARE_PASS_INTERVAL_MS = 5_000;
const FIRST_BACKOFF_MS = 5_000;
const MAX_BACKOFF_MS = 300_000;

export interface SpareSettings {
  /** Spares this service keeps at most, across projects and configurations (0: none). */
  max: number;
  /** How long a configuration stays wanted after a project's last create with it. */
  learnMinutes: number;
  /** No spare is started below this much available memory. */
  minFreeMemoryBytes: number;
}

/**
 * Warm spares: browsers started ahead of POST /browsers, so a create whose launch settings
 * match one (spare-store.ts SpareConfig) is a claim in its admission transaction instead of
 * a launch. Which configurations get one is learned from the creates of the last
 * `learnMinutes` (newest first, one spare each, `max` in all); before anything is learned,
 * the default headless and headful configurations of the orgs' default projects.
 *
 * Spares are rows of browser_sessions with spare_key set, launched through the runtime
 * like any browser (local agents, or BrowserSession resources in Kubernetes), so a restart
 * adopts them and the reaper notices a crashed one. They do not count toward a project's
 * or org's concurrent-session cap, but a project only gets one while its caps leave room
 * for it, and a spare beyond that room (the project's own sessions took it) is closed: a
 * claim therefore never lets a project exceed its cap, and a spare never stops a create.
 *
 * One spare starts at a time per replica, and none while memory is short. A configuration
 * whose launch fails backs off (5 s doubling to 5 min).
 */
export class SpareKeeper implements Spares {
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private passAgain = false;
  private readonly launches = new Set<Promise<void>>();
  private readonly backoff = new Map<string, { until: number; delayMs: number }>();
  private stopped = false;

  constructor(
    private readonly deps: AppDeps,
    readonly settings: SpareSettings,
  ) {}

  get enabled(): boolean {
    return this.settings.max > 0 && !this.stopped;
  }

  /**
   * Plans now and every `intervalMs`. With spares turned off (max 0) it makes one pass
   * instead, which closes the spares an earlier configuration left (in Kubernetes mode,
   * their pods), and plans nothing after it.
   */
  start(options: { intervalMs?: number } = {}): void {
    if (this.timer || this.stopped) return;
    if (this.settings.max === 0) {
      this.passing ??= this.pass().catch((error: unknown) => this.deps.log.warn({ err: error }, 'closing the warm spares left from before failed'));
      return;
    }
    this.timer = setInterval(() => this.poke(), options.intervalMs ?? SPARE_PASS_INTERVAL_MS);
    this.timer.unref();
    this.poke();
  }

  /** Stops planning and waits for the launches in flight; the spares stay up for the next start to adopt. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.passing?.catch(() => undefined);
    await Promise.allSettled([...this.launches]);
  }

  /** Plans again soon: a create just took a spare, or taught a new configuration. */
  poke(): void {
    if (!this.enabled) return;
    if (this.passing) {
      this.passAgain = true;
      return;
    }
    this.passing = this.pass()
      .catch((error: unknown) => {
        if (databaseUnavailable(error)) this.deps.log.warn({ err: error }, 'planning warm spares failed: the database is unavailable');
        else this.deps.log.error({ err: error }, 'planning warm spares failed; the next pass retries');
      })
      .finally(() => {
        this.passing = undefined;
        if (this.passAgain && this.enabled) {
          this.passAgain = false;
          this.poke();
        }
      });
  }

  /** The launches in flight, settled (tests). */
  async settled(): Promise<void> {
    await this.passing?.catch(() => undefined);
    await Promise.allSettled([...this.launches]);
  }

  private async pass(): Promise<void> {
    const toLaunch: { demand: Demand; id: string; spec: BrowserLaunchSpec }[] = [];
    const toRetire: SpareRow[] = [];
    let retired: string[] = [];
    await inTransaction(this.deps.db, async (tx) => {
      if (!(await tryLockSparePlanning(tx))) return;
      const wanted = await this.wanted(tx);
      const live = await listSpares(tx);
      const wantedKeys = new Set(wanted.map(slotOf));
      // Kept: the oldest live spare of each wanted slot; every other one goes.
      const kept = new Map<string, SpareRow>();
      for (const spare of live) {
        const slot = `${spare.project_id}/${spare.spare_key}`;
        if (wantedKeys.has(slot) && !kept.has(slot)) kept.set(slot, spare);
        // One still starting is left to its launch: the next pass after it runs decides.
        else if (spare.phase === 'running') toRetire.push(spare);
      }
      // Within the room the caps leave: a project's spares beyond it are closed, and a
      // missing spare starts only where there is room for one more.
      const perOrg = new Map<string, number>();
      for (const demand of wanted) {
        const slot = slotOf(demand);
        const spare = kept.get(slot);
        const already = perOrg.get(demand.scope.orgId) ?? 0;
        const room = await this.roomFor(tx, demand);
        if (spare) {
          if (already < room) perOrg.set(demand.scope.orgId, already + 1);
          else if (spare.phase === 'running') toRetire.push(spare);
          continue;
        }
        if (already >= room || !this.mayLaunch(demand.key, toLaunch.length)) continue;
        perOrg.set(demand.scope.orgId, already + 1);
        const id = newId('bs');
        await insertSpare(tx, demand, id, this.deps.clock.now());
        const spec = launchSpecOf(id, demand.scope, makeOf(demand), { saveProfile: false, labels: { 'browserplane.dev/spare': 'true' } });
        toLaunch.push({ demand, id, spec });
      }
      retired = await retireSpares(tx, toRetire.map((spare) => spare.id), DELETE_REASONS.spareRetired, this.deps.clock.now());
    });
    for (const id of retired) {
      this.deps.log.info({ sessionId: id }, 'closing a warm spare nobody needs now');
      // The row has ended: a browser that outlives a failed close is the reaper's (no live row).
      await this.deps.runtime.terminate(id, { graceMs: TERMINATE_GRACE_MS }).catch((error: unknown) => this.deps.log.warn({ err: error, sessionId: id }, 'closing a warm spare failed'));
    }
    for (const launch of toLaunch) {
      const running = this.warm(launch.demand, launch.id, launch.spec).finally(() => {
        this.launches.delete(running);
        this.poke();
      });
      this.launches.add(running);
    }
  }

  /** The slots to keep a spare in: learned ones first, newest first; then the defaults; `max` in all. */
  private async wanted(db: Queryable): Promise<Demand[]> {
    const { max, learnMinutes } = this.settings;
    const now = this.deps.clock.now();
    const learned = await recentDemand(db, new Date(now.getTime() - learnMinutes * 60_000), max);
    const slots = new Map(learned.map((d) => [slotOf(d), d]));
    if (slots.size < max) {
      for (const scope of await defaultProjects(db, max)) {
        for (const headless of [true, false]) {
          const demand = demandOf(scope, { headless, stealth: false, kiosk_mode: false, chrome_policy: {} }, new Date(0));
          if (slots.size < max && !slots.has(slotOf(demand))) slots.set(slotOf(demand), demand);
        }
      }
    }
    return [...slots.values()];
  }

  private async roomFor(tx: Queryable, demand: Demand): Promise<number> {
    // The same lock creates take, so the room read here holds against them.
    await lockOrgSessionCreates(tx, demand.scope.orgId);
    return sessionRoom(this.deps, tx, demand.scope);
  }

  private mayLaunch(key: string, planned: number): boolean {
    if (this.launches.size + planned >= 1) return false;
    const backoff = this.backoff.get(key);
    if (backoff && backoff.until > Date.now()) return false;
    return os.freemem() >= this.settings.minFreeMemoryBytes;
  }

  private async warm(demand: Demand, id: string, spec: BrowserLaunchSpec): Promise<void> {
    const started = performance.now();
    try {
      await launchAdmitted(this.deps, { id }, spec);
    } catch (error) {
      if (!databaseUnavailable(error)) {
        const delayMs = Math.min((this.backoff.get(demand.key)?.delayMs ?? FIRST_BACKOFF_MS / 2) * 2, MAX_BACKOFF_MS);
        this.backoff.set(demand.key, { until: Date.now() + delayMs, delayMs });
      }
      this.deps.log.warn({ err: error, sessionId: id, projectId: demand.scope.projectId }, 'a warm spare could not be started');
      return;
    }
    this.backoff.delete(demand.key);
    this.deps.log.info({ sessionId: id, projectId: demand.scope.projectId, ms: Math.round(performance.now() - started) }, 'warm spare ready');
  }
}

const slotOf = (d: Pick<Demand, 'scope' | 'key'>): string => `${d.scope.projectId}/${d.key}`;

/** A spare is made as a create with these settings and nothing else would be: the session defaults. */
function makeOf(demand: Demand) {
  return {
    headless: demand.config.headless,
    stealth: demand.config.stealth,
    kiosk_mode: demand.config.kiosk_mode,
    chrome_policy: demand.config.chrome_policy,
    start_url: null,
    viewport_width: DEFAULT_VIEWPORT.width,
    viewport_height: DEFAULT_VIEWPORT.height,
    viewport_refresh_rate: DEFAULT_VIEWPORT.refresh_rate,
    profile_id: null,
  };
}

async function insertSpare(tx: Queryable, demand: Demand, id: string, now: Date): Promise<void> {
  const make = makeOf(demand);
  await insertSession(tx, demand.scope, {
    id,
    name: null,
    headless: make.headless,
    stealth: make.stealth,
    gpu: false,
    kioskMode: make.kiosk_mode,
    startUrl: null,
    timeoutSeconds: DEFAULT_TIMEOUT_SECONDS,
    proxyId: null,
    profileId: null,
    profileSaveChanges: false,
    viewport: { ...DEFAULT_VIEWPORT },
    chromePolicy: make.chrome_policy,
    tags: {},
    telemetry: null,
    invocationId: null,
    spareKey: demand.key,
    now,
  });
}
