import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { FOREIGN_KEY_VIOLATION, inTransaction, pgErrorCode, UNIQUE_VIOLATION, type Queryable } from '../../db/pool.js';
import { AppError, conflict, notFound, validationFailed } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { Actor, ProjectScope } from '../../scope.js';
import { DELETE_REASONS } from '../browsers/service.js';
import { lockOrgSessionCreates } from '../browsers/store.js';
import { countPoolBrowsers, endAllPoolBrowsers, endIdleBrowsers, type EndedBrowser } from './browsers-store.js';
import { DEFAULT_VIEWPORT } from '../browsers/schema.js';
import { applyTelemetry } from '../browsers/telemetry.js';
import { findProfile } from '../profiles/store.js';
import { getLimits, shareLockLiveProject } from '../projects/store.js';
import { findProxy } from '../proxies/store.js';
import { DEFAULT_FILL_RATE_PER_MINUTE, DEFAULT_POOL_TIMEOUT_SECONDS, type CreatePoolInput, type UpdatePoolInput } from './schema.js';
import type { PoolManager } from './manager.js';
import { resolvePoolExtensionIds, setPoolExtensions } from './pool-extensions.js';
import { findPool, insertPool, markPoolDeleted, markPoolDraining, pooledSize, updatePool, type PoolRow, type PoolSettings } from './store.js';

/**
 * What the pool use cases that change a pool take: the app's dependencies and its pool
 * manager, whose side effects (a fill pass, idle browsers discarded, waiters turned away,
 * other replicas told) are part of the use case, wherever it is called from.
 */
export type PoolServiceDeps = AppDeps & { pools: PoolManager };

/**
 * Browser pools, configuration side: create, read, change and delete a pool's browser
 * configuration and size, within the project's max_pooled_sessions and the organisation's
 * session cap (pooled browsers are browsers). The browsers themselves (warm fill, acquire,
 * release, flush) are the PoolManager's (manager.ts): a create, an update or a delete tells
 * it what changed, so the HTTP API and the operator's GitOps reconciler call the same use
 * cases with the same effects.
 */

type Deps = Pick<AppDeps, 'db' | 'clock' | 'settings'>;

/**
 * Who changes a pool besides the actor: nothing for the API; for the operator, the
 * BrowserPool resource (namespace/name) it acts for.
 */
export interface PoolWriter {
  kubernetesResource?: string | undefined;
}

/** The resource the actor acts for: only the operator acts for one. */
const resourceOf = (actor: Actor, writer: PoolWriter): string | undefined => (actor.kind === 'operator' ? writer.kubernetesResource : undefined);

/**
 * A pool a Kubernetes resource manages is changed through that resource only (the operator
 * acting for it): its GitOps tool would put its own configuration back, and the pool would
 * flap between the two, rebuilding its idle browsers each time.
 */
function refuseUnlessWriterManages(row: PoolRow, actor: Actor, writer: PoolWriter): void {
  if (row.kubernetes_resource === null || row.kubernetes_resource === resourceOf(actor, writer)) return;
  throw conflict(
    'pool_managed_by_kubernetes',
    `The pool is managed by the Kubernetes BrowserPool ${row.kubernetes_resource}; change or delete that resource instead (kubectl, or its GitOps repository)`,
    [{ code: 'kubernetes_resource', message: `BrowserPool ${row.kubernetes_resource}` }],
  );
}

function poolConflict(error: unknown, name: string | null): unknown {
  if (pgErrorCode(error) === FOREIGN_KEY_VIOLATION) return conflict('extension_deleted', 'An extension of the request was deleted while the pool was being saved; send the request again');
  if (pgErrorCode(error) !== UNIQUE_VIOLATION) return error;
  return conflict('pool_name_taken', `A browser pool named ${JSON.stringify(name)} already exists in this project`);
}

async function resolveProxyId(db: Queryable, scope: ProjectScope, id: string): Promise<string> {
  const proxy = await findProxy(db, scope.orgId, scope.projectId, id);
  if (!proxy) throw notFound('Proxy', id);
  return proxy.id;
}

async function resolveProfileId(db: Queryable, scope: ProjectScope, selector: { id: string } | { name: string }): Promise<string> {
  const key = 'id' in selector ? selector.id : selector.name;
  const profile = await findProfile(db, scope, key);
  if (!profile) throw notFound('Profile', key);
  return profile.id;
}

/**
 * The pools of the project may hold max_pooled_sessions browsers together (when set), and
 * those of the organisation no more than its session cap. Runs under the per-org lock that
 * session creates take, so concurrent creates and resizes cannot overshoot.
 */
async function enforceSizeCaps(deps: Deps, db: Queryable, scope: ProjectScope, size: number, exceptId: string | null): Promise<void> {
  await lockOrgSessionCreates(db, scope.orgId);
  const projectCap = (await getLimits(db, scope.projectId)).max_pooled_sessions;
  const others = await pooledSize(db, scope, exceptId);
  if (projectCap !== null && others + size > projectCap) {
    throw sizeLimit(`The project's pools may hold ${projectCap} browsers together; ${others} are taken by its other pools`, 'max_pooled_sessions', projectCap, others);
  }
  const orgOthers = await pooledSize(db, { orgId: scope.orgId, projectId: null }, exceptId);
  const orgCap = deps.settings.orgMaxConcurrentSessions;
  if (orgOthers + size > orgCap) {
    throw sizeLimit(`The organisation's pools may hold ${orgCap} browsers together; ${orgOthers} are taken by other pools`, 'org_max_concurrent_sessions', orgCap, orgOthers);
  }
}

function sizeLimit(message: string, code: string, cap: number, taken: number): AppError {
  return conflict('pool_size_limit_exceeded', `${message}; choose a smaller size or raise the limit`, [
    { code, field: 'body.size', message: `limit ${cap}, taken ${taken}` },
  ]);
}

async function lockProject(db: Queryable, scope: ProjectScope): Promise<void> {
  const project = await shareLockLiveProject(db, scope.orgId, scope.projectId);
  if (project?.id !== scope.projectId) throw new AppError(404, 'project_not_found', 'The project no longer exists');
}

/** The request's fields as sent, without undefined ones, for the echo. */
function sent(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}

/** POST: a new pool, which the fill starts warming at once (on every replica: see PoolManager.changed). */
export async function createPool(deps: PoolServiceDeps, scope: ProjectScope, actor: Actor, input: CreatePoolInput, writer: PoolWriter = {}): Promise<PoolRow> {
  const pool = await insertNewPool(deps, scope, actor, input, writer);
  await deps.pools.changed(pool.id);
  return pool;
}

async function insertNewPool(deps: Deps, scope: ProjectScope, actor: Actor, input: CreatePoolInput, writer: PoolWriter): Promise<PoolRow> {
  const name = input.name === undefined || input.name === '' ? null : input.name;
  try {
    return await inTransaction(deps.db, async (tx) => {
      await lockProject(tx, scope);
      const proxyId = input.proxy_id === undefined ? null : await resolveProxyId(tx, scope, input.proxy_id);
      const profileId = input.profile === undefined ? null : await resolveProfileId(tx, scope, input.profile);
      const extensionIds = await resolvePoolExtensionIds(tx, scope, input.extensions ?? []);
      const refresh = profileId !== null && (input.refresh_on_profile_update ?? true);
      const telemetry = applyTelemetry(null, input.telemetry);
      // Telemetry is echoed in its effective (response) form, and absent when nothing is captured.
      const config = sent({ ...input, name: name ?? undefined, telemetry: telemetry ?? undefined });
      if (profileId !== null) config.refresh_on_profile_update = refresh;
      const settings: PoolSettings = {
        size: input.size,
        fillRatePerMinute: input.fill_rate_per_minute ?? DEFAULT_FILL_RATE_PER_MINUTE,
        timeoutSeconds: input.timeout_seconds ?? DEFAULT_POOL_TIMEOUT_SECONDS,
        headless: input.headless ?? false,
        stealth: input.stealth ?? false,
        kioskMode: input.kiosk_mode ?? false,
        startUrl: input.start_url ?? null,
        proxyId,
        profileId,
        refreshOnProfileUpdate: refresh,
        viewport: { ...DEFAULT_VIEWPORT, ...input.viewport },
        chromePolicy: input.chrome_policy ?? {},
        telemetry,
        config,
      };
      await enforceSizeCaps(deps, tx, scope, settings.size, null);
      const id = newId('bpool');
      await insertPool(tx, scope, { id, name, settings, now: deps.clock.now(), kubernetesResource: resourceOf(actor, writer) });
      await setPoolExtensions(tx, id, extensionIds);
      return (await findPool(tx, scope, id))!;
    });
  } catch (error) {
    throw poolConflict(error, name);
  }
}

const settingsOf = (row: PoolRow): PoolSettings => ({
  size: row.size,
  fillRatePerMinute: row.fill_rate_per_minute,
  timeoutSeconds: row.timeout_seconds,
  headless: row.headless,
  stealth: row.stealth,
  kioskMode: row.kiosk_mode,
  startUrl: row.start_url,
  proxyId: row.proxy_id,
  profileId: row.profile_id,
  refreshOnProfileUpdate: row.refresh_on_profile_update,
  viewport: { width: row.viewport_width, height: row.viewport_height, refresh_rate: row.viewport_refresh_rate },
  chromePolicy: row.chrome_policy,
  telemetry: row.telemetry,
  config: { ...row.config },
});

/** Fields whose change means the pool's browsers are made differently (a new generation). */
const BROWSER_FIELDS = ['headless', 'stealth', 'kiosk_mode', 'start_url', 'proxy_id', 'profile', 'viewport', 'chrome_policy', 'telemetry', 'extensions'] as const;

/**
 * PATCH: each field sent replaces the stored one (CONTRACT §3). Special values: name ""
 * changes nothing; start_url "" and proxy_id "" clear; extensions [] clears; profile
 * {"id": ""} clears the profile and turns refresh_on_profile_update off; a new profile
 * without refresh_on_profile_update turns it on; telemetry null or {} changes nothing.
 */
export async function updatePoolSettings(
  deps: PoolServiceDeps,
  scope: ProjectScope,
  actor: Actor,
  idOrName: string,
  input: UpdatePoolInput,
  writer: PoolWriter = {},
): Promise<PoolRow> {
  const pool = await writeSettings(deps, scope, actor, idOrName, input, writer);
  await deps.pools.afterUpdate(pool, { discardAllIdle: input.discard_all_idle === true });
  return pool;
}

async function writeSettings(deps: Deps, scope: ProjectScope, actor: Actor, idOrName: string, input: UpdatePoolInput, writer: PoolWriter): Promise<PoolRow> {
  let name: string | null = null;
  try {
    return await inTransaction(deps.db, async (tx) => {
      const row = await findPool(tx, scope, idOrName, { lock: true });
      if (!row) throw notFound('Browser pool', idOrName);
      refuseUnlessWriterManages(row, actor, writer);
      name = input.name === undefined || input.name === '' ? row.name : input.name;
      const s = settingsOf(row);
      const config = s.config;
      const set = (key: string, value: unknown) => (value === undefined ? delete config[key] : (config[key] = value));

      if (input.size !== undefined) set('size', (s.size = input.size));
      if (input.fill_rate_per_minute !== undefined) set('fill_rate_per_minute', (s.fillRatePerMinute = input.fill_rate_per_minute));
      if (input.timeout_seconds !== undefined) set('timeout_seconds', (s.timeoutSeconds = input.timeout_seconds));
      if (input.headless !== undefined) set('headless', (s.headless = input.headless));
      if (input.stealth !== undefined) set('stealth', (s.stealth = input.stealth));
      if (input.kiosk_mode !== undefined) set('kiosk_mode', (s.kioskMode = input.kiosk_mode));
      if (input.viewport !== undefined) {
        s.viewport = { ...DEFAULT_VIEWPORT, ...input.viewport };
        set('viewport', input.viewport);
      }
      if (input.chrome_policy !== undefined) set('chrome_policy', (s.chromePolicy = input.chrome_policy));
      if (input.telemetry !== undefined && input.telemetry !== null && Object.keys(input.telemetry).length > 0) {
        s.telemetry = applyTelemetry(s.telemetry, input.telemetry);
        set('telemetry', s.telemetry ?? undefined);
      }
      const extensionIds = input.extensions === undefined ? undefined : await resolvePoolExtensionIds(tx, scope, input.extensions);
      if (input.extensions !== undefined) set('extensions', input.extensions.length > 0 ? input.extensions : undefined);
      if (input.start_url !== undefined) set('start_url', (s.startUrl = input.start_url === '' ? null : input.start_url) ?? undefined);
      if (input.proxy_id !== undefined) {
        s.proxyId = input.proxy_id === '' ? null : await resolveProxyId(tx, scope, input.proxy_id);
        set('proxy_id', input.proxy_id === '' ? undefined : input.proxy_id);
      }
      if (input.profile === null) {
        s.profileId = null;
        set('profile', undefined);
      } else if (input.profile !== undefined) {
        s.profileId = await resolveProfileId(tx, scope, input.profile);
        set('profile', input.profile);
      }
      if (s.profileId === null) {
        if (input.refresh_on_profile_update === true) {
          const field = 'body.refresh_on_profile_update';
          throw validationFailed([{ code: 'custom', field, message: `${field}: needs a profile` }]);
        }
        s.refreshOnProfileUpdate = false;
        set('refresh_on_profile_update', undefined);
      } else {
        // A new profile reference without the flag turns it on (CONTRACT §3).
        s.refreshOnProfileUpdate = input.refresh_on_profile_update ?? (input.profile !== undefined ? true : s.refreshOnProfileUpdate);
        set('refresh_on_profile_update', s.refreshOnProfileUpdate);
      }
      if (name !== null) set('name', name);

      if (input.size !== undefined) await enforceSizeCaps(deps, tx, scope, s.size, row.id);
      const browsersChanged = BROWSER_FIELDS.some((field) => input[field] !== undefined) || input.discard_all_idle === true;
      await updatePool(tx, row.id, { name, settings: s, browsersChanged, now: deps.clock.now() });
      if (extensionIds !== undefined) await setPoolExtensions(tx, row.id, extensionIds);
      return (await findPool(tx, scope, row.id))!;
    });
  } catch (error) {
    throw poolConflict(error, name);
  }
}

/**
 * DELETE: the pool and every browser of it go, in one transaction (so no acquire can lease
 * a browser of a deleted pool). Refused with 409 while a browser is leased unless force is
 * set. After the commit the browsers are closed (their CDP clients see the connection
 * close) and the pool's waiters turned away. Returns the ended browsers.
 */
export async function deletePool(
  deps: PoolServiceDeps,
  scope: ProjectScope,
  actor: Actor,
  idOrName: string,
  options: { force: boolean } & PoolWriter,
): Promise<{ poolId: string; ended: EndedBrowser[] }> {
  const deleted = await deletePoolRows(deps, scope, actor, idOrName, options);
  await deps.pools.poolDeleted(deleted.poolId, deleted.ended);
  return deleted;
}

async function deletePoolRows(deps: Deps, scope: ProjectScope, actor: Actor, idOrName: string, options: { force: boolean } & PoolWriter) {
  return inTransaction(deps.db, async (tx) => {
    const row = await findPool(tx, scope, idOrName, { lock: true });
    if (!row) throw notFound('Browser pool', idOrName);
    refuseUnlessWriterManages(row, actor, options);
    // Counted again under the pool's lock: a lease taken since the read above is seen here.
    const { leased } = await countPoolBrowsers(tx, row.id);
    if (leased > 0 && !options.force) {
      throw conflict('pool_has_leases', `The pool has ${leased} leased browsers; release them or delete with force`, [
        { code: 'leased_browsers', message: `${leased} leased` },
      ]);
    }
    const now = deps.clock.now();
    await markPoolDeleted(tx, row.id, now);
    // A deleted pool no longer holds its extensions: they may be deleted now.
    await setPoolExtensions(tx, row.id, []);
    return { poolId: row.id, ended: await endAllPoolBrowsers(tx, row.id, DELETE_REASONS.poolDeleted, now) };
  });
}

/**
 * One step of a managed pool's drain (its resource is being deleted): the pool stops
 * warming and leasing (see markPoolDraining), its idle browsers end, and the caller learns
 * how many are still leased. Repeated until none is: a browser that finished starting
 * since the last step is idle now and ends in this one.
 */
export async function drainPool(deps: Deps, scope: ProjectScope, actor: Actor, poolId: string, writer: PoolWriter): Promise<{ ended: EndedBrowser[]; leased: number }> {
  return inTransaction(deps.db, async (tx) => {
    const row = await findPool(tx, scope, poolId, { lock: true });
    if (!row) throw notFound('Browser pool', poolId);
    refuseUnlessWriterManages(row, actor, writer);
    const now = deps.clock.now();
    await markPoolDraining(tx, row.id, now);
    const ended = await endIdleBrowsers(tx, row.id, DELETE_REASONS.poolDeleted, now);
    const { leased } = await countPoolBrowsers(tx, row.id);
    return { ended, leased };
  });
}

/** Live pools keep their project from being deleted. */
export const countProjectPools: ProjectResourceCounter = async (db, projectId) => {
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM browser_pools WHERE project_id = $1 AND deleted_at IS NULL', [projectId]);
  return { kind: 'browser_pools', count: Number(rows[0]!.n) };
};
