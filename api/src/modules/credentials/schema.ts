import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText } from '../../http/schemas.js';
import { normaliseDomain } from './domain.js';
import {
  normaliseTotpSecret,
  TOTP_ALGORITHMS,
  TOTP_MAX_DIGITS,
  TOTP_MAX_PERIOD_SECONDS,
  TOTP_MIN_DIGITS,
  TOTP_MIN_PERIOD_SECONDS,
  totpSecretProblem,
} from './totp.js';

export const MAX_VALUE_KEYS = 64;
export const MAX_VALUE_KEY_CHARS = 128;
export const MAX_VALUE_CHARS = 4096;

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const NO_CONTROL = /^[^\u0000-\u001f\u007f-\u009f]*$/u;
/** The shape of our credential ids: a name of this shape could be shadowed by an id. */
export const CREDENTIAL_ID = /^cred_[a-z2-7]{24}$/;

const credentialName = z
  .string()
  .trim()
  .min(1)
  .refine((s) => [...s].length <= 255, 'must be at most 255 characters')
  .regex(NO_CONTROL, 'must not contain control characters')
  .refine((s) => s !== '.' && s !== '..', 'must not be "." or "..", which cannot be used in a URL path')
  .refine((s) => !CREDENTIAL_ID.test(s), 'must not look like a credential id (cred_ followed by 24 characters)')
  .describe('Name, 1 to 255 characters, unique in the project (case- and accent-insensitive); usable in place of the id');

/** A bare host name, normalised (lower case, punycode, no trailing dot); shared with auth connections. */
export const hostNameSchema = z
  .string()
  .max(255)
  .transform((text, ctx) => {
    const host = normaliseDomain(text);
    if (host !== undefined) return host;
    ctx.addIssue({ code: 'custom', message: 'must be a host name such as example.com, without scheme, port or path' });
    return z.NEVER;
  });

const domain = hostNameSchema.describe('Host name the credential is for, e.g. example.com; stored lower-case, IDNs as punycode');

export const valueKey = z
  .string()
  .min(1)
  .max(MAX_VALUE_KEY_CHARS)
  .regex(NO_CONTROL, 'must not contain control characters')
  .refine((s) => s.trim() === s, 'must not start or end with whitespace')
  .refine((s) => s !== '__proto__', 'is reserved')
  .describe(`Value name, 1 to ${MAX_VALUE_KEY_CHARS} characters, e.g. username or password`);

const valuesRecord = z
  .record(valueKey, z.string().max(MAX_VALUE_CHARS).describe(`A value, at most ${MAX_VALUE_CHARS} characters`))
  .refine((values) => Object.keys(values).length <= MAX_VALUE_KEYS, `must hold at most ${MAX_VALUE_KEYS} values`);

/**
 * zod skips a "__proto__" key of a record silently (no plain object can hold it), which
 * would drop a value the caller sent; it is refused before the record sees it.
 */
const valuesMap = z.preprocess((input, ctx) => {
  if (typeof input === 'object' && input !== null && Object.prototype.hasOwnProperty.call(input, '__proto__')) {
    ctx.addIssue({ code: 'custom', path: ['__proto__'], message: 'is reserved and cannot be a value name' });
  }
  return input;
}, valuesRecord);

/** A base32 secret, normalised; "" stays "" (no secret). */
const totpSecret = z
  .string()
  .max(512)
  .transform((text, ctx) => {
    const secret = normaliseTotpSecret(text);
    if (secret === '') return '';
    const problem = totpSecretProblem(secret);
    if (problem === undefined) return secret;
    ctx.addIssue({ code: 'custom', message: problem });
    return z.NEVER;
  });

/** How codes are made (newer SDKs send these); absent on create means the RFC 6238 defaults. */
const totpOptionFields = {
  totp_algorithm: z.enum(TOTP_ALGORITHMS).optional().describe('HMAC of the TOTP codes: SHA1 (default), SHA256 or SHA512'),
  totp_digits: z
    .number()
    .int()
    .min(TOTP_MIN_DIGITS)
    .max(TOTP_MAX_DIGITS)
    .optional()
    .describe(`Digits of a code, ${TOTP_MIN_DIGITS} to ${TOTP_MAX_DIGITS} (default 6)`),
  totp_period: z
    .number()
    .int()
    .min(TOTP_MIN_PERIOD_SECONDS)
    .max(TOTP_MAX_PERIOD_SECONDS)
    .optional()
    .describe(`Seconds a code stays current, ${TOTP_MIN_PERIOD_SECONDS} to ${TOTP_MAX_PERIOD_SECONDS} (default 30)`),
};

const ssoProvider = z
  .string()
  .trim()
  .max(64)
  .regex(NO_CONTROL, 'must not contain control characters')
  .describe('SSO provider whose button is clicked before the values are filled in, e.g. google, github, microsoft');

export const createCredentialBody = z
  .strictObject({
    name: credentialName,
    domain,
    values: valuesMap
      .refine((values) => Object.keys(values).length > 0, 'must hold at least one value')
      .describe(`Value name to value (1 to ${MAX_VALUE_KEYS} entries); sealed at rest, never returned`),
    sso_provider: ssoProvider.nullable().optional().describe('SSO provider; "" or null for none'),
    totp_secret: totpSecret.optional().describe('Base32 TOTP secret; spaces and dashes are ignored; "" for none'),
    ...totpOptionFields,
  })
  .meta({ id: 'CreateCredentialRequest' });

export const updateCredentialBody = z
  .strictObject({
    name: credentialName.optional(),
    values: valuesMap
      .optional()
      .describe('Merged into the stored values: new keys are added, existing ones overwritten'),
    remove_value_keys: z
      .array(valueKey)
      .max(MAX_VALUE_KEYS)
      .optional()
      .describe('Value names to remove, applied before values is merged; names not stored are ignored'),
    sso_provider: ssoProvider.nullable().optional().describe('SSO provider; "" or null removes it'),
    totp_secret: totpSecret.optional().describe('Base32 TOTP secret, normalised; "" removes it'),
    ...totpOptionFields,
  })
  .meta({ id: 'UpdateCredentialRequest' });

export const credentialParams = z.object({ id_or_name: lookupText.describe('Credential id or name') });

export const listCredentialsQuery = z.object({
  ...paginationQuery,
  domain: domain.optional().describe('Only credentials for exactly this host name'),
  query: lookupText.optional().describe('Case-insensitive substring of the name or domain, or an exact id'),
});

const timestamp = z.string().describe('RFC 3339 timestamp');

export const credentialSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    domain: z.string(),
    created_at: timestamp,
    updated_at: timestamp,
    has_values: z.boolean().describe('Whether any values are stored'),
    has_totp_secret: z.boolean().describe('Whether a TOTP secret is stored'),
    sso_provider: z.string().nullable(),
    totp_algorithm: z.enum(TOTP_ALGORITHMS).describe('HMAC of the TOTP codes'),
    totp_digits: z.number().int().describe('Digits of a TOTP code'),
    totp_period: z.number().int().describe('Seconds a TOTP code stays current'),
    value_keys: z
      .array(z.string())
      .optional()
      .describe('Names of the stored values; on single-credential responses only, never in lists'),
    totp_code: z.string().optional().describe('Current code; only in create/update responses that set a TOTP secret'),
    totp_code_expires_at: timestamp.optional().describe('When totp_code stops being current; only alongside it'),
  })
  .meta({ id: 'Credential' });

export const totpCodeSchema = z
  .object({
    code: z.string().describe('Current code (RFC 6238, with the credential’s algorithm, digits and period)'),
    expires_at: timestamp.describe('End of the current time step'),
  })
  .meta({ id: 'CredentialTotpCode' });
