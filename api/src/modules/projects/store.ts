import { foldName, newId } from '../../ids.js';
import type { Queryable } from '../../db/pool.js';
import { noteAuthChange } from '../api-keys/auth-changes.js';

export interface ProjectRow {
  id: string;
  org_id: string;
  name: string;
  status: 'active' | 'archived';
  is_default: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface LimitsRow {
  max_concurrent_sessions: number | null;
  max_concurrent_invocations: number | null;
  max_pooled_sessions: number | null;
}

export type LimitName = keyof LimitsRow;
export const LIMIT_NAMES: LimitName[] = ['max_concurrent_sessions', 'max_concurrent_invocations', 'max_pooled_sessions'];

const COLUMNS = 'id, org_id, name, status, is_default, created_at, updated_at, deleted_at';

export async function insertProject(
  db: Queryable,
  input: { orgId: string; name: string; isDefault: boolean; now: Date },
): Promise<ProjectRow> {
  const { rows } = await db.query<ProjectRow>(
    `INSERT INTO projects (id, org_id, name, name_key, status, is_default, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'active', $5, $6, $6) RETURNING ${COLUMNS}`,
    [newId('proj'), input.orgId, input.name, foldName(input.name), input.isDefault, input.now],
  );
  // A new default project becomes the one org-wide keys act in.
  noteAuthChange();
  return rows[0]!;
}

/** A live project of the org, by id or by (case- and accent-insensitive) name. */
export async function findProject(db: Queryable, orgId: string, idOrName: string): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${COLUMNS} FROM projects
      WHERE org_id = $1 AND deleted_at IS NULL AND (id = $2 OR name_key = $3)
      ORDER BY (id = $2) DESC LIMIT 1`,
    [orgId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

export async function findDefaultProject(db: Queryable, orgId: string): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${COLUMNS} FROM projects WHERE org_id = $1 AND is_default AND deleted_at IS NULL`,
    [orgId],
  );
  return rows[0];
}

export async function listProjects(
  db: Queryable,
  orgId: string,
  filter: { name?: string | undefined; query?: string | undefined; limit: number; offset: number },
): Promise<ProjectRow[]> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${COLUMNS} FROM projects
      WHERE org_id = $1 AND deleted_at IS NULL
        AND ($2::text IS NULL OR name_key = $2)
        AND ($3::text IS NULL OR name_key LIKE '%' || $3 || '%' ESCAPE '\\' OR id = $4)
      ORDER BY created_at DESC, seq DESC
      LIMIT $5 OFFSET $6`,
    [
      orgId,
      filter.name === undefined ? null : foldName(filter.name),
      filter.query === undefined ? null : escapeLike(foldName(filter.query)),
      filter.query ?? null,
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

/** Updates a live project; undefined when it was deleted meanwhile. */
export async function updateProject(
  db: Queryable,
  id: string,
  change: { name?: string | undefined; status?: 'active' | 'archived' | undefined; now: Date },
): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(
    `UPDATE projects SET
        name = COALESCE($2, name),
        name_key = COALESCE($3, name_key),
        status = COALESCE($4, status),
        updated_at = $5
      WHERE id = $1 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [id, change.name ?? null, change.name === undefined ? null : foldName(change.name), change.status ?? null, change.now],
  );
  noteAuthChange();
  return rows[0];
}

export async function softDeleteProject(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('UPDATE projects SET deleted_at = $2, updated_at = $2 WHERE id = $1', [id, now]);
  noteAuthChange();
}

/**
 * Locks a live project row so a delete and a concurrent resource create serialise.
 * False when the project was deleted meanwhile (the condition is re-checked once the
 * lock is held).
 */
export async function lockLiveProject(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM projects WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [id]);
  return rowCount === 1;
}

export async function getLimits(db: Queryable, projectId: string): Promise<LimitsRow> {
  const { rows } = await db.query<LimitsRow>(
    `SELECT max_concurrent_sessions, max_concurrent_invocations, max_pooled_sessions
       FROM project_limits WHERE project_id = $1`,
    [projectId],
  );
  return rows[0] ?? { max_concurrent_sessions: null, max_concurrent_invocations: null, max_pooled_sessions: null };
}

/**
 * Changes only the limits given: a number sets the cap, null removes it, an absent key
 * leaves it as it is.
 */
export async function updateLimits(
  db: Queryable,
  projectId: string,
  change: Partial<LimitsRow>,
  now: Date,
): Promise<LimitsRow> {
  const value = (name: LimitName) => (name in change ? change[name] : null);
  const given = (name: LimitName) => name in change;
  const { rows } = await db.query<LimitsRow>(
    `INSERT INTO project_limits (project_id, max_concurrent_sessions, max_concurrent_invocations, max_pooled_sessions, updated_at)
     VALUES ($1, $2, $3, $4, $8)
     ON CONFLICT (project_id) DO UPDATE SET
       max_concurrent_sessions = CASE WHEN $5 THEN EXCLUDED.max_concurrent_sessions ELSE project_limits.max_concurrent_sessions END,
       max_concurrent_invocations = CASE WHEN $6 THEN EXCLUDED.max_concurrent_invocations ELSE project_limits.max_concurrent_invocations END,
       max_pooled_sessions = CASE WHEN $7 THEN EXCLUDED.max_pooled_sessions ELSE project_limits.max_pooled_sessions END,
       updated_at = EXCLUDED.updated_at
     RETURNING max_concurrent_sessions, max_concurrent_invocations, max_pooled_sessions`,
    [
      projectId,
      value('max_concurrent_sessions'),
      value('max_concurrent_invocations'),
      value('max_pooled_sessions'),
      given('max_concurrent_sessions'),
      given('max_concurrent_invocations'),
      given('max_pooled_sessions'),
      now,
    ],
  );
  return rows[0]!;
}

/** Escapes LIKE wildcards so user text matches literally. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => '\\' + c);
}

/**
 * Takes a share lock on a live project, for writes that add a resource to it: a
 * concurrent delete (which takes FOR UPDATE) then waits and sees the new resource.
 */
export async function shareLockLiveProject(db: Queryable, orgId: string, idOrName: string): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${COLUMNS} FROM projects
      WHERE org_id = $1 AND deleted_at IS NULL AND (id = $2 OR name_key = $3)
      ORDER BY (id = $2) DESC LIMIT 1 FOR SHARE`,
    [orgId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

/** What /org/limits reports as used: live browser sessions (leased pool browsers included) and auth connections, org-wide. */
export async function countOrgUsage(db: Queryable, orgId: string): Promise<{ sessions: number; authConnections: number }> {
  const { rows } = await db.query<{ sessions: number; auth_connections: number }>(
    `SELECT (SELECT count(*)::int FROM browser_sessions WHERE org_id = $1 AND deleted_at IS NULL AND spare_key IS NULL) AS sessions,
            (SELECT count(*)::int FROM auth_connections WHERE org_id = $1) AS auth_connections`,
    [orgId],
  );
  return { sessions: rows[0]?.sessions ?? 0, authConnections: rows[0]?.auth_connections ?? 0 };
}
