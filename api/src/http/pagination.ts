import { z } from 'zod';
import type { RouteResult } from './route.js';

/** Offset pagination query, shared by every list. */
export const paginationQuery = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(20)
    .describe('Largest number of items to return, 1 to 100 (default 20)'),
  offset: z.coerce
    .number()
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .default(0)
    .describe('Number of items to skip (default 0)'),
};

export interface PageRequest {
  limit: number;
  offset: number;
}

export const PAGINATION_HEADERS = ['X-Has-More', 'X-Next-Offset'] as const;

export const paginationResponseHeaders = {
  'X-Has-More': { description: 'true when another page follows', schema: z.enum(['true', 'false']) },
  'X-Next-Offset': {
    description: 'Offset of the next page; 0 on the last page',
    schema: z.string().regex(/^\d+$/),
  },
};

/**
 * A page as the SDK's offset pager reads it: a bare array body, with `X-Has-More` and
 * `X-Next-Offset` (0 on the last page). Stores fetch `limit + 1` rows so has-more needs
 * no count query.
 */
export function page<T>(rows: T[], request: PageRequest, present: (row: T) => unknown): RouteResult {
  const hasMore = rows.length > request.limit;
  const items = rows.slice(0, request.limit).map(present);
  return {
    kind: 'json',
    status: 200,
    body: items,
    headers: {
      'X-Has-More': String(hasMore),
      'X-Next-Offset': String(hasMore ? request.offset + items.length : 0),
    },
  };
}
