import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';
import type { TelemetryConfig } from '../browsers/telemetry.js';

export interface PoolScope {
  orgId: string;
  projectId: string;
}

/** The browser configuration of a pool: what each browser it warms is made with. */
export interface PoolSettings {
  size: number;
  fillRatePerMinute: number;
  timeoutSeconds: number;
  headless: boolean;
  stealth: boolean;
  kioskMode: boolean;
  startUrl: string | null;
  proxyId: string | null;
  profileId: string | null;
  refreshOnProfileUpdate: boolean;
  viewport: { width: number; height: number; refresh_rate: number };
  chromePolicy: Record<string, unknown>;
  telemetry: TelemetryConfig | null;
  /** browser_pool_config as sent, for the echo. */
  config: Record<string, unknown>;
}

export interface PoolRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string | null;
  size: number;
  fill_rate_per_minute: number;
  timeout_seconds: number;
  headless: boolean;
  stealth: boolean;
  kiosk_mode: boolean;
  start_url: string | null;
  proxy_id: string | null;
  profile_id: string | null;
  refresh_on_profile_update: boolean;
  viewport_width: number;
  viewport_height: number;
  viewport_refresh_rate: number;
  chrome_policy: Record<string, unknown>;
  telemetry: TelemetryConfig | null;
  config: Record<string, unknown>;
  generation: number;
  /** The fill rate's clock: the next warm browser may start no earlier (NULL: now). */
  next_fill_at: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  /** The BrowserPool resource (namespace/name) that manages the pool; the API then refuses to change it. */
  kubernetes_resource: string | null;
  /** When that resource was deleted: the pool warms nothing more and goes once no browser is leased. */
  draining_since: Date | null;
  /** Browsers of the pool: ready and waiting, and held by clients (read in the same statement). */
  available_count: number;
  acquired_count: number;
  /** Browsers of the pool still starting (the fill's progress: starting, then available). */
  starting_count: number;
  /** The uploaded extensions its browsers load, in load order (pool-extensions.ts). */
  extension_ids: string[];
}

const SELECT = `SELECT p.id, p.org_id, p.project_id, p.name, p.size, p.fill_rate_per_minute, p.timeout_seconds, p.headless,
    p.stealth, p.kiosk_mode, p.start_url, p.proxy_id, p.profile_id, p.refresh_on_profile_update, p.viewport_width,
    p.viewport_height, p.viewport_refresh_rate, p.chrome_policy, p.telemetry, p.config, p.generation, p.next_fill_at, p.created_at,
    p.updated_at, p.deleted_at, p.kubernetes_resource, p.draining_since, c.available_count, c.acquired_count, c.starting_count,
    ARRAY(SELECT x.extension_id FROM browser_pool_extensions x WHERE x.pool_id = p.id ORDER BY x.position) AS extension_ids
  FROM browser_pools p
  CROSS JOIN LATERAL (
    SELECT (count(*) FILTER (WHERE s.leased_at IS NULL AND s.phase = 'running'))::int AS available_count,
           (count(*) FILTER (WHERE s.leased_at IS NOT NULL))::int AS acquired_count,
           (count(*) FILTER (WHERE s.leased_at IS NULL AND s.phase = 'starting'))::int AS starting_count
      FROM browser_sessions s WHERE s.pool_id = p.id AND s.deleted_at IS NULL
  ) c`;

const nameKey = (name: string | null) => (name === null ? null : foldName(name));

/** The settings columns, in SETTINGS_COLUMNS order, as query parameters. */
function settingsValues(s: PoolSettings): unknown[] {
  return [
    s.size,
    s.fillRatePerMinute,
    s.timeoutSeconds,
    s.headless,
    s.stealth,
    s.kioskMode,
    s.startUrl,
    s.proxyId,
    s.profileId,
    s.refreshOnProfileUpdate,
    s.viewport.width,
    s.viewport.height,
    s.viewport.refresh_rate,
    JSON.stringify(s.chromePolicy),
    s.telemetry === null ? null : JSON.stringify(s.telemetry),
    JSON.stringify(s.config),
  ];
}

const SETTINGS_COLUMNS = [
  'size',
  'fill_rate_per_minute',
  'timeout_seconds',
  'headless',
  'stealth',
  'kiosk_mode',
  'start_url',
  'proxy_id',
  'profile_id',
  'refresh_on_profile_update',
  'viewport_width',
  'viewport_height',
  'viewport_refresh_rate',
  'chrome_policy',
  'telemetry',
  'config',
];

export async function insertPool(
  db: Queryable,
  scope: PoolScope,
  pool: { id: string; name: string | null; settings: PoolSettings; now: Date; kubernetesResource?: string | undefined },
): Promise<void> {
  const columns = ['id', 'org_id', 'project_id', 'name', 'name_key', ...SETTINGS_COLUMNS, 'created_at', 'updated_at', 'kubernetes_resource'];
  const values = [pool.id, scope.orgId, scope.projectId, pool.name, nameKey(pool.name), ...settingsValues(pool.settings), pool.now, pool.now, pool.kubernetesResource ?? null];
  await db.query(`INSERT INTO browser_pools (${columns.join(', ')}) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')})`, values);
}

/**
 * Replaces a pool's configuration. `generation` moves when anything a browser is made
 * with changed (not size, fill rate or name), so warm browsers of the old one get rebuilt.
 */
export async function updatePool(
  db: Queryable,
  id: string,
  change: { name: string | null; settings: PoolSettings; browsersChanged: boolean; now: Date },
): Promise<void> {
  const assignments = SETTINGS_COLUMNS.map((column, i) => `${column} = $${i + 6}`).join(', ');
  await db.query(
    `UPDATE browser_pools SET name = $2, name_key = $3, ${assignments},
        generation = generation + CASE WHEN $4 THEN 1 ELSE 0 END, updated_at = $5
      WHERE id = $1`,
    [id, change.name, nameKey(change.name), change.browsersChanged, change.now, ...settingsValues(change.settings)],
  );
}

/** A live pool of the project by id, else by (folded) name; `lock` takes it FOR UPDATE. */
export async function findPool(db: Queryable, scope: PoolScope, idOrName: string, options: { lock?: boolean } = {}): Promise<PoolRow | undefined> {
  const { rows } = await db.query<PoolRow>(
    `${SELECT} WHERE p.org_id = $1 AND p.project_id = $2 AND p.deleted_at IS NULL AND (p.id = $3 OR p.name_key = $4)
      ORDER BY (p.id = $3) DESC LIMIT 1 ${options.lock ? 'FOR UPDATE OF p' : ''}`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

/**
 * A live pool by id, across tenants, locked for its fill; undefined when another replica
 * fills it right now (SKIP LOCKED), it is gone, or it drains (its resource was deleted).
 */
export async function lockPoolForFill(db: Queryable, id: string): Promise<PoolRow | undefined> {
  const { rows } = await db.query<PoolRow>(`${SELECT} WHERE p.id = $1 AND p.deleted_at IS NULL AND p.draining_since IS NULL FOR UPDATE OF p SKIP LOCKED`, [id]);
  return rows[0];
}

/** The live pool a BrowserPool resource (namespace/name) manages, across tenants; `lock` takes it FOR UPDATE. */
export async function findManagedPool(db: Queryable, resource: string, options: { lock?: boolean } = {}): Promise<PoolRow | undefined> {
  const { rows } = await db.query<PoolRow>(
    `${SELECT} WHERE p.kubernetes_resource = $1 AND p.deleted_at IS NULL ${options.lock ? 'FOR UPDATE OF p' : ''}`,
    [resource],
  );
  return rows[0];
}

/**
 * Starts a pool's drain (once): the fill passes it over, and its generation moves on so a
 * released browser is closed rather than put back to be leased again.
 */
export async function markPoolDraining(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE browser_pools SET draining_since = $2, generation = generation + 1, updated_at = $2
      WHERE id = $1 AND deleted_at IS NULL AND draining_since IS NULL`,
    [id, now],
  );
}

/**
 * A profile was saved: the pools that refresh on it move to a new generation (their warm
 * browsers hold the old save). Returns those pools with their new generation.
 */
export async function bumpProfileRefreshingPools(db: Queryable, profileId: string, now: Date): Promise<{ id: string; generation: number }[]> {
  const { rows } = await db.query<{ id: string; generation: number }>(
    `UPDATE browser_pools SET generation = generation + 1, updated_at = $2
      WHERE profile_id = $1 AND refresh_on_profile_update AND deleted_at IS NULL RETURNING id, generation`,
    [profileId, now],
  );
  return rows;
}

export async function setNextFillAt(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE browser_pools SET next_fill_at = $2 WHERE id = $1', [id, at]);
}

/** Sum of the sizes of live pools of the org, or of one project when `projectId` is given, except `exceptId`. */
export async function pooledSize(db: Queryable, where: { orgId: string; projectId: string | null }, exceptId: string | null): Promise<number> {
  const { rows } = await db.query<{ total: string }>(
    `SELECT coalesce(sum(size), 0) AS total FROM browser_pools
      WHERE org_id = $1 AND ($2::text IS NULL OR project_id = $2) AND deleted_at IS NULL AND ($3::text IS NULL OR id <> $3)`,
    [where.orgId, where.projectId, exceptId],
  );
  return Number(rows[0]!.total);
}

export interface PoolFilter {
  name?: string | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

/** Newest first; limit + 1 rows so the page knows whether more follow. */
export async function listPools(db: Queryable, scope: PoolScope, filter: PoolFilter): Promise<PoolRow[]> {
  const { rows } = await db.query<PoolRow>(
    `${SELECT}
      WHERE p.org_id = $1 AND p.project_id = $2 AND p.deleted_at IS NULL
        AND ($3::text IS NULL OR p.name_key = $3)
        AND ($4::text IS NULL OR p.name_key LIKE '%' || $4 || '%' ESCAPE '\\' OR p.id = $5)
      ORDER BY p.created_at DESC, p.seq DESC
      LIMIT $6 OFFSET $7`,
    [
      scope.orgId,
      scope.projectId,
      filter.name === undefined ? null : foldName(filter.name),
      filter.query === undefined ? null : escapeLike(foldName(filter.query)),
      filter.query ?? null,
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

export async function markPoolDeleted(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('UPDATE browser_pools SET deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL', [id, now]);
}
