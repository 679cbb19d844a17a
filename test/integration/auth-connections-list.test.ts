import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, type Connection } from './auth-connections.fixtures.js';

/** Listing managed auth connections: order, paging, validation and filters. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { inNewProject, create, all, idsIn, expectError } = connectionHelpers(() => app, clock);

  describe('list', () => {
    it('lists newest first with limit, offset and the pagination headers', async () => {
      const { http: client } = await inNewProject();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await create(client, { domain: `d${i}.example.com`, profile_name: `p${i}` })).id);
        clock.advance(1000);
      }
      const newestFirst = [...ids].reverse();
      const first = await client.get('/auth/connections?limit=2');
      expect(idsIn(first)).toEqual(newestFirst.slice(0, 2));
      expect([first.headers.get('x-has-more'), first.headers.get('x-next-offset')]).toEqual(['true', '2']);
      const second = await client.get('/auth/connections?limit=2&offset=2');
      expect(idsIn(second)).toEqual(newestFirst.slice(2, 4));
      expect([second.headers.get('x-has-more'), second.headers.get('x-next-offset')]).toEqual(['true', '4']);
      const last = await client.get('/auth/connections?limit=2&offset=4');
      expect(idsIn(last)).toEqual(newestFirst.slice(4));
      expect([last.headers.get('x-has-more'), last.headers.get('x-next-offset')]).toEqual(['false', '0']);
      const beyond = await client.get('/auth/connections?offset=50');
      expect([beyond.status, beyond.body]).toEqual([200, []]);
      // The default page is 20 and holds them all; items are shaped like GET's.
      const defaults = await client.get('/auth/connections');
      expect(idsIn(defaults)).toEqual(newestFirst);
      expect(defaults.body[0]).toEqual((await client.get(`/auth/connections/${newestFirst[0]}`)).body);
    });

    it('breaks ties on the same creation time by creation order', async () => {
      const { http: client } = await inNewProject();
      const a = await create(client, { domain: 'a.example.com', profile_name: 'p' });
      const b = await create(client, { domain: 'b.example.com', profile_name: 'p' });
      expect((await all(client)).map((c) => c.id)).toEqual([b.id, a.id]);
    });

    it('pages 21 connections with the default limit of 20', async () => {
      const { http: client } = await inNewProject();
      for (let i = 0; i < 21; i++) await create(client, { domain: `d${i}.example.com`, profile_name: 'p', health_checks: false });
      const res = await client.get('/auth/connections');
      expect(res.body).toHaveLength(20);
      expect([res.headers.get('x-has-more'), res.headers.get('x-next-offset')]).toEqual(['true', '20']);
    });

    it.each(['limit=0', 'limit=101', 'limit=-1', 'limit=ten', 'offset=-1', 'offset=1.5', 'domain=https%3A%2F%2Fexample.com', 'domain=example.com%3A80'])(
      'refuses %s with 400',
      async (query) => {
        const res = await api.get(`/auth/connections?${query}`);
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)[0]).toMatch(/^query\./);
      },
    );

    it('filters by domain (normalised), profile name (case-insensitive) and query (substring or exact id)', async () => {
      const { http: client } = await inNewProject();
      const shopAlice = await create(client, { domain: 'shop.example.com', profile_name: 'Alice-Work' });
      const mailAlice = await create(client, { domain: 'mail.example.org', profile_name: 'Alice-Work' });
      const shopBob = await create(client, { domain: 'shop.example.com', profile_name: 'bob_home' });
      const ids = async (query: string) => (await all(client, `&${query}`)).map((c) => c.id).sort();
      const sorted = (...list: Connection[]) => list.map((c) => c.id).sort();

      expect(await ids('domain=shop.example.com')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('domain=SHOP.example.com.')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('domain=example.com')).toEqual([]);
      expect(await ids('profile_name=alice-work')).toEqual(sorted(shopAlice, mailAlice));
      expect(await ids('profile_name=alice')).toEqual([]);
      expect(await ids('domain=shop.example.com&profile_name=Alice-Work')).toEqual(sorted(shopAlice));
      expect(await ids('query=example.org')).toEqual(sorted(mailAlice));
      expect(await ids('query=SHOP')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('query=ALICE')).toEqual(sorted(shopAlice, mailAlice));
      expect(await ids('query=b_h')).toEqual(sorted(shopBob));
      expect(await ids(`query=${shopBob.id}`)).toEqual(sorted(shopBob));
      expect(await ids(`query=${shopBob.id.slice(0, -2)}`)).toEqual([]);
      // LIKE wildcards are literal characters.
      expect(await ids('query=%25')).toEqual([]);
      expect(await ids('query=_')).toEqual(sorted(shopBob));
      expect(await ids('query=nothing-like-this')).toEqual([]);
    });

    it('still filters by the profile name the connection was made with after that profile is deleted', async () => {
      const { http: client } = await inNewProject();
      const connection = await create(client, { domain: 'example.com', profile_name: 'Gone-Soon' });
      expect((await client.delete('/profiles/Gone-Soon')).status).toBe(204);
      expect((await client.get(`/auth/connections/${connection.id}`)).body.profile_name).toBe('Gone-Soon');
      expect((await all(client, '&profile_name=gone-soon')).map((c) => c.id)).toEqual([connection.id]);
      expect((await all(client, '&query=gone')).map((c) => c.id)).toEqual([connection.id]);
      expect((await all(client, '&profile_name=gone-soon&query=example')).map((c) => c.id)).toEqual([connection.id]);
    });
  });
});
