import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AppError } from '../../api/src/http/errors.js';
import { page } from '../../api/src/http/pagination.js';
import { expressPath, fillPath } from '../../api/src/http/route.js';
import { validateRequest } from '../../api/src/http/validate.js';

describe('pagination', () => {
  it('marks more when the store returned limit + 1 rows, and points at the next offset', () => {
    const result = page([1, 2, 3], { limit: 2, offset: 10 }, (n) => n * 10);
    expect(result).toEqual({
      kind: 'json',
      status: 200,
      body: [10, 20],
      headers: { 'X-Has-More': 'true', 'X-Next-Offset': '12' },
    });
  });

  it('sends 0 as the next offset on the last page, as the SDK expects', () => {
    const result = page([1], { limit: 2, offset: 4 }, (n) => n);
    expect(result).toMatchObject({ body: [1], headers: { 'X-Has-More': 'false', 'X-Next-Offset': '0' } });
  });
});

describe('paths', () => {
  it('turns OpenAPI templates into express paths', () => {
    expect(expressPath('/org/projects/{id}/limits')).toBe('/org/projects/:id/limits');
  });

  it('fills templates with encoded values', () => {
    expect(fillPath('/org/projects/{id}', { id: 'a/b c' })).toBe('/org/projects/a%2Fb%20c');
  });
});

describe('validateRequest', () => {
  it('reports the issues of every part at once, each with its field', () => {
    let error: AppError | undefined;
    try {
      validateRequest({
        params: { schema: z.object({ id: z.string().min(3) }), value: { id: 'x' } },
        query: { schema: z.object({ limit: z.coerce.number().max(100) }), value: { limit: '500' } },
        body: { schema: z.strictObject({ name: z.string() }), value: { nam: 'typo' } },
      });
    } catch (e) {
      error = e as AppError;
    }
    expect(error?.status).toBe(400);
    expect(error?.code).toBe('invalid_request');
    expect(error?.details.map((d) => d.field).sort()).toEqual(['body', 'body.name', 'params.id', 'query.limit']);
  });

  it('returns parsed values with defaults and coercions applied', () => {
    const out = validateRequest({ query: { schema: z.object({ limit: z.coerce.number().default(20) }), value: {} } });
    expect(out.query).toEqual({ limit: 20 });
  });
});
