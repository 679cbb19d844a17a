import type { AppDeps } from '../../app-deps.js';
import { AppError, notFound } from '../../http/errors.js';
import type { OrgScope } from '../../scope.js';
import { cacheOf } from './cache.js';
import { ConnectError, getItem, listVaultItems, listVaults, scimString, type ConnectItemSummary, type ConnectLimits, type ConnectServer, type ConnectVault } from './connect-client.js';
import { byPath, domainFit, itemSecrets, presentItem, splitPath, type ItemSecrets, type ProviderItem } from './items.js';
import { openProvider } from './service.js';
import { providerSettings } from './settings.js';
import type { ProviderRow } from './store.js';

/**
 * What a provider's server is asked: the test (its vaults), its items, and at login time
 * the values of one item. Answers are cached in this replica's memory for the provider's
 * cache_ttl_seconds (the test is never cached: it checks the server as it is now).
 */

type Deps = Pick<AppDeps, 'db' | 'clock' | 'sealer' | 'settings' | 'proxy'>;

/** Item categories that hold logins; the listing shows only these. */
const LOGIN_CATEGORIES = new Set(['LOGIN', 'PASSWORD']);

interface Opened {
  row: ProviderRow;
  server: ConnectServer;
  limits: ConnectLimits;
}

async function open(deps: Deps, orgId: string, idOrName: string): Promise<Opened | undefined> {
  const opened = await openProvider(deps, orgId, idOrName);
  if (!opened) return undefined;
  const settings = providerSettings(deps);
  return {
    row: opened.row,
    server: { url: opened.row.connect_url, token: opened.token },
    limits: { timeoutMs: settings.timeoutMs, maxResponseBytes: settings.maxResponseBytes, egress: deps.proxy.egress },
  };
}

/** A cache key of this provider as it is now: any change to the row makes new keys. */
const keyOf = (p: Opened, what: string) => `${p.row.id}:${p.row.updated_at.getTime()}:${what}`;

export async function testProvider(deps: Deps, scope: OrgScope, idOrName: string) {
  const p = await open(deps, scope.orgId, idOrName);
  if (!p) throw notFound('Credential provider', idOrName);
  try {
    const vaults = await listVaults(p.server, p.limits);
    return { success: true, vaults: vaults.map(({ id, name }) => ({ id, name })) };
  } catch (error) {
    if (error instanceof ConnectError) return { success: false, vaults: [], error: error.message };
    throw error;
  }
}

const vaultsOf = (deps: Deps, p: Opened) => cacheOf(deps).getOrLoad(keyOf(p, 'vaults'), p.row.cache_ttl_seconds, () => listVaults(p.server, p.limits));

/** Every login item of every vault, bounded by BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_ITEMS. */
function itemsOf(deps: Deps, p: Opened): Promise<Array<{ item: ConnectItemSummary; vault: ConnectVault }>> {
  return cacheOf(deps).getOrLoad(keyOf(p, 'items'), p.row.cache_ttl_seconds, async () => {
    const max = providerSettings(deps).maxItems;
    const all: Array<{ item: ConnectItemSummary; vault: ConnectVault }> = [];
    for (const vault of await vaultsOf(deps, p)) {
      for (const item of await listVaultItems(p.server, vault.id, p.limits)) {
        if (item.category !== undefined && !LOGIN_CATEGORIES.has(item.category)) continue;
        all.push({ item, vault });
        if (all.length > max) {
          throw new ConnectError(`The provider holds more than ${max} login items (BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_ITEMS)`, 'bad_answer');
        }
      }
    }
    return all;
  });
}

/**
 * A Connect failure on an API call: 424, the request was fine but the server it depends on
 * failed (as the Chrome Web Store's 424); x-should-retry tells the SDK to retry only when
 * that server could not be reached. Not a 5xx: this service did not fail.
 */
const upstreamFailed = (error: ConnectError) =>
  new AppError(424, 'credential_provider_error', error.message, { shouldRetry: error.reason === 'unreachable' });

export async function listProviderItems(deps: Deps, scope: OrgScope, idOrName: string): Promise<{ items: ProviderItem[] }> {
  const p = await open(deps, scope.orgId, idOrName);
  if (!p) throw notFound('Credential provider', idOrName);
  try {
    return { items: (await itemsOf(deps, p)).map(({ item, vault }) => presentItem(item, vault.name)).sort(byPath) };
  } catch (error) {
    if (error instanceof ConnectError) throw upstreamFailed(error);
    throw error;
  }
}

/** Why a login could not take its values from a provider; the flow fails with this code and message. */
export class ProviderLoginError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ProviderLoginError';
  }
}

/** How an auth connection names a provider's item: by path, or by its own domain. */
export interface ProviderRef {
  provider: string;
  path?: string | undefined;
  auto?: boolean | undefined;
}

/**
 * The login values of the item an auth connection names, fetched from the provider now
 * (or from this replica's memory within cache_ttl_seconds). Nothing is written anywhere.
 */
export async function resolveProviderSecrets(deps: Deps, orgId: string, ref: ProviderRef, domain: string): Promise<ItemSecrets & { path: string }> {
  const p = await open(deps, orgId, ref.provider);
  if (!p) throw new ProviderLoginError('credential_provider_not_found', `The credential provider ${JSON.stringify(ref.provider)} no longer exists`);
  if (!p.row.enabled) throw new ProviderLoginError('credential_provider_disabled', `The credential provider ${JSON.stringify(p.row.name)} is disabled`);
  try {
    const { item, vault } = ref.path !== undefined ? await itemAtPath(deps, p, ref.path) : await itemForDomain(deps, p, domain);
    const full = await cacheOf(deps).getOrLoad(keyOf(p, `item:${vault.id}/${item.id}`), p.row.cache_ttl_seconds, () =>
      getItem(p.server, vault.id, item.id, p.limits),
    );
    const secrets = itemSecrets(full);
    const path = `${vault.name}/${item.title}`;
    if (Object.keys(secrets.values).length === 0 && secrets.totpSecret === null) {
      throw new ProviderLoginError('credential_provider_item_empty', `The item ${JSON.stringify(path)} holds no username, password or one-time password`);
    }
    return { ...secrets, path };
  } catch (error) {
    if (error instanceof ConnectError) throw new ProviderLoginError('credential_provider_error', `The credential provider ${JSON.stringify(p.row.name)} failed: ${error.message}`);
    throw error;
  }
}

async function itemAtPath(deps: Deps, p: Opened, path: string): Promise<{ item: ConnectItemSummary; vault: ConnectVault }> {
  const found: Array<{ item: ConnectItemSummary; vault: ConnectVault }> = [];
  for (const { vault, item: wanted } of splitPath(path, await vaultsOf(deps, p))) {
    const byTitle = await cacheOf(deps).getOrLoad(keyOf(p, `title:${vault.id}/${wanted}`), p.row.cache_ttl_seconds, () =>
      listVaultItems(p.server, vault.id, p.limits, `title eq ${scimString(wanted)}`),
    );
    for (const item of byTitle) if (item.title === wanted) found.push({ item, vault });
  }
  if (found.length === 0) throw new ProviderLoginError('credential_provider_item_not_found', `No item of the credential provider ${JSON.stringify(p.row.name)} is at ${JSON.stringify(path)} (VaultName/ItemTitle)`);
  if (found.length > 1) throw new ProviderLoginError('credential_provider_item_ambiguous', `${found.length} items of the credential provider ${JSON.stringify(p.row.name)} are at ${JSON.stringify(path)}; rename one`);
  return found[0]!;
}

async function itemForDomain(deps: Deps, p: Opened, domain: string): Promise<{ item: ConnectItemSummary; vault: ConnectVault }> {
  const ranked = (await itemsOf(deps, p)).map((entry) => ({ ...entry, fit: domainFit(entry.item, domain) })).filter((e) => e.fit > 0);
  const best = Math.max(0, ...ranked.map((e) => e.fit));
  const top = ranked.filter((e) => e.fit === best);
  if (top.length === 0) throw new ProviderLoginError('credential_provider_item_not_found', `No login item of the credential provider ${JSON.stringify(p.row.name)} has a website on ${domain}`);
  if (top.length > 1) {
    const paths = top.slice(0, 5).map((e) => `${e.vault.name}/${e.item.title}`).join(', ');
    throw new ProviderLoginError('credential_provider_item_ambiguous', `${top.length} login items of the credential provider ${JSON.stringify(p.row.name)} fit ${domain} (${paths}); name one with credential.path`);
  }
  return top[0]!;
}
