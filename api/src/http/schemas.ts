import { z } from 'zod';

/**
 * Shapes shared by many modules.
 *
 * Control characters are refused with the ranges of Unicode's Cc category spelled out
 * (\u0000-\u001f, \u007f-\u009f) rather than \p{Cc}: the patterns are published in
 * /openapi.json, and JSON Schema tools (schemathesis among them) do not understand \p{…}.
 */

export const errorDetailSchema = z
  .object({
    code: z.string().describe('Machine-readable code of this problem'),
    message: z.string().describe('What is wrong, for a person'),
    field: z.string().optional().describe('Where the problem is, e.g. body.name'),
  })
  .meta({ id: 'ErrorDetail' });

export const errorSchema = z
  .object({
    code: z.string().describe('Stable, machine-readable error code'),
    message: z.string().describe('What went wrong, for a person'),
    details: z.array(errorDetailSchema).describe('Every individual problem, e.g. each invalid field'),
    inner_error: z
      .object({ code: z.string(), message: z.string() })
      .optional()
      .describe('The underlying cause, where one is known'),
    request_id: z.string().optional().describe('Request id, on internal errors, to find the log lines'),
  })
  .meta({ id: 'Error' });

/** A display name or label: trimmed, 1 to 255 characters, no control characters. */
export const labelSchema = z
  .string()
  .trim()
  .min(1)
  .max(255)
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/u, 'must not contain control characters');

/**
 * Text that is looked up in the database (ids, names, filters). Control characters match
 * nothing, and a NUL makes Postgres fail the query: a 400, not a 500.
 */
export const lookupText = z
  .string()
  .min(1)
  .max(255)
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/u, 'must not contain control characters');

/** A query-string boolean: `true`/`false` (also 1/0, yes/no). */
export const queryBoolean = z.stringbool();

/** A timestamp in a response: RFC 3339 text, as Date.toISOString() writes it. */
export const timestamp = z.string().describe('RFC 3339 timestamp');
