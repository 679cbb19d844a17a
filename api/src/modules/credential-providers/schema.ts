import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { labelSchema, lookupText, timestamp } from '../../http/schemas.js';

/** Kernel's default: credential lists are cached for 5 minutes. */
export const DEFAULT_CACHE_TTL_SECONDS = 300;
export const MAX_CACHE_TTL_SECONDS = 86_400;
export const MAX_TOKEN_CHARS = 8192;
/** The shape of our provider ids: a name of this shape could be shadowed by an id. */
export const PROVIDER_ID = /^cpr_[a-z2-7]{24}$/;

const providerName = labelSchema
  .refine((s) => !PROVIDER_ID.test(s), 'must not look like a credential provider id (cpr_ followed by 24 characters)')
  .describe('Name, 1 to 255 characters after trimming, unique in the organisation (case- and accent-insensitive); auth connections name the provider by it');

const token = z
  .string()
  .min(1)
  .max(MAX_TOKEN_CHARS)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')
  .describe('1Password Connect access token (sent as a Bearer token); sealed at rest, never returned');

const connectUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .refine((text) => {
    // Checks run after a failed one too: text that is no URL at all is that check's to report.
    if (!URL.canParse(text)) return true;
    const url = new URL(text);
    return url.username === '' && url.password === '' && url.search === '' && url.hash === '';
  }, 'must be an http(s) URL without user info, query or fragment')
  .transform((text) => text.replace(/\/+$/, ''))
  .describe(
    'Base URL of the self-hosted 1Password Connect server, e.g. http://onepassword-connect:8080 (without /v1). Required unless the service sets BROWSERPLANE_ONEPASSWORD_CONNECT_URL',
  );

const cacheTtl = z
  .number()
  .int()
  .min(0)
  .max(MAX_CACHE_TTL_SECONDS)
  .describe(`Seconds item lists and resolved items are kept in one replica's memory (0: never cached; never stored in the database), at most ${MAX_CACHE_TTL_SECONDS}`);

export const createProviderBody = z
  .strictObject({
    name: providerName,
    provider_type: z.enum(['onepassword']).describe('Type of provider: onepassword (1Password Connect)'),
    token,
    connect_url: connectUrl.optional(),
    cache_ttl_seconds: cacheTtl.optional().describe(`Cache lifetime in seconds (default ${DEFAULT_CACHE_TTL_SECONDS})`),
  })
  .meta({ id: 'CreateCredentialProviderRequest' });

export const updateProviderBody = z
  .strictObject({
    name: providerName.optional(),
    token: token.optional().describe('New access token (rotation); sealed at rest, never returned'),
    connect_url: connectUrl.optional(),
    cache_ttl_seconds: cacheTtl.optional(),
    enabled: z.boolean().optional().describe('Whether logins may use the provider; a disabled one fails them with credential_provider_disabled'),
    priority: z.number().int().min(-1_000_000).max(1_000_000).optional().describe('Lower numbers are listed first'),
  })
  .meta({ id: 'UpdateCredentialProviderRequest' });

export const providerParams = z.object({ id: lookupText.describe('Credential provider id or name') });

export const listProvidersQuery = z.object({
  ...paginationQuery,
  query: lookupText.optional().describe('Case-insensitive substring of the name, or an exact id'),
});

export const providerSchema = z
  .object({
    id: z.string().describe('Credential provider id (cpr_...)'),
    name: z.string().describe('Name, unique in the organisation'),
    provider_type: z.enum(['onepassword']).describe('Type of provider'),
    enabled: z.boolean().describe('Whether logins may use the provider'),
    priority: z.number().int().describe('Lower numbers are listed first'),
    connect_url: z.string().describe('Base URL of the 1Password Connect server'),
    cache_ttl_seconds: z.number().int().describe('Seconds item lists and resolved items are cached in memory'),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'CredentialProvider' });

export const providerTestSchema = z
  .object({
    success: z.boolean().describe('Whether the Connect server accepted the token and listed its vaults'),
    vaults: z.array(z.object({ id: z.string().describe('Vault id'), name: z.string().describe('Vault name') })).describe('Vaults the token can read'),
    error: z.string().optional().describe('Why the test failed; absent on success'),
  })
  .meta({ id: 'CredentialProviderTestResult' });

export const providerItemsSchema = z
  .object({
    items: z
      .array(
        z.object({
          id: z.string().describe('Item id in the provider'),
          path: z.string().describe('VaultName/ItemTitle: what an auth connection’s credential.path names'),
          title: z.string().describe('Item title'),
          vault_id: z.string().describe('Vault id'),
          vault_name: z.string().describe('Vault name'),
          urls: z.array(z.string()).optional().describe('Websites of the item'),
        }),
      )
      .describe('Login and password items of every vault the token can read'),
  })
  .meta({ id: 'CredentialProviderListItemsResponse' });

export type CreateProviderInput = z.output<typeof createProviderBody>;
export type UpdateProviderInput = z.output<typeof updateProviderBody>;
