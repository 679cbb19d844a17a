import type { Queryable } from '../../db/pool.js';
import { foldName, newId } from '../../ids.js';
import { escapeLike } from '../projects/store.js';

export interface ProfileRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string | null;
  created_at: Date;
  updated_at: Date;
  last_used_at: Date | null;
}

export interface ProjectScope {
  orgId: string;
  projectId: string;
}

const COLUMNS = 'id, org_id, project_id, name, created_at, updated_at, last_used_at';

const nameKey = (name: string | null) => (name === null ? null : foldName(name));

export async function insertProfile(
  db: Queryable,
  scope: ProjectScope,
  input: { name: string | null; now: Date },
): Promise<ProfileRow> {
  const { rows } = await db.query<ProfileRow>(
    `INSERT INTO profiles (id, org_id, project_id, name, name_key, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING ${COLUMNS}`,
    [newId('prof'), scope.orgId, scope.projectId, input.name, nameKey(input.name), input.now],
  );
  return rows[0]!;
}

/** A live profile of the project, by id first, else by (case- and accent-insensitive) name. */
export async function findProfile(db: Queryable, scope: ProjectScope, idOrName: string): Promise<ProfileRow | undefined> {
  const { rows } = await db.query<ProfileRow>(
    `SELECT ${COLUMNS} FROM profiles
      WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL AND (id = $3 OR name_key = $4)
      ORDER BY (id = $3) DESC LIMIT 1`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

export async function listProfiles(
  db: Queryable,
  scope: ProjectScope,
  filter: { name?: string | undefined; query?: string | undefined; limit: number; offset: number },
): Promise<ProfileRow[]> {
  const query = filter.query === undefined ? null : escapeLike(foldName(filter.query));
  const { rows } = await db.query<ProfileRow>(
    `SELECT ${COLUMNS} FROM profiles
      WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL
        AND ($3::text IS NULL OR name_key = $3)
        AND ($4::text IS NULL OR name_key LIKE '%' || $4 || '%' ESCAPE '\\' OR lower(id) LIKE '%' || $4 || '%' ESCAPE '\\')
      ORDER BY created_at DESC, seq DESC
      LIMIT $5 OFFSET $6`,
    [
      scope.orgId,
      scope.projectId,
      filter.name === undefined ? null : foldName(filter.name),
      query,
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

/** Renames a live profile; undefined when it was deleted meanwhile. */
export async function renameProfile(
  db: Queryable,
  scope: ProjectScope,
  id: string,
  change: { name: string; now: Date },
): Promise<ProfileRow | undefined> {
  const { rows } = await db.query<ProfileRow>(
    `UPDATE profiles SET name = $4, name_key = $5, updated_at = $6
      WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [scope.orgId, scope.projectId, id, change.name, foldName(change.name), change.now],
  );
  return rows[0];
}

/** Soft-deletes a live profile; false when it was already gone. */
export async function softDeleteProfile(db: Queryable, scope: ProjectScope, id: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE profiles SET deleted_at = $4, updated_at = $4
      WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL`,
    [scope.orgId, scope.projectId, id, now],
  );
  return rowCount === 1;
}

export async function countLiveProjectProfiles(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM profiles WHERE project_id = $1 AND deleted_at IS NULL',
    [projectId],
  );
  return rows[0]?.n ?? 0;
}

/** A session started with the profile (or had it attached): last_used_at moves, updated_at does not. */
export async function markProfileUsed(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('UPDATE profiles SET last_used_at = $2 WHERE id = $1 AND deleted_at IS NULL', [id, now]);
}

/** A session saved its changes into the profile; false when the profile was deleted meanwhile. */
export async function markProfileSaved(db: Queryable, id: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE profiles SET updated_at = $2 WHERE id = $1 AND deleted_at IS NULL', [id, now]);
  return rowCount === 1;
}

/** A live profile by id alone, for the agent's archive routes, whose token names the session. */
export async function findLiveProfileById(db: Queryable, id: string): Promise<ProfileRow | undefined> {
  const { rows } = await db.query<ProfileRow>(`SELECT ${COLUMNS} FROM profiles WHERE id = $1 AND deleted_at IS NULL`, [id]);
  return rows[0];
}
