import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';
import type { TotpAlgorithm, TotpOptions } from './totp.js';

/** What reads return: everything but the sealed secrets. */
export interface CredentialRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string;
  domain: string;
  sso_provider: string | null;
  value_keys: string[];
  has_totp_secret: boolean;
  totp_algorithm: TotpAlgorithm;
  totp_digits: number;
  totp_period: number;
  created_at: Date;
  updated_at: Date;
}

/** The sealed columns, read only where a secret is needed (updates, TOTP codes). */
export interface SealedSecrets {
  values_sealed: string;
  totp_secret_sealed: string | null;
}

export interface Scope {
  orgId: string;
  projectId: string;
}

const COLUMNS = `id, org_id, project_id, name, domain, sso_provider, value_keys,
  totp_secret_sealed IS NOT NULL AS has_totp_secret, totp_algorithm, totp_digits, totp_period, created_at, updated_at`;

/** The stored TOTP options of a row, as code generation takes them. */
export const totpOptionsOf = (row: CredentialRow): TotpOptions => ({
  algorithm: row.totp_algorithm,
  digits: row.totp_digits,
  periodSeconds: row.totp_period,
});

export interface NewCredential {
  id: string;
  name: string;
  domain: string;
  ssoProvider: string | null;
  valueKeys: string[];
  valuesSealed: string;
  totpSecretSealed: string | null;
  totp: TotpOptions;
  now: Date;
}

export async function insertCredential(db: Queryable, scope: Scope, input: NewCredential): Promise<CredentialRow> {
  const { rows } = await db.query<CredentialRow>(
    `INSERT INTO credentials (id, org_id, project_id, name, name_key, domain, sso_provider, value_keys,
                              values_sealed, totp_secret_sealed, totp_algorithm, totp_digits, totp_period,
                              created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $12, $13, $14, $11, $11) RETURNING ${COLUMNS}`,
    [
      input.id,
      scope.orgId,
      scope.projectId,
      input.name,
      foldName(input.name),
      input.domain,
      input.ssoProvider,
      input.valueKeys,
      input.valuesSealed,
      input.totpSecretSealed,
      input.now,
      input.totp.algorithm,
      input.totp.digits,
      input.totp.periodSeconds,
    ],
  );
  return rows[0]!;
}

/** A credential of the project by id or by (case- and accent-insensitive) name. */
export async function findCredential(db: Queryable, scope: Scope, idOrName: string): Promise<CredentialRow | undefined> {
  const { rows } = await db.query<CredentialRow>(
    `SELECT ${COLUMNS} FROM credentials
      WHERE org_id = $1 AND project_id = $2 AND (id = $3 OR name_key = $4)
      ORDER BY (id = $3) DESC LIMIT 1`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

/**
 * The row with its sealed secrets. `forUpdate` locks it until the transaction ends, for
 * read-modify-write.
 */
export async function findCredentialWithSecrets(
  db: Queryable,
  scope: Scope,
  idOrName: string,
  options: { forUpdate: boolean },
): Promise<(CredentialRow & SealedSecrets) | undefined> {
  const { rows } = await db.query<CredentialRow & SealedSecrets>(
    `SELECT ${COLUMNS}, values_sealed, totp_secret_sealed FROM credentials
      WHERE org_id = $1 AND project_id = $2 AND (id = $3 OR name_key = $4)
      ORDER BY (id = $3) DESC LIMIT 1 ${options.forUpdate ? 'FOR UPDATE' : ''}`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rows[0];
}

export interface CredentialFilter {
  domain?: string | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

/** Newest first; `limit + 1` rows so the caller knows whether more follow. */
export async function listCredentials(db: Queryable, scope: Scope, filter: CredentialFilter): Promise<CredentialRow[]> {
  const { rows } = await db.query<CredentialRow>(
    `SELECT ${COLUMNS} FROM credentials
      WHERE org_id = $1 AND project_id = $2
        AND ($3::text IS NULL OR domain = $3)
        AND ($4::text IS NULL
             OR name_key LIKE '%' || $5 || '%' ESCAPE '\\'
             OR domain LIKE '%' || $6 || '%' ESCAPE '\\'
             OR id = $4)
      ORDER BY created_at DESC, seq DESC
      LIMIT $7 OFFSET $8`,
    [
      scope.orgId,
      scope.projectId,
      filter.domain ?? null,
      filter.query ?? null,
      filter.query === undefined ? null : escapeLike(foldName(filter.query)),
      filter.query === undefined ? null : escapeLike(filter.query.toLowerCase()),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

export interface CredentialChange {
  name?: string | undefined;
  ssoProvider?: string | null | undefined;
  values?: { keys: string[]; sealed: string } | undefined;
  /** A sealed secret, null to remove it, undefined to keep it. */
  totpSecretSealed?: string | null | undefined;
  /** The options given; absent ones stay as they are. */
  totp?: Partial<TotpOptions> | undefined;
  now: Date;
}

/** Applies the fields given (undefined keeps a column as it is). */
export async function updateCredential(db: Queryable, id: string, change: CredentialChange): Promise<CredentialRow> {
  const { rows } = await db.query<CredentialRow>(
    `UPDATE credentials SET
        name = COALESCE($2, name),
        name_key = COALESCE($3, name_key),
        sso_provider = CASE WHEN $4 THEN $5 ELSE sso_provider END,
        value_keys = COALESCE($6, value_keys),
        values_sealed = COALESCE($7, values_sealed),
        totp_secret_sealed = CASE WHEN $8 THEN $9 ELSE totp_secret_sealed END,
        updated_at = $10,
        totp_algorithm = COALESCE($11, totp_algorithm),
        totp_digits = COALESCE($12, totp_digits),
        totp_period = COALESCE($13, totp_period)
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [
      id,
      change.name ?? null,
      change.name === undefined ? null : foldName(change.name),
      change.ssoProvider !== undefined,
      change.ssoProvider ?? null,
      change.values?.keys ?? null,
      change.values?.sealed ?? null,
      change.totpSecretSealed !== undefined,
      change.totpSecretSealed ?? null,
      change.now,
      change.totp?.algorithm ?? null,
      change.totp?.digits ?? null,
      change.totp?.periodSeconds ?? null,
    ],
  );
  return rows[0]!;
}

/** Hard delete: the sealed secrets go with the row. False when nothing matched. */
export async function deleteCredential(db: Queryable, scope: Scope, idOrName: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM credentials WHERE id = (
       SELECT id FROM credentials
        WHERE org_id = $1 AND project_id = $2 AND (id = $3 OR name_key = $4)
        ORDER BY (id = $3) DESC LIMIT 1)`,
    [scope.orgId, scope.projectId, idOrName, foldName(idOrName)],
  );
  return rowCount === 1;
}

export async function countProjectCredentialRows(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM credentials WHERE project_id = $1', [
    projectId,
  ]);
  return rows[0]?.n ?? 0;
}
