import type { Queryable } from '../../db/pool.js';
import { foldName, newId } from '../../ids.js';
import { escapeLike } from '../projects/store.js';

export interface ExtensionRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string | null;
  created_at: Date;
  last_used_at: Date | null;
  size_bytes: string;
  checksum: string | null;
  manifest_name: string;
  manifest_version: string;
}

export interface ProjectScope {
  orgId: string;
  projectId: string;
}

/** Everything but the archive, which only a download and a browser's fetch read. */
const COLUMNS = 'id, org_id, project_id, name, created_at, last_used_at, size_bytes, checksum, manifest_name, manifest_version';

export interface NewExtension {
  name: string | null;
  archive: Buffer;
  checksum: string | null;
  manifestName: string;
  manifestVersion: string;
  now: Date;
}

export async function insertExtension(db: Queryable, scope: ProjectScope, input: NewExtension): Promise<ExtensionRow> {
  const { rows } = await db.query<ExtensionRow>(
    `INSERT INTO extensions (id, org_id, project_id, name, name_key, created_at, size_bytes, checksum, manifest_name, manifest_version, archive)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${COLUMNS}`,
    [
      newId('ext'),
      scope.orgId,
      scope.projectId,
      input.name,
      input.name === null ? null : foldName(input.name),
      input.now,
      input.archive.length,
      input.checksum,
      input.manifestName,
      input.manifestVersion,
      input.archive,
    ],
  );
  return rows[0]!;
}

/** An extension of the project, by id first, else by (case- and accent-insensitive) name. */
export async function findExtension(db: Queryable, scope: ProjectScope, idOrName: string): Promise<ExtensionRow | undefined> {
  const { rows } = await db.query<ExtensionRow>(
    `SELECT ${COLUMNS} FROM extensions
      WHERE org_id = $1 AND project_id = $2 AND (id = $3 OR name_key = $4)
      ORDER BY (id = $3) DESC LIMIT 1`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

/** The stored zip of an extension of the project (by its id). */
export async function readExtensionArchive(db: Queryable, scope: ProjectScope, id: string): Promise<Buffer | undefined> {
  const { rows } = await db.query<{ archive: Buffer }>('SELECT archive FROM extensions WHERE org_id = $1 AND project_id = $2 AND id = $3', [
    scope.orgId,
    scope.projectId,
    id,
  ]);
  return rows[0]?.archive;
}

export async function listExtensions(
  db: Queryable,
  scope: ProjectScope,
  filter: { name?: string | undefined; query?: string | undefined; limit: number; offset: number },
): Promise<ExtensionRow[]> {
  const query = filter.query === undefined ? null : escapeLike(foldName(filter.query));
  const { rows } = await db.query<ExtensionRow>(
    `SELECT ${COLUMNS} FROM extensions
      WHERE org_id = $1 AND project_id = $2
        AND ($3::text IS NULL OR name_key = $3)
        AND ($4::text IS NULL OR name_key LIKE '%' || $4 || '%' ESCAPE '\\' OR id = $5)
      ORDER BY created_at DESC, seq DESC
      LIMIT $6 OFFSET $7`,
    [scope.orgId, scope.projectId, filter.name === undefined ? null : foldName(filter.name), query, filter.query ?? null, filter.limit + 1, filter.offset],
  );
  return rows;
}

export async function deleteExtension(db: Queryable, scope: ProjectScope, id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM extensions WHERE org_id = $1 AND project_id = $2 AND id = $3', [scope.orgId, scope.projectId, id]);
  return rowCount === 1;
}

/** The live browser pools that load the extension (browser_pool_extensions), oldest first. */
export async function poolsUsingExtension(db: Queryable, id: string): Promise<{ id: string; name: string | null }[]> {
  const { rows } = await db.query<{ id: string; name: string | null }>(
    `SELECT p.id, p.name FROM browser_pool_extensions x JOIN browser_pools p ON p.id = x.pool_id
      WHERE x.extension_id = $1 AND p.deleted_at IS NULL ORDER BY p.created_at, p.id`,
    [id],
  );
  return rows;
}

export async function countProjectExtensions(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM extensions WHERE project_id = $1', [projectId]);
  return rows[0]?.n ?? 0;
}

/** Browsers were created with these extensions: last_used_at moves. */
export async function markExtensionsUsed(db: Queryable, ids: string[], now: Date): Promise<void> {
  if (ids.length > 0) await db.query('UPDATE extensions SET last_used_at = $2 WHERE id = ANY($1::text[])', [ids, now]);
}

/** Serialises creates in a project, so the per-project count cannot be overshot by parallel uploads. */
export async function lockProjectExtensionCreates(db: Queryable, projectId: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtextextended('extensions:' || $1, 0))", [projectId]);
}
