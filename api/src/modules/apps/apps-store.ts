import type { Queryable } from '../../db/pool.js';
import type { ProjectScope } from '../../scope.js';
import { escapeLike } from '../projects/store.js';

export interface AppAction {
  name: string;
}

export interface AppVersionRow {
  id: string;
  org_id: string;
  project_id: string;
  deployment_id: string;
  app_name: string;
  version: string;
  runtime: 'node' | 'python';
  entry: string;
  actions: AppAction[];
  env_vars: Record<string, string>;
  created_at: Date;
}

const COLUMNS = `id, org_id, project_id, deployment_id, app_name, version, runtime, entry, actions, env_vars, created_at`;

export async function findLiveAppVersion(db: Queryable, projectId: string, appName: string, version: string): Promise<AppVersionRow | undefined> {
  const { rows } = await db.query<AppVersionRow>(
    `SELECT ${COLUMNS} FROM app_versions WHERE project_id = $1 AND app_name = $2 AND version = $3 AND deleted_at IS NULL FOR UPDATE`,
    [projectId, appName, version],
  );
  return rows[0];
}

export async function insertAppVersion(
  db: Queryable,
  scope: ProjectScope,
  input: Omit<AppVersionRow, 'org_id' | 'project_id'>,
): Promise<AppVersionRow> {
  const { rows } = await db.query<AppVersionRow>(
    `INSERT INTO app_versions (id, org_id, project_id, deployment_id, app_name, version, runtime, entry, actions, env_vars, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     RETURNING ${COLUMNS}`,
    [
      input.id,
      scope.orgId,
      scope.projectId,
      input.deployment_id,
      input.app_name,
      input.version,
      input.runtime,
      input.entry,
      JSON.stringify(input.actions),
      JSON.stringify(input.env_vars),
      input.created_at,
    ],
  );
  return rows[0]!;
}

/** Replaced by a forced deployment, or gone with their deployment. */
export async function deleteAppVersions(db: Queryable, where: { id: string } | { deploymentId: string }, now: Date): Promise<void> {
  if ('id' in where) await db.query(`UPDATE app_versions SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, [where.id, now]);
  else await db.query(`UPDATE app_versions SET deleted_at = $2 WHERE deployment_id = $1 AND deleted_at IS NULL`, [where.deploymentId, now]);
}

export interface AppFilter {
  appName?: string | undefined;
  version?: string | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

/** Live app versions, newest first; limit + 1 rows so the page knows whether more follow. */
export async function listAppVersions(db: Queryable, scope: ProjectScope, filter: AppFilter): Promise<AppVersionRow[]> {
  const { rows } = await db.query<AppVersionRow>(
    `SELECT ${COLUMNS} FROM app_versions
      WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL
        AND ($3::text IS NULL OR app_name = $3)
        AND ($4::text IS NULL OR version = $4)
        AND ($5::text IS NULL OR id LIKE $5 || '%' ESCAPE '\\' OR app_name ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR version ILIKE '%' || $5 || '%' ESCAPE '\\')
      ORDER BY created_at DESC, seq DESC
      LIMIT $6 OFFSET $7`,
    [
      scope.orgId,
      scope.projectId,
      filter.appName ?? null,
      filter.version ?? null,
      filter.query === undefined ? null : escapeLike(filter.query),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}
