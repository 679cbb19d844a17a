import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { labelSchema, lookupText, queryBoolean, timestamp } from '../../http/schemas.js';

const daysToExpire = z
  .number()
  .int()
  .min(1)
  .max(3650)
  .nullable()
  .describe('Days until the key expires, 1 to 3650; null means it never expires');

export const MAX_KEY_LIFETIME_DAYS = 3650;

const expiresAt = z
  .iso.datetime({ offset: true })
  .transform((text) => new Date(text))
  .nullable()
  .describe(`When the key stops working (RFC 3339, in the future, at most ${MAX_KEY_LIFETIME_DAYS} days ahead); null means never`);

export const createApiKeyBody = z
  .strictObject({
    name: labelSchema.describe('A label for the key (1 to 255 characters); not unique, not addressable'),
    days_to_expire: daysToExpire.optional(),
    expires_at: expiresAt.optional(),
    project_id: lookupText
      .nullable()
      .optional()
      .describe('Scope the key to this project (id or name); null or absent for an org-wide key'),
  })
  .superRefine((body, ctx) => {
    if (body.expires_at !== undefined && body.expires_at !== null && body.days_to_expire !== undefined && body.days_to_expire !== null) {
      ctx.addIssue({ code: 'custom', path: ['expires_at'], message: 'give either expires_at or days_to_expire, not both' });
    }
  })
  .meta({ id: 'CreateApiKeyRequest' });

export const updateApiKeyBody = z
  .strictObject({ name: labelSchema.describe('New label for the key') })
  .meta({ id: 'UpdateApiKeyRequest' });

export const rotateApiKeyBody = z
  .strictObject({
    days_to_expire: daysToExpire
      .optional()
      .describe('Lifetime of the new key in days (null: never expires); omit to keep the old key’s lifetime'),
    expire_in_days: z
      .number()
      .int()
      .min(0)
      .max(3650)
      .nullable()
      .optional()
      .describe('Grace period for the old key in days (default 7; 0 expires it now)'),
  })
  .meta({ id: 'RotateApiKeyRequest' });

export const apiKeyIdParams = z.object({ id: lookupText.describe('API key id') });

export const retrieveApiKeyQuery = z.object({
  include_deleted: queryBoolean.optional().describe('Also find a deleted key (default false)'),
});

export const listApiKeysQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Only keys with exactly this name'),
  query: lookupText
    .optional()
    .describe('Substring of the name, creator or project; or an id or masked key, exact or by prefix'),
  status: z.enum(['active', 'deleted', 'all']).optional().describe('active (default; includes expired keys), deleted or all'),
  include_deleted: queryBoolean.optional().describe('Deprecated: same as status=all'),
  sort_by: z.enum(['created_at', 'name', 'expires_at']).default('created_at').describe('Sort field (default created_at)'),
  sort_direction: z.enum(['asc', 'desc']).default('desc').describe('Sort direction (default desc)'),
});

export const apiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    masked_key: z.string().describe('The key with its middle hidden'),
    created_at: timestamp,
    created_by: z.object({ id: z.string(), email: z.string(), name: z.string().nullable() }),
    deleted_at: timestamp.nullable(),
    expires_at: timestamp.nullable(),
    project_id: z.string().nullable(),
    project_name: z.string().nullable(),
  })
  .meta({ id: 'ApiKey' });

export const createdApiKeySchema = apiKeySchema
  .extend({ key: z.string().describe('The plaintext key; returned only in this response') })
  .meta({ id: 'CreatedApiKey' });
