import { describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { createPool, expectError, livePoolIds, poolIds, startPoolApp, type Pool } from './browser-pools.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/* GET /browser_pools (CONTRACT §3, §12.3): order, the name and query filters, paging. */

const clock = new FixedClock(new Date('2026-08-01T09:00:00.000Z'));
const ctx = startPoolApp({ clock });

/** Each pool one second after the last, so "newest first" never rests on a tie. */
const createLater = async (client: HttpClient, body: Record<string, unknown>): Promise<Pool> => {
  clock.advance(1000);
  return createPool(client, body);
};

describe('GET /browser_pools', () => {
  it('lists live pools newest first', async () => {
    const { http: client } = await newProject(ctx.http);
    const a = await createLater(client, { size: 1 });
    const b = await createLater(client, { size: 1 });
    const c = await createLater(client, { size: 1 });
    const listed = await client.get<Pool[]>('/browser_pools');
    expect(listed.status).toBe(200);
    expect(poolIds(listed)).toEqual([c.id, b.id, a.id]);
    expect(listed.body[0]).toEqual(c);
    await client.delete(`/browser_pools/${b.id}`, {});
    expect(await livePoolIds(client)).toEqual([c.id, a.id]);
  });

  it('filters by exact name, case- and accent-insensitively', async () => {
    const { http: client } = await newProject(ctx.http);
    const eu = await createLater(client, { size: 1, name: 'Zürich-EU' });
    await createLater(client, { size: 1, name: 'zurich-eu-2' });
    await createLater(client, { size: 1 });
    for (const name of ['Zürich-EU', 'zurich-eu', 'ZURICH-EU']) {
      expect(poolIds(await client.get(`/browser_pools?name=${encodeURIComponent(name)}`))).toEqual([eu.id]);
    }
    expect(poolIds(await client.get('/browser_pools?name=zurich'))).toEqual([]);
  });

  it('searches by substring of the name or by exact id', async () => {
    const { http: client } = await newProject(ctx.http);
    const crawler = await createLater(client, { size: 1, name: 'Nightly-Crawler' });
    const other = await createLater(client, { size: 1, name: 'checkout' });
    expect(poolIds(await client.get('/browser_pools?query=crawl'))).toEqual([crawler.id]);
    expect(poolIds(await client.get(`/browser_pools?query=${other.id}`))).toEqual([other.id]);
    expect(poolIds(await client.get(`/browser_pools?query=${other.id.slice(0, -2)}`))).toEqual([]);
    expect(poolIds(await client.get('/browser_pools?query=%25'))).toEqual([]);
    expect(poolIds(await client.get('/browser_pools?query=_'))).toEqual([]);
  });

  it('pages with X-Has-More and X-Next-Offset, and refuses bad paging', async () => {
    const { http: client } = await newProject(ctx.http);
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.unshift((await createLater(client, { size: 1 })).id);
    const first = await client.get<Pool[]>('/browser_pools?limit=2');
    expect(poolIds(first)).toEqual(made.slice(0, 2));
    expect(first.headers.get('x-has-more')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('2');
    const middle = await client.get<Pool[]>('/browser_pools?limit=2&offset=2');
    expect(poolIds(middle)).toEqual(made.slice(2, 4));
    expect(middle.headers.get('x-next-offset')).toBe('4');
    const last = await client.get<Pool[]>('/browser_pools?limit=2&offset=4');
    expect(poolIds(last)).toEqual(made.slice(4));
    expect(last.headers.get('x-has-more')).toBe('false');
    expect(last.headers.get('x-next-offset')).toBe('0');
    for (const [query, field] of [
      ['limit=0', 'query.limit'],
      ['limit=101', 'query.limit'],
      ['offset=-1', 'query.offset'],
      ['limit=x', 'query.limit'],
    ]) {
      const bad = await client.get(`/browser_pools?${query}`);
      expectError(bad, 400, 'invalid_request');
      expect(errorFields(bad)).toEqual([field]);
    }
  });
});
