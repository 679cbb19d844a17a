import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText } from '../../http/schemas.js';

/** The extension name rule (CONTRACT §1.2, as profiles): 1 to 255 letters, digits, `.`, `_`, `-`; not `.` or `..`. */
export const extensionName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9._-]*$/, 'must contain only letters, digits, ".", "_" and "-"')
  .refine((s) => s !== '.' && s !== '..', 'must not be "." or ".."')
  .describe('1 to 255 letters, digits, ".", "_" or "-"; unique in the project (case- and accent-insensitive)');

export const extensionIdParams = z.object({ id_or_name: lookupText.describe('Extension id or name') });

export const listExtensionsQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Exact name, case- and accent-insensitive'),
  query: lookupText.optional().describe('Case-insensitive substring of the name, or the exact id'),
});

export const chromeStoreQuery = z.object({
  url: z.string().min(1).max(2048).describe('Chrome Web Store URL of the extension (…/detail/<name>/<32-letter id>), or its id'),
  os: z.enum(['win', 'mac', 'linux']).default('linux').describe('Target operating system of the package (default linux)'),
});

const timestamp = z.string().describe('RFC 3339 timestamp');

export const extensionSchema = z
  .object({
    id: z.string().describe('Unique identifier of the extension'),
    name: z.string().nullable().describe('The extension name, or null'),
    created_at: timestamp,
    last_used_at: timestamp.nullable().describe('When a browser was last created with the extension; null if never'),
    size_bytes: z.number().int().describe('Size of the stored zip, bytes'),
    checksum: z.string().nullable().describe('SHA-256 of the exact uploaded zip, lowercase hex'),
  })
  .meta({ id: 'Extension' });

/** The multipart fields of POST /extensions besides the file, as text. */
export const uploadFields = z.strictObject({ name: extensionName.optional() });
