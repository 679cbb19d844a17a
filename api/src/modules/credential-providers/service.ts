import type { AppDeps } from '../../app-deps.js';
import { inTransaction, onUniqueViolation, type Queryable } from '../../db/pool.js';
import { AppError, badRequest, conflict, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { OrgScope } from '../../scope.js';
import { cacheOf } from './cache.js';
import { DEFAULT_CACHE_TTL_SECONDS, type CreateProviderInput, type UpdateProviderInput } from './schema.js';
import { providerSettings } from './settings.js';
import {
  countOrgProviders,
  deleteProvider,
  findProvider,
  findProviderWithToken,
  insertProvider,
  updateProvider,
  type ProviderRow,
  type ProviderRowWithToken,
} from './store.js';

type Deps = Pick<AppDeps, 'db' | 'clock' | 'sealer' | 'settings'>;

/** The sealing context binds the token's ciphertext to its row. */
export const tokenContext = (id: string) => `credential-provider:${id}:token`;

export function presentProvider(row: ProviderRow) {
  return {
    id: row.id,
    name: row.name,
    provider_type: row.provider_type,
    enabled: row.enabled,
    priority: row.priority,
    connect_url: row.connect_url,
    cache_ttl_seconds: row.cache_ttl_seconds,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

const nameTaken = (name: string) =>
  conflict('credential_provider_name_taken', `A credential provider named ${JSON.stringify(name)} already exists in this organisation`, [
    { code: 'taken', field: 'body.name', message: 'body.name: already used by another credential provider of the organisation' },
  ]);

const uniqueName = <T>(name: string | undefined, write: () => Promise<T>): Promise<T> =>
  name === undefined ? write() : onUniqueViolation(write, () => nameTaken(name));

/** The Connect server a new provider talks to: its own connect_url, else the service's default. */
function connectUrlFor(deps: Deps, given: string | undefined): string {
  const url = given ?? providerSettings(deps).defaultConnectUrl?.replace(/\/+$/, '');
  if (url === undefined) {
    throw badRequest(
      'connect_url_required',
      'A onepassword provider needs the URL of your 1Password Connect server: send connect_url (e.g. http://onepassword-connect:8080), or have the service set BROWSERPLANE_ONEPASSWORD_CONNECT_URL',
      [{ code: 'required', field: 'body.connect_url', message: 'body.connect_url: required, as this service sets no default Connect server' }],
    );
  }
  return url;
}

export async function createProvider(deps: Deps, scope: OrgScope, input: CreateProviderInput): Promise<ProviderRow> {
  const id = newId('cpr');
  const connectUrl = connectUrlFor(deps, input.connect_url);
  const max = providerSettings(deps).maxPerOrg;
  return inTransaction(deps.db, async (tx) => {
    // The org row's lock makes the count and the insert one step against concurrent creates.
    await tx.query('SELECT id FROM orgs WHERE id = $1 FOR UPDATE', [scope.orgId]);
    if ((await countOrgProviders(tx, scope.orgId)) >= max) {
      throw new AppError(409, 'credential_provider_limit', `An organisation may configure at most ${max} credential providers (BROWSERPLANE_CREDENTIAL_PROVIDERS_PER_ORG)`, {
        shouldRetry: false,
      });
    }
    return uniqueName(input.name, () =>
      insertProvider(tx, scope.orgId, {
        id,
        name: input.name,
        providerType: input.provider_type,
        connectUrl,
        tokenSealed: deps.sealer.seal(input.token, tokenContext(id)),
        cacheTtlSeconds: input.cache_ttl_seconds ?? DEFAULT_CACHE_TTL_SECONDS,
        now: deps.clock.now(),
      }),
    );
  });
}

export async function getProvider(db: Queryable, scope: OrgScope, idOrName: string): Promise<ProviderRow> {
  const row = await findProvider(db, scope.orgId, idOrName);
  if (!row) throw notFound('Credential provider', idOrName);
  return row;
}

export async function changeProvider(deps: Deps, scope: OrgScope, idOrName: string, input: UpdateProviderInput): Promise<ProviderRow> {
  const row = await inTransaction(deps.db, async (tx) => {
    const current = await findProviderWithToken(tx, scope.orgId, idOrName, { forUpdate: true });
    if (!current) throw notFound('Credential provider', idOrName);
    if (Object.values(input).every((v) => v === undefined)) return current;
    return uniqueName(input.name, () =>
      updateProvider(tx, current.id, {
        name: input.name,
        connectUrl: input.connect_url,
        tokenSealed: input.token === undefined ? undefined : deps.sealer.seal(input.token, tokenContext(current.id)),
        cacheTtlSeconds: input.cache_ttl_seconds,
        enabled: input.enabled,
        priority: input.priority,
        now: deps.clock.now(),
      }),
    );
  });
  cacheOf(deps).forget(row.id);
  return withoutToken(row);
}

const withoutToken = (row: ProviderRow | ProviderRowWithToken): ProviderRow => {
  const { token_sealed: _t, ...rest } = row as ProviderRowWithToken;
  return rest;
};

export async function removeProvider(deps: Deps, scope: OrgScope, idOrName: string): Promise<void> {
  const row = await findProvider(deps.db, scope.orgId, idOrName);
  if (!row || !(await deleteProvider(deps.db, scope.orgId, row.id))) throw notFound('Credential provider', idOrName);
  cacheOf(deps).forget(row.id);
}

/** The provider with its token opened, for calls to its server. Never hand the token to a response or a log line. */
export async function openProvider(
  deps: Deps,
  orgId: string,
  idOrName: string,
): Promise<{ row: ProviderRow; token: string } | undefined> {
  const found = await findProviderWithToken(deps.db, orgId, idOrName, { forUpdate: false });
  if (!found) return undefined;
  return { row: withoutToken(found), token: deps.sealer.open(found.token_sealed, tokenContext(found.id)) };
}
