import { prepared, type Queryable } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { escapeLike } from '../projects/store.js';
import { noteAuthChange } from './auth-changes.js';

export interface ApiKeyRow {
  id: string;
  org_id: string;
  project_id: string | null;
  project_name: string | null;
  name: string;
  masked_key: string;
  lifetime_days: number | null;
  created_by_key_id: string | null;
  created_by_name: string | null;
  owner_email: string;
  created_at: Date;
  expires_at: Date | null;
  deleted_at: Date | null;
}

const SELECT = `
  SELECT k.id, k.org_id, k.project_id, p.name AS project_name, k.name, k.masked_key, k.lifetime_days,
         k.created_by_key_id, k.created_by_name, o.owner_email, k.created_at, k.expires_at, k.deleted_at
    FROM api_keys k
    JOIN orgs o ON o.id = k.org_id
    LEFT JOIN projects p ON p.id = k.project_id`;

export interface NewApiKey {
  orgId: string;
  projectId: string | null;
  name: string;
  keyHash: Buffer;
  maskedKey: string;
  lifetimeDays: number | null;
  createdBy: { keyId: string; name: string } | null;
  now: Date;
  expiresAt: Date | null;
  /** The invocation whose run this key is for (see PresentedKey.invocation_id). */
  invocationId?: string | null;
}

export async function insertApiKey(db: Queryable, input: NewApiKey): Promise<ApiKeyRow> {
  const id = newId('key');
  await db.query(
    `INSERT INTO api_keys (id, org_id, project_id, name, key_hash, masked_key, lifetime_days,
                           created_by_key_id, created_by_name, created_at, expires_at, invocation_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      id,
      input.orgId,
      input.projectId,
      input.name,
      input.keyHash,
      input.maskedKey,
      input.lifetimeDays,
      input.createdBy?.keyId ?? null,
      input.createdBy?.name ?? null,
      input.now,
      input.expiresAt,
      input.invocationId ?? null,
    ],
  );
  return (await findApiKey(db, input.orgId, id, { includeDeleted: true }))!;
}

/** A presented key's row, deleted and expired ones included: the caller decides. */
export interface PresentedKey {
  id: string;
  name: string;
  org_id: string;
  project_id: string | null;
  expires_at: Date | null;
  deleted_at: Date | null;
  /** Set on the key an app's run gets: browsers it creates belong to that invocation. */
  invocation_id: string | null;
}

export type RequestKey = PresentedKey & { implicit_project_id: string | null; implicit_project_name: string | null };

/**
 * The presented key with the project a request acts in when it names none: the key's own
 * project (project-scoped keys) or the org's default project (org-wide keys), in one round
 * trip, since every authenticated request starts here. implicit_project_* are null when
 * that project does not exist (any more).
 */
export async function findApiKeyForRequest(db: Queryable, hash: Buffer): Promise<RequestKey | undefined> {
  const { rows } = await db.query<RequestKey>(
    prepared(
      `SELECT k.id, k.name, k.org_id, k.project_id, k.expires_at, k.deleted_at, k.invocation_id,
            p.id AS implicit_project_id, p.name AS implicit_project_name
       FROM api_keys k
       LEFT JOIN projects p ON p.org_id = k.org_id AND p.deleted_at IS NULL
            AND (CASE WHEN k.project_id IS NULL THEN p.is_default ELSE p.id = k.project_id END)
      WHERE k.key_hash = $1`,
      [hash],
    ),
  );
  return rows[0];
}

export async function findApiKeyByHash(db: Queryable, hash: Buffer): Promise<PresentedKey | undefined> {
  const { rows } = await db.query<PresentedKey>('SELECT id, name, org_id, project_id, expires_at, deleted_at, invocation_id FROM api_keys WHERE key_hash = $1', [hash]);
  return rows[0];
}

export async function findApiKey(
  db: Queryable,
  orgId: string,
  id: string,
  options: { includeDeleted: boolean },
): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `${SELECT} WHERE k.org_id = $1 AND k.id = $2 AND ($3 OR k.deleted_at IS NULL)`,
    [orgId, id, options.includeDeleted],
  );
  return rows[0];
}

export interface ApiKeyFilter {
  name?: string | undefined;
  query?: string | undefined;
  status: 'active' | 'deleted' | 'all';
  sortBy: 'created_at' | 'name' | 'expires_at';
  sortDirection: 'asc' | 'desc';
  limit: number;
  offset: number;
}

const SORT_COLUMNS = { created_at: 'k.created_at', name: 'k.name', expires_at: 'k.expires_at' } as const;

export async function listApiKeys(db: Queryable, orgId: string, filter: ApiKeyFilter): Promise<ApiKeyRow[]> {
  // Both parts of ORDER BY come from closed enums validated by the route, never from text.
  const column = SORT_COLUMNS[filter.sortBy];
  const direction = filter.sortDirection === 'asc' ? 'ASC' : 'DESC';
  const { rows } = await db.query<ApiKeyRow>(
    `${SELECT}
      WHERE k.org_id = $1
        AND CASE $2::text WHEN 'active' THEN k.deleted_at IS NULL
                          WHEN 'deleted' THEN k.deleted_at IS NOT NULL
                          ELSE true END
        AND ($3::text IS NULL OR k.name = $3)
        AND ($4::text IS NULL
             OR k.name ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR k.created_by_name ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR o.owner_email ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR p.name ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR k.id LIKE $5 || '%' ESCAPE '\\'
             OR k.masked_key LIKE $5 || '%' ESCAPE '\\')
      ORDER BY ${column} ${direction}, k.seq ${direction}
      LIMIT $6 OFFSET $7`,
    [
      orgId,
      filter.status,
      filter.name ?? null,
      filter.query ?? null,
      filter.query === undefined ? null : escapeLike(filter.query),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

export async function renameApiKey(db: Queryable, id: string, name: string): Promise<void> {
  await db.query('UPDATE api_keys SET name = $2 WHERE id = $1', [id, name]);
  noteAuthChange();
}

export async function softDeleteApiKey(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('UPDATE api_keys SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [id, now]);
  noteAuthChange();
}

/** Brings a key's expiry forward to `at` (never pushes it later). */
export async function expireApiKeyBy(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(
    'UPDATE api_keys SET expires_at = LEAST(COALESCE(expires_at, $2), $2) WHERE id = $1',
    [id, at],
  );
  noteAuthChange();
}

export async function countLiveProjectKeys(db: Queryable, projectId: string, now: Date): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM api_keys
      WHERE project_id = $1 AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
    [projectId, now],
  );
  return rows[0]?.n ?? 0;
}
