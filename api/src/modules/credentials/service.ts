import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction, onUniqueViolation } from '../../db/pool.js';
import { badRequest, conflict, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import { shareLockLiveProject } from '../projects/store.js';
import { MAX_VALUE_KEYS } from './schema.js';
import {
  countProjectCredentialRows,
  deleteCredential,
  findCredential,
  findCredentialWithSecrets,
  insertCredential,
  updateCredential,
  type CredentialChange,
  type CredentialRow,
  type Scope,
  type SealedSecrets,
  totpOptionsOf,
} from './store.js';
import { DEFAULT_TOTP, totpCodeAt, type TotpAlgorithm, type TotpCode, type TotpOptions } from './totp.js';

type Deps = Pick<AppDeps, 'db' | 'clock' | 'sealer'>;
type Values = Record<string, string>;

/** A credential as the API shows it; `totp` only right after a secret was set. */
export interface CredentialView {
  row: CredentialRow;
  totp?: TotpCode | undefined;
}

const withoutSecrets = ({ values_sealed: _v, totp_secret_sealed: _t, ...row }: CredentialRow & SealedSecrets): CredentialRow =>
  row;

/** Sealing contexts bind each ciphertext to its row and field. */
const valuesContext = (id: string) => `credential:${id}:values`;
const totpContext = (id: string) => `credential:${id}:totp`;

export function presentCredential({ row, totp }: CredentialView, options: { withValueKeys: boolean } = { withValueKeys: true }) {
  return {
    id: row.id,
    name: row.name,
    domain: row.domain,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    has_values: row.value_keys.length > 0,
    has_totp_secret: row.has_totp_secret,
    sso_provider: row.sso_provider,
    totp_algorithm: row.totp_algorithm,
    totp_digits: row.totp_digits,
    totp_period: row.totp_period,
    ...(options.withValueKeys ? { value_keys: row.value_keys } : {}),
    ...(totp ? { totp_code: totp.code, totp_code_expires_at: totp.expiresAt.toISOString() } : {}),
  };
}

export const presentListedCredential = (row: CredentialRow) => presentCredential({ row }, { withValueKeys: false });

const nameTaken = (name: string) =>
  conflict('credential_name_taken', `A credential named ${JSON.stringify(name)} already exists in this project`);

function uniqueName<T>(name: string | undefined, write: () => Promise<T>): Promise<T> {
  return name === undefined ? write() : onUniqueViolation(write, () => nameTaken(name));
}

/** "" and null both mean "no SSO provider". */
const ssoOrNull = (value: string | null | undefined) => (value ? value : null);

export interface CreateInput {
  name: string;
  domain: string;
  values: Values;
  sso_provider?: string | null | undefined;
  totp_secret?: string | undefined;
  totp_algorithm?: TotpAlgorithm | undefined;
  totp_digits?: number | undefined;
  totp_period?: number | undefined;
}

/** The TOTP options a request gives, undefined where it gives none. */
const totpOptionsIn = (input: Pick<CreateInput, 'totp_algorithm' | 'totp_digits' | 'totp_period'>): Partial<TotpOptions> => ({
  ...(input.totp_algorithm !== undefined ? { algorithm: input.totp_algorithm } : {}),
  ...(input.totp_digits !== undefined ? { digits: input.totp_digits } : {}),
  ...(input.totp_period !== undefined ? { periodSeconds: input.totp_period } : {}),
});

export async function createCredential(deps: Deps, scope: Scope, input: CreateInput): Promise<CredentialView> {
  const id = newId('cred');
  const now = deps.clock.now();
  const secret = input.totp_secret ? input.totp_secret : undefined;
  const totpOptions: TotpOptions = { ...DEFAULT_TOTP, ...totpOptionsIn(input) };
  const row = await inTransaction(deps.db, async (tx) => {
    // The share lock keeps a concurrent project delete from missing this credential.
    if (!(await shareLockLiveProject(tx, scope.orgId, scope.projectId))) throw notFound('Project', scope.projectId);
    return uniqueName(input.name, () =>
      insertCredential(tx, scope, {
        id,
        name: input.name,
        domain: input.domain,
        ssoProvider: ssoOrNull(input.sso_provider),
        valueKeys: Object.keys(input.values),
        valuesSealed: deps.sealer.seal(JSON.stringify(input.values), valuesContext(id)),
        totpSecretSealed: secret === undefined ? null : deps.sealer.seal(secret, totpContext(id)),
        totp: totpOptions,
        now,
      }),
    );
  });
  return { row, totp: secret === undefined ? undefined : totpCodeAt(secret, now, totpOptions) };
}

export async function getCredential(deps: Pick<Deps, 'db'>, scope: Scope, idOrName: string): Promise<CredentialRow> {
  const row = await findCredential(deps.db, scope, idOrName);
  if (!row) throw notFound('Credential', idOrName);
  return row;
}

export interface UpdateInput {
  name?: string | undefined;
  values?: Values | undefined;
  remove_value_keys?: string[] | undefined;
  sso_provider?: string | null | undefined;
  totp_secret?: string | undefined;
  totp_algorithm?: TotpAlgorithm | undefined;
  totp_digits?: number | undefined;
  totp_period?: number | undefined;
}

/**
 * Applies a PATCH: removals first, then `values` merged in (new keys added, existing
 * ones overwritten). The row stays locked from read to write, so concurrent merges
 * cannot lose each other's keys.
 */
export async function changeCredential(
  deps: Deps,
  scope: Scope,
  idOrName: string,
  input: UpdateInput,
): Promise<CredentialView> {
  const now = deps.clock.now();
  return inTransaction(deps.db, async (tx) => {
    const current = await findCredentialWithSecrets(tx, scope, idOrName, { forUpdate: true });
    if (!current) throw notFound('Credential', idOrName);
    if (Object.values(input).every((v) => v === undefined)) return { row: withoutSecrets(current) };

    const change: CredentialChange = { name: input.name, now };
    if (input.sso_provider !== undefined) change.ssoProvider = ssoOrNull(input.sso_provider);
    if (input.values !== undefined || input.remove_value_keys !== undefined) {
      const merged = mergeValues(
        JSON.parse(deps.sealer.open(current.values_sealed, valuesContext(current.id))) as Values,
        input,
      );
      change.values = { keys: Object.keys(merged), sealed: deps.sealer.seal(JSON.stringify(merged), valuesContext(current.id)) };
    }
    change.totp = totpOptionsIn(input);
    if (input.totp_secret !== undefined) {
      change.totpSecretSealed = input.totp_secret === '' ? null : deps.sealer.seal(input.totp_secret, totpContext(current.id));
    }
    const row = await uniqueName(input.name, () => updateCredential(tx, current.id, change));
    // A new secret or new options change the codes: show the caller the one now current.
    const secret =
      input.totp_secret !== undefined
        ? input.totp_secret || undefined
        : Object.keys(change.totp).length > 0 && current.totp_secret_sealed !== null
          ? deps.sealer.open(current.totp_secret_sealed, totpContext(current.id))
          : undefined;
    return { row, totp: secret === undefined ? undefined : totpCodeAt(secret, now, totpOptionsOf(row)) };
  });
}

/** Removals, then the merge. A removed key that is not stored is ignored, so a retried PATCH is harmless. */
export function mergeValues(stored: Values, input: Pick<UpdateInput, 'values' | 'remove_value_keys'>): Values {
  const removed = new Set(input.remove_value_keys ?? []);
  const kept = Object.fromEntries(Object.entries(stored).filter(([key]) => !removed.has(key)));
  const merged: Values = { ...kept, ...input.values };
  if (Object.keys(merged).length > MAX_VALUE_KEYS) {
    throw badRequest('too_many_values', `A credential holds at most ${MAX_VALUE_KEYS} values`, [
      { code: 'too_big', field: 'body.values', message: `body.values: the merged values would exceed ${MAX_VALUE_KEYS} keys` },
    ]);
  }
  return merged;
}

export async function removeCredential(deps: Pick<Deps, 'db'>, scope: Scope, idOrName: string): Promise<void> {
  if (!(await deleteCredential(deps.db, scope, idOrName))) throw notFound('Credential', idOrName);
}

/** The code current at the service's clock. */
export async function currentTotpCode(deps: Deps, scope: Scope, idOrName: string): Promise<TotpCode> {
  const found = await findCredentialWithSecrets(deps.db, scope, idOrName, { forUpdate: false });
  if (!found) throw notFound('Credential', idOrName);
  if (found.totp_secret_sealed === null) {
    throw conflict(
      'totp_not_configured',
      `Credential ${JSON.stringify(idOrName)} has no TOTP secret; set totp_secret with PATCH /credentials/{id_or_name} first`,
    );
  }
  return totpCodeAt(deps.sealer.open(found.totp_secret_sealed, totpContext(found.id)), deps.clock.now(), totpOptionsOf(found));
}

/**
 * The opened secrets of a credential, for modules that log in with it (auth
 * connections). Never hand these to a response or a log line.
 */
export async function openCredentialSecrets(
  deps: Deps,
  scope: Scope,
  idOrName: string,
): Promise<{ row: CredentialRow; values: Values; totpSecret: string | null } | undefined> {
  const found = await findCredentialWithSecrets(deps.db, scope, idOrName, { forUpdate: false });
  if (!found) return undefined;
  const { values_sealed, totp_secret_sealed, ...row } = found;
  return {
    row,
    values: JSON.parse(deps.sealer.open(values_sealed, valuesContext(row.id))) as Values,
    totpSecret: totp_secret_sealed === null ? null : deps.sealer.open(totp_secret_sealed, totpContext(row.id)),
  };
}

/** Stored credentials keep their project from being deleted: deleting them is a deliberate act. */
export const countProjectCredentials: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'credentials',
  count: await countProjectCredentialRows(db, projectId),
});
