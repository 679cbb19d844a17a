import { describe, expect, it } from 'vitest';
import { listTelemetryQuery } from '../../api/src/modules/browser-telemetry/schema.js';
import { DEFAULT_SINCE_MS, listFilter } from '../../api/src/modules/browser-telemetry/list-filter.js';

const now = new Date('2026-11-26T12:00:00Z');
const micros = (at: Date) => at.getTime() * 1000;
const filter = (query: Record<string, string>) => listFilter('bs_1', listTelemetryQuery.parse(query), now);

describe('the telemetry list query', () => {
  it('defaults to the last 5 minutes, ascending, 20 events', () => {
    expect(filter({})).toEqual({ sessionId: 'bs_1', categories: undefined, sinceTs: micros(now) - DEFAULT_SINCE_MS * 1000, untilTs: undefined, order: 'asc', limit: 20, offset: 0 });
  });

  it('ignores since once an offset is given, and has no default window with order desc', () => {
    expect(filter({ offset: '20', since: '1h' }).sinceTs).toBeUndefined();
    expect(filter({ order: 'desc' }).sinceTs).toBeUndefined();
  });

  it('reads since and until as RFC 3339 or durations, in microseconds', () => {
    const f = filter({ since: '2h', until: '2026-11-26T11:00:00Z' });
    expect(f.sinceTs).toBe(micros(now) - 2 * 3_600_000_000);
    expect(f.untilTs).toBe(micros(new Date('2026-11-26T11:00:00Z')));
  });

  it('splits comma-joined categories and refuses unknown ones', () => {
    expect(filter({ category: 'console, network' }).categories).toEqual(['console', 'network']);
    expect(listTelemetryQuery.safeParse({ category: 'console,bogus' }).success).toBe(false);
  });

  it('refuses order desc with since', () => {
    expect(() => filter({ order: 'desc', since: '5m' })).toThrow(/order desc/);
  });
});
