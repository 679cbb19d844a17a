import { AppError } from '../../http/errors.js';
import { resolveSince } from '../invocations/since.js';
import type { ListTelemetryQuery } from './schema.js';
import type { ListFilter } from './store.js';

/** since when neither since nor offset is given (with order asc). */
export const DEFAULT_SINCE_MS = 5 * 60_000;

/**
 * The list's query as a store filter (CONTRACT §2.4): since defaults to 5m with order asc
 * and is ignored when offset is given; desc with since is refused; times become Unix
 * microseconds, the events' own unit.
 */
export function listFilter(sessionId: string, query: ListTelemetryQuery, now: Date): ListFilter {
  const since = query.since === undefined || query.since === '' ? undefined : query.since;
  if (query.order === 'desc' && since !== undefined) {
    throw new AppError(400, 'invalid_request', 'order desc cannot be combined with since', {
      details: [{ code: 'invalid_combination', field: 'since', message: 'since is not allowed with order desc' }],
    });
  }
  const micros = (at: Date | undefined) => (at === undefined ? undefined : at.getTime() * 1000);
  let sinceAt: Date | undefined;
  if (query.offset === undefined) sinceAt = since !== undefined ? resolveSince(since, now) : query.order === 'asc' ? new Date(now.getTime() - DEFAULT_SINCE_MS) : undefined;
  const untilAt = query.until === undefined || query.until === '' ? undefined : resolveSince(query.until, now);
  return {
    sessionId,
    categories: query.category !== undefined && query.category.length > 0 ? query.category : undefined,
    sinceTs: micros(sinceAt),
    untilTs: micros(untilAt),
    order: query.order,
    limit: query.limit,
    offset: query.offset ?? 0,
  };
}
