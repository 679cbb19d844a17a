import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText } from '../../http/schemas.js';

/**
 * The BrowserProfile name rule (CONTRACT §1.2): 1 to 255 letters, digits, `.`, `_`, `-`.
 * `.` and `..` alone are refused: the SDK cannot put them in a path, so a profile with
 * such a name could never be addressed by it.
 */
export const profileName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9._-]*$/, 'must contain only letters, digits, ".", "_" and "-"')
  .refine((s) => s !== '.' && s !== '..', 'must not be "." or ".."')
  .describe('1 to 255 letters, digits, ".", "_" or "-"; unique in the project (case- and accent-insensitive)');

export const createProfileBody = z
  .strictObject({ name: profileName.nullable().optional() })
  .meta({ id: 'CreateProfileRequest' });

export const updateProfileBody = z.strictObject({ name: profileName }).meta({ id: 'UpdateProfileRequest' });

export const profileIdParams = z.object({ id_or_name: lookupText.describe('Profile id or name') });

export const listProfilesQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Exact name, case- and accent-insensitive'),
  query: lookupText.optional().describe('Case-insensitive substring of the name or the id'),
});

export const PROFILE_FORMATS = ['tar.zst', 'tar'] as const;
export type ProfileFormat = (typeof PROFILE_FORMATS)[number];

export const downloadProfileQuery = z.object({
  format: z
    .enum(PROFILE_FORMATS)
    .default('tar.zst')
    .describe('tar.zst (default): a zstd-compressed tar; tar: the tar uncompressed'),
});

const timestamp = z.string().describe('RFC 3339 timestamp');

export const profileSchema = z
  .object({
    id: z.string(),
    name: z.string().nullable().describe('The profile name, or null'),
    created_at: timestamp,
    updated_at: timestamp.describe('Last rename or saved change'),
    last_used_at: timestamp.optional().describe('When a browser session last used the profile; absent if never'),
  })
  .meta({ id: 'Profile' });
