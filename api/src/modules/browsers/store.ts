import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';
import type { TelemetryConfig } from './telemetry.js';

export interface Scope {
  orgId: string;
  projectId: string;
}

export interface SessionRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string | null;
  headless: boolean;
  stealth: boolean;
  gpu: boolean;
  kiosk_mode: boolean;
  start_url: string | null;
  timeout_seconds: number;
  proxy_id: string | null;
  profile_id: string | null;
  profile_save_changes: boolean;
  viewport_width: number;
  viewport_height: number;
  viewport_refresh_rate: number;
  chrome_policy: Record<string, unknown>;
  tags: Record<string, string>;
  telemetry: TelemetryConfig | null;
  invocation_id: string | null;
  phase: 'starting' | 'running';
  agent_url: string | null;
  started_at: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  deleted_reason: string | null;
  /** Set for a browser of a pool; leased_at while a client holds it (else it is idle in the pool). */
  pool_id: string | null;
  pool_generation: number | null;
  leased_at: Date | null;
  lease_seq: number;
  /** Set while the row is a warm spare nobody has claimed (spares.ts); a session then has null. */
  spare_key: string | null;
  /** Joined from browser_pools. */
  pool_name: string | null;
  /** Joined from profiles. */
  profile_name: string | null;
  profile_created_at: Date | null;
  profile_updated_at: Date | null;
  profile_last_used_at: Date | null;
}

const COLUMNS = `s.id, s.org_id, s.project_id, s.name, s.headless, s.stealth, s.gpu, s.kiosk_mode, s.start_url,
    s.timeout_seconds, s.proxy_id, s.profile_id, s.profile_save_changes, s.viewport_width, s.viewport_height,
    s.viewport_refresh_rate, s.chrome_policy, s.tags, s.telemetry, s.invocation_id, s.phase, s.agent_url, s.started_at,
    s.created_at, s.updated_at, s.deleted_at, s.deleted_reason, s.pool_id, s.pool_generation, s.leased_at, s.lease_seq, s.spare_key,
    bp.name AS pool_name,
    p.name AS profile_name, p.created_at AS profile_created_at, p.updated_at AS profile_updated_at,
    p.last_used_at AS profile_last_used_at`;
const JOINS = 'LEFT JOIN profiles p ON p.id = s.profile_id LEFT JOIN browser_pools bp ON bp.id = s.pool_id';

/** SessionRows read from `source` (a table or a CTE with browser_sessions' columns), aliased `s`. */
export const selectSessionsFrom = (source: string): string => `SELECT ${COLUMNS} FROM ${source} s ${JOINS}`;

const SELECT = selectSessionsFrom('browser_sessions');

/**
 * What clients see as sessions: every browser outside pools, and a pool's browser while it
 * is leased (or ended after a lease). A browser waiting idle in its pool is nobody's
 * session, nor is a warm spare (claimed, it has no spare_key any more).
 */
const VISIBLE = `(s.spare_key IS NULL AND (s.pool_id IS NULL OR s.leased_at IS NOT NULL OR (s.deleted_at IS NOT NULL AND s.lease_seq > 0)))`;

const nameKey = (name: string | null) => (name === null ? null : foldName(name));

export interface NewSession {
  id: string;
  name: string | null;
  headless: boolean;
  stealth: boolean;
  gpu: boolean;
  kioskMode: boolean;
  startUrl: string | null;
  timeoutSeconds: number;
  proxyId: string | null;
  profileId: string | null;
  profileSaveChanges: boolean;
  viewport: { width: number; height: number; refresh_rate: number };
  chromePolicy: Record<string, unknown>;
  tags: Record<string, string>;
  telemetry: TelemetryConfig | null;
  invocationId: string | null;
  /** A browser warmed for a pool, made with the pool's configuration of this generation. */
  pool?: { id: string; generation: number };
  /** A warm spare for creates with these launch settings (spares.ts). */
  spareKey?: string;
  now: Date;
}

export async function insertSession(db: Queryable, scope: Scope, s: NewSession): Promise<void> {
  await db.query(
    `INSERT INTO browser_sessions (id, org_id, project_id, name, name_key, headless, stealth, gpu, kiosk_mode, start_url,
        timeout_seconds, proxy_id, profile_id, profile_save_changes, viewport_width, viewport_height, viewport_refresh_rate,
        chrome_policy, tags, telemetry, invocation_id, phase, created_at, updated_at, pool_id, pool_generation, spare_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, 'starting', $22, $22, $23, $24, $25)`,
    [
      s.id,
      scope.orgId,
      scope.projectId,
      s.name,
      nameKey(s.name),
      s.headless,
      s.stealth,
      s.gpu,
      s.kioskMode,
      s.startUrl,
      s.timeoutSeconds,
      s.proxyId,
      s.profileId,
      s.profileSaveChanges,
      s.viewport.width,
      s.viewport.height,
      s.viewport.refresh_rate,
      JSON.stringify(s.chromePolicy),
      JSON.stringify(s.tags),
      s.telemetry === null ? null : JSON.stringify(s.telemetry),
      s.invocationId,
      s.now,
      s.pool?.id ?? null,
      s.pool?.generation ?? null,
      s.spareKey ?? null,
    ],
  );
}

/** A session of the project by id, else by (folded) name; live ones only unless asked. */
export async function findSession(
  db: Queryable,
  scope: Scope,
  idOrName: string,
  options: { includeDeleted?: boolean } = {},
): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `${SELECT}
      WHERE s.org_id = $1 AND s.project_id = $2 AND ($4 OR s.deleted_at IS NULL) AND (s.id = $3 OR s.name_key = $5) AND ${VISIBLE}
      ORDER BY (s.id = $3) DESC, (s.deleted_at IS NULL) DESC, s.created_at DESC, s.seq DESC LIMIT 1`,
    [scope.orgId, scope.projectId, idOrName, options.includeDeleted === true, foldName(idOrName)],
  );
  return rows[0];
}

/**
 * A live browser by id alone, across tenants and including idle pool browsers: for the CDP
 * proxy (whose token names the session and lease) and the agent's profile archive.
 */
export async function findLiveSessionById(db: Queryable, id: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(`${SELECT} WHERE s.id = $1 AND s.deleted_at IS NULL`, [id]);
  return rows[0];
}

export async function listLiveSessions(db: Queryable): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(`${SELECT} WHERE s.deleted_at IS NULL ORDER BY s.created_at, s.seq`);
  return rows;
}

export async function listInvocationSessions(db: Queryable, scope: Scope, invocationId: string): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    `${SELECT} WHERE s.org_id = $1 AND s.project_id = $2 AND s.invocation_id = $3 AND s.deleted_at IS NULL
      ORDER BY s.created_at DESC, s.seq DESC`,
    [scope.orgId, scope.projectId, invocationId],
  );
  return rows;
}

/** Which of these ids name sessions whose rows have ended. */
export async function endedSessionIds(db: Queryable, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>('SELECT id FROM browser_sessions WHERE id = ANY($1::text[]) AND deleted_at IS NOT NULL', [ids]);
  return new Set(rows.map((row) => row.id));
}

/** Live sessions of finished invocations: the reaper ends them. */
export async function listSessionsOfFinishedInvocations(db: Queryable): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    `${SELECT} JOIN invocations i ON i.project_id = s.project_id AND i.id = s.invocation_id
      WHERE s.deleted_at IS NULL AND i.status IN ('succeeded', 'failed')`,
  );
  return rows;
}

export interface SessionFilter {
  status: 'active' | 'deleted' | 'all';
  query?: string | undefined;
  tags?: Record<string, string> | undefined;
  limit: number;
  offset: number;
}

/** Newest first; limit + 1 rows so the page knows whether more follow. */
export async function listSessions(db: Queryable, scope: Scope, filter: SessionFilter): Promise<SessionRow[]> {
  const query = filter.query === undefined ? null : escapeLike(filter.query);
  const { rows } = await db.query<SessionRow>(
    `${SELECT}
      WHERE s.org_id = $1 AND s.project_id = $2 AND ${VISIBLE}
        AND ($3::text = 'all' OR ($3::text = 'active') = (s.deleted_at IS NULL))
        AND ($4::jsonb IS NULL OR s.tags @> $4::jsonb)
        AND ($5::text IS NULL
             OR s.name_key LIKE '%' || $8 || '%' ESCAPE '\\'
             OR s.id LIKE $5 || '%' ESCAPE '\\'
             OR s.profile_id LIKE $5 || '%' ESCAPE '\\'
             OR s.proxy_id LIKE $5 || '%' ESCAPE '\\')
      ORDER BY s.created_at DESC, s.seq DESC
      LIMIT $6 OFFSET $7`,
    [
      scope.orgId,
      scope.projectId,
      filter.status,
      filter.tags === undefined || Object.keys(filter.tags).length === 0 ? null : JSON.stringify(filter.tags),
      query,
      filter.limit + 1,
      filter.offset,
      filter.query === undefined ? null : escapeLike(foldName(filter.query)),
    ],
  );
  return rows;
}

/** Marks a live session running and returns it as findSession would; undefined when it was deleted meanwhile. */
export async function markRunning(db: Queryable, id: string, change: { agentUrl: string; startedAt: Date; now: Date }): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `WITH running AS (
       UPDATE browser_sessions SET phase = 'running', agent_url = $2, started_at = $3, updated_at = $4
        WHERE id = $1 AND deleted_at IS NULL
        RETURNING *)
     ${selectSessionsFrom('running')}`,
    [id, change.agentUrl, change.startedAt, change.now],
  );
  return rows[0];
}

/** A live session's telemetry, its row locked until the transaction ends; undefined when it ended. */
export async function lockLiveTelemetry(db: Queryable, id: string): Promise<{ telemetry: TelemetryConfig | null } | undefined> {
  const { rows } = await db.query<{ telemetry: TelemetryConfig | null }>('SELECT telemetry FROM browser_sessions WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [id]);
  return rows[0];
}

/** Marks a live session deleted; false when it already was. */
export async function markDeleted(db: Queryable, id: string, reason: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE browser_sessions SET deleted_at = $2, deleted_reason = $3, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL`,
    [id, now, reason],
  );
  return rowCount === 1;
}

export interface SessionChange {
  name?: string | null;
  tags?: Record<string, string>;
  proxyId?: string | null;
  telemetry?: TelemetryConfig | null;
  viewport?: { width: number; height: number; refresh_rate: number };
  profile?: { id: string; saveChanges: boolean };
  now: Date;
}

/** Applies the given fields to a live session; undefined when it was deleted meanwhile. */
export async function updateSession(db: Queryable, id: string, change: SessionChange): Promise<boolean> {
  const sets: string[] = ['updated_at = $2'];
  const values: unknown[] = [id, change.now];
  const set = (column: string, value: unknown) => {
    values.push(value);
    sets.push(`${column} = $${values.length}`);
  };
  if (change.name !== undefined) {
    set('name', change.name);
    set('name_key', nameKey(change.name));
  }
  if (change.tags !== undefined) set('tags', JSON.stringify(change.tags));
  if (change.proxyId !== undefined) set('proxy_id', change.proxyId);
  if (change.telemetry !== undefined) set('telemetry', change.telemetry === null ? null : JSON.stringify(change.telemetry));
  if (change.viewport !== undefined) {
    set('viewport_width', change.viewport.width);
    set('viewport_height', change.viewport.height);
    set('viewport_refresh_rate', change.viewport.refresh_rate);
  }
  if (change.profile !== undefined) {
    set('profile_id', change.profile.id);
    set('profile_save_changes', change.profile.saveChanges);
  }
  const { rowCount } = await db.query(
    `UPDATE browser_sessions SET ${sets.join(', ')} WHERE id = $1 AND deleted_at IS NULL`,
    values,
  );
  return rowCount === 1;
}

/**
 * The caps and what counts against them, in one round trip (a create's admission reads them
 * under the org's lock): the project's own cap, the org's default for projects, and the live
 * sessions of the project and of the org. Warm spares do not count (the service's, not the
 * caller's); spares.ts keeps them within the room the caps leave.
 */
export async function readSessionCaps(
  db: Queryable,
  scope: Scope,
): Promise<{ projectCap: number | null; orgDefaultProjectCap: number | null; live: { project: number; org: number } }> {
  const { rows } = await db.query<{ project_cap: number | null; org_default: number | null; project: number; org: number }>(
    `SELECT (SELECT max_concurrent_sessions FROM project_limits WHERE project_id = $2) AS project_cap,
            (SELECT default_project_max_concurrent_sessions FROM orgs WHERE id = $1) AS org_default,
            count(*) FILTER (WHERE project_id = $2)::int AS project, count(*)::int AS org
       FROM browser_sessions WHERE org_id = $1 AND deleted_at IS NULL AND spare_key IS NULL`,
    [scope.orgId, scope.projectId],
  );
  const row = rows[0]!;
  return { projectCap: row.project_cap, orgDefaultProjectCap: row.org_default, live: { project: row.project, org: row.org } };
}

export async function countLiveProjectSessions(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    // A project's spares do not keep it: they end with it (spares.ts).
    'SELECT count(*)::int AS n FROM browser_sessions WHERE project_id = $1 AND deleted_at IS NULL AND spare_key IS NULL',
    [projectId],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Serialises the session creates of one org until the transaction ends: the org cap and
 * the project caps are then checked and the row inserted without interleaving.
 */
export async function lockOrgSessionCreates(db: Queryable, orgId: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(${SESSION_CREATE_LOCK_SPACE}, hashtext($1))`, [orgId]);
}
const SESSION_CREATE_LOCK_SPACE = 0x1b7c0004;
