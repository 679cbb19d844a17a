import { errorSchema } from './schemas.js';
import type { ResponseSpec } from './route.js';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: every problem is listed in details',
  401: 'Missing, invalid, expired or deleted API key',
  403: 'The key may not do this',
  404: 'Not found',
  405: 'Method not allowed on this path',
  409: 'Conflicts with the current state',
  410: 'The route has been removed',
  413: 'Request body too large',
  415: 'Unsupported content type',
  429: 'A limit was reached',
  500: 'Internal error, with a request id',
  502: 'A server this one depends on (e.g. a credential provider) failed',
  507: 'Insufficient storage on the host',
  503: 'Unavailable (not ready, or the database is unreachable): retry after Retry-After',
};

/** Error responses a route documents, all with the one error body. */
export function errorResponses(...statuses: number[]): Record<number, ResponseSpec> {
  return Object.fromEntries(
    statuses.map((status) => [status, { description: DESCRIPTIONS[status] ?? 'Error', schema: errorSchema }]),
  );
}
