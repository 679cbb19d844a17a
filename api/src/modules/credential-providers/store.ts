import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';

/** What reads return: everything but the sealed token. */
export interface ProviderRow {
  id: string;
  org_id: string;
  name: string;
  provider_type: 'onepassword';
  connect_url: string;
  cache_ttl_seconds: number;
  enabled: boolean;
  priority: number;
  created_at: Date;
  updated_at: Date;
}

export type ProviderRowWithToken = ProviderRow & { token_sealed: string };

const COLUMNS = 'id, org_id, name, provider_type, connect_url, cache_ttl_seconds, enabled, priority, created_at, updated_at';
/** A provider of the org by id or by (case- and accent-insensitive) name; an id wins over a name. */
const BY_ID_OR_NAME = 'org_id = $1 AND (id = $2 OR name_key = $3) ORDER BY (id = $2) DESC LIMIT 1';

export interface NewProvider {
  id: string;
  name: string;
  providerType: 'onepassword';
  connectUrl: string;
  tokenSealed: string;
  cacheTtlSeconds: number;
  now: Date;
}

export async function insertProvider(db: Queryable, orgId: string, input: NewProvider): Promise<ProviderRow> {
  const { rows } = await db.query<ProviderRow>(
    `INSERT INTO credential_providers (id, org_id, name, name_key, provider_type, connect_url, token_sealed, cache_ttl_seconds,
                                       enabled, priority, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true, 0, $9, $9) RETURNING ${COLUMNS}`,
    [input.id, orgId, input.name, foldName(input.name), input.providerType, input.connectUrl, input.tokenSealed, input.cacheTtlSeconds, input.now],
  );
  return rows[0]!;
}

export async function findProvider(db: Queryable, orgId: string, idOrName: string): Promise<ProviderRow | undefined> {
  const { rows } = await db.query<ProviderRow>(`SELECT ${COLUMNS} FROM credential_providers WHERE ${BY_ID_OR_NAME}`, [
    orgId,
    idOrName,
    foldName(idOrName),
  ]);
  return rows[0];
}

/** The row with its sealed token; `forUpdate` locks it until the transaction ends. */
export async function findProviderWithToken(
  db: Queryable,
  orgId: string,
  idOrName: string,
  options: { forUpdate: boolean },
): Promise<ProviderRowWithToken | undefined> {
  const { rows } = await db.query<ProviderRowWithToken>(
    `SELECT ${COLUMNS}, token_sealed FROM credential_providers WHERE ${BY_ID_OR_NAME} ${options.forUpdate ? 'FOR UPDATE' : ''}`,
    [orgId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

/** Lowest priority first, then newest; `limit + 1` rows so the caller knows whether more follow. */
export async function listProviders(
  db: Queryable,
  orgId: string,
  filter: { query?: string | undefined; limit: number; offset: number },
): Promise<ProviderRow[]> {
  const { rows } = await db.query<ProviderRow>(
    `SELECT ${COLUMNS} FROM credential_providers
      WHERE org_id = $1 AND ($2::text IS NULL OR name_key LIKE '%' || $3 || '%' ESCAPE '\\' OR id = $2)
      ORDER BY priority ASC, created_at DESC, seq DESC
      LIMIT $4 OFFSET $5`,
    [orgId, filter.query ?? null, filter.query === undefined ? null : escapeLike(foldName(filter.query)), filter.limit + 1, filter.offset],
  );
  return rows;
}

export async function countOrgProviders(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM credential_providers WHERE org_id = $1', [orgId]);
  return rows[0]?.n ?? 0;
}

export interface ProviderChange {
  name?: string | undefined;
  connectUrl?: string | undefined;
  tokenSealed?: string | undefined;
  cacheTtlSeconds?: number | undefined;
  enabled?: boolean | undefined;
  priority?: number | undefined;
  now: Date;
}

/** Applies the fields given (undefined keeps a column as it is). */
export async function updateProvider(db: Queryable, id: string, change: ProviderChange): Promise<ProviderRow> {
  const { rows } = await db.query<ProviderRow>(
    `UPDATE credential_providers SET
        name = COALESCE($2, name),
        name_key = COALESCE($3, name_key),
        connect_url = COALESCE($4, connect_url),
        token_sealed = COALESCE($5, token_sealed),
        cache_ttl_seconds = COALESCE($6, cache_ttl_seconds),
        enabled = COALESCE($7, enabled),
        priority = COALESCE($8, priority),
        updated_at = $9
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [
      id,
      change.name ?? null,
      change.name === undefined ? null : foldName(change.name),
      change.connectUrl ?? null,
      change.tokenSealed ?? null,
      change.cacheTtlSeconds ?? null,
      change.enabled ?? null,
      change.priority ?? null,
      change.now,
    ],
  );
  return rows[0]!;
}

/** Hard delete: the sealed token goes with the row. False when nothing matched. */
export async function deleteProvider(db: Queryable, orgId: string, idOrName: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM credential_providers WHERE id = (SELECT id FROM credential_providers WHERE ${BY_ID_OR_NAME})`,
    [orgId, idOrName, foldName(idOrName)],
  );
  return rowCount === 1;
}
