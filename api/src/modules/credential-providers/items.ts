import { URI } from 'otpauth';
import { normaliseTotpSecret, totpSecretProblem, type TotpAlgorithm, type TotpOptions } from '../credentials/totp.js';
import type { ConnectItem, ConnectItemSummary, ConnectVault } from './connect-client.js';

/**
 * What a provider's items mean to Browserplane, without I/O: the listing the API shows,
 * which item a path or a domain names, and the login values inside a full item.
 */

/** An item as GET /org/credential_providers/{id}/items shows it. */
export interface ProviderItem {
  id: string;
  path: string;
  title: string;
  vault_id: string;
  vault_name: string;
  urls?: string[];
}

export function presentItem(item: ConnectItemSummary, vaultName: string): ProviderItem {
  const urls = (item.urls ?? []).map((u) => u.href).filter((href) => href !== '');
  return {
    id: item.id,
    path: `${vaultName}/${item.title}`,
    title: item.title,
    vault_id: item.vault.id,
    vault_name: vaultName,
    ...(urls.length > 0 ? { urls } : {}),
  };
}

/** Stable order for listings: by vault name, then title, then id. */
export const byPath = (a: ProviderItem, b: ProviderItem) =>
  a.vault_name.localeCompare(b.vault_name) || a.title.localeCompare(b.title) || a.id.localeCompare(b.id);

/**
 * The ways a path "Vault/Item" can be split: a vault (by name or id) whose name is a
 * prefix of the path before a "/", and the rest as the item's title or id. Vault names
 * and titles may hold "/" themselves, so every vault that fits is a candidate.
 */
export function splitPath(path: string, vaults: ConnectVault[]): Array<{ vault: ConnectVault; item: string }> {
  const out: Array<{ vault: ConnectVault; item: string }> = [];
  for (const vault of vaults) {
    for (const key of new Set([vault.name, vault.id])) {
      if (path.startsWith(`${key}/`) && path.length > key.length + 1) out.push({ vault, item: path.slice(key.length + 1) });
    }
  }
  return out;
}

/** The host of an item URL; 1Password keeps URLs as typed, often without a scheme. */
export function hostOf(href: string): string | undefined {
  const text = href.trim();
  if (text === '') return undefined;
  try {
    const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `https://${text}`);
    return url.hostname.toLowerCase().replace(/\.$/, '') || undefined;
  } catch {
    return undefined;
  }
}

/**
 * How well an item's URLs fit a connection's domain: 2 when a URL's host is the domain,
 * 1 when it is a subdomain of it or the domain a subdomain of it (login.example.com and
 * example.com), 0 otherwise.
 */
export function domainFit(item: Pick<ConnectItemSummary, 'urls'>, domain: string): number {
  let best = 0;
  for (const url of item.urls ?? []) {
    const host = hostOf(url.href);
    if (host === undefined) continue;
    if (host === domain) return 2;
    if (host.endsWith(`.${domain}`) || domain.endsWith(`.${host}`)) best = 1;
  }
  return best;
}

/** Login values of a full item, as the login-flow engine takes a stored credential's. */
export interface ItemSecrets {
  values: Record<string, string>;
  totpSecret: string | null;
  totpOptions?: TotpOptions | undefined;
}

const field = (item: ConnectItem, test: (f: NonNullable<ConnectItem['fields']>[number]) => boolean) =>
  (item.fields ?? []).find((f) => test(f) && f.value !== undefined && f.value !== '');

const labelled = (label: string | undefined, ...names: string[]) => names.includes((label ?? '').trim().toLowerCase());

/**
 * The username (the USERNAME-purpose field, else one labelled username or email), the
 * password (PASSWORD purpose, else a concealed field labelled password) and the TOTP
 * secret of the first OTP field (an otpauth:// URI or a bare base32 secret).
 */
export function itemSecrets(item: ConnectItem): ItemSecrets {
  const values: Record<string, string> = {};
  const username = field(item, (f) => f.purpose === 'USERNAME') ?? field(item, (f) => labelled(f.label, 'username', 'email', 'login'));
  const password = field(item, (f) => f.purpose === 'PASSWORD') ?? field(item, (f) => f.type === 'CONCEALED' && labelled(f.label, 'password'));
  if (username?.value !== undefined) values.username = username.value;
  if (password?.value !== undefined) values.password = password.value;
  const otp = field(item, (f) => f.type === 'OTP' || f.type === 'TOTP');
  const totp = otp?.value === undefined ? undefined : parseOtp(otp.value);
  return { values, totpSecret: totp?.secret ?? null, ...(totp ? { totpOptions: totp.options } : {}) };
}

const ALGORITHMS: readonly TotpAlgorithm[] = ['SHA1', 'SHA256', 'SHA512'];

/** An OTP field's value: `otpauth://totp/...?secret=...` (its algorithm, digits and period kept) or a bare base32 secret. */
export function parseOtp(value: string): { secret: string; options: TotpOptions } | undefined {
  if (/^otpauth:\/\//i.test(value.trim())) {
    try {
      const otp = URI.parse(value.trim());
      if (!('period' in otp)) return undefined; // HOTP counters cannot be generated unattended
      const algorithm = ALGORITHMS.find((a) => a === otp.algorithm.toUpperCase());
      if (!algorithm) return undefined;
      return { secret: otp.secret.base32, options: { algorithm, digits: otp.digits, periodSeconds: otp.period } };
    } catch {
      return undefined;
    }
  }
  const secret = normaliseTotpSecret(value);
  return totpSecretProblem(secret) === undefined ? { secret, options: { algorithm: 'SHA1', digits: 6, periodSeconds: 30 } } : undefined;
}
