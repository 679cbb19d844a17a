import { z } from 'zod';

/**
 * Settings of external credential providers (docs/credential-providers.md): the default
 * 1Password Connect server and the bounds of every call to one. Spread into config.ts's
 * schema; credentialProviderSettingsOf turns them into the app's settings.
 */
const optionalUrl = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .pipe(z.url({ protocol: /^https?$/ }).optional());

const bounded = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const credentialProviderFields = {
  BROWSERPLANE_ONEPASSWORD_CONNECT_URL: optionalUrl.describe(
    'Base URL of the 1Password Connect server used by onepassword credential providers created without connect_url (e.g. http://onepassword-connect:8080); unset, connect_url is required',
  ),
  BROWSERPLANE_CREDENTIAL_PROVIDER_TIMEOUT_MS: bounded(100, 120_000)
    .default(10_000)
    .describe('How long one call to a credential provider (1Password Connect) may take, connect to last byte'),
  BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_RESPONSE_BYTES: bounded(1024, 256 * 1024 * 1024)
    .default(8 * 1024 * 1024)
    .describe('Largest answer read from a credential provider, in bytes; a larger one fails the call'),
  BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_ITEMS: bounded(1, 1_000_000)
    .default(5000)
    .describe('Most items one credential provider lists across its vaults (GET /org/credential_providers/{id}/items, lookups by domain); past it the listing fails'),
  BROWSERPLANE_CREDENTIAL_PROVIDERS_PER_ORG: bounded(1, 10_000).default(50).describe('Most credential providers one organisation may configure'),
};

type Fields = z.output<z.ZodObject<typeof credentialProviderFields>>;

/** What the credential-providers module reads (AppSettings.credentialProviders); absent fields take their defaults. */
export interface CredentialProviderSettings {
  defaultConnectUrl?: string | undefined;
  timeoutMs?: number | undefined;
  maxResponseBytes?: number | undefined;
  maxItems?: number | undefined;
  maxPerOrg?: number | undefined;
}

export function credentialProviderSettingsOf(config: Fields): CredentialProviderSettings {
  return {
    defaultConnectUrl: config.BROWSERPLANE_ONEPASSWORD_CONNECT_URL,
    timeoutMs: config.BROWSERPLANE_CREDENTIAL_PROVIDER_TIMEOUT_MS,
    maxResponseBytes: config.BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_RESPONSE_BYTES,
    maxItems: config.BROWSERPLANE_CREDENTIAL_PROVIDER_MAX_ITEMS,
    maxPerOrg: config.BROWSERPLANE_CREDENTIAL_PROVIDERS_PER_ORG,
  };
}
