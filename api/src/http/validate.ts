import type { z } from 'zod';
import { validationFailed, type ErrorDetail } from './errors.js';

type Part = 'params' | 'query' | 'body';

/**
 * Validates every part of a request and reports every problem at once, each with the
 * field it concerns (`body.name`, `query.limit`).
 */
export function validateRequest(
  parts: Partial<Record<Part, { schema: z.ZodType | undefined; value: unknown }>>,
): Record<Part, unknown> {
  const details: ErrorDetail[] = [];
  const out: Record<Part, unknown> = { params: undefined, query: undefined, body: undefined };
  for (const part of ['params', 'query', 'body'] as const) {
    const entry = parts[part];
    if (!entry?.schema) continue;
    const result = entry.schema.safeParse(entry.value);
    if (result.success) {
      out[part] = result.data;
      continue;
    }
    for (const issue of result.error.issues) {
      const field = [part, ...issue.path.map(String)].join('.');
      details.push({ code: issue.code, field, message: `${field}: ${issue.message}` });
    }
  }
  if (details.length) throw validationFailed(details);
  return out;
}
