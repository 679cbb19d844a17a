import { describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields } from '../support/http.js';
import { createKey } from './api-keys.fixtures.js';
import { createPool, createProfile, createProxy, expectError, livePoolIds, poolIds, startPoolApp, type Pool } from './browser-pools.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/*
 * Pool CRUD (CONTRACT §3): validation, the echo, names, get, delete and tenancy. Warm
 * fill is not part of this slice, so pools hold no browsers; the stand-in runtime keeps
 * real Chromium out, and the tests check that nothing was launched. The size caps are in
 * browser-pools-caps.test.ts, the list in browser-pools-list.test.ts, PATCH in
 * browser-pools-update.test.ts.
 */

const clock = new FixedClock(new Date('2026-08-01T09:00:00.000Z'));
const ctx = startPoolApp({ clock });

describe('POST /browser_pools', () => {
  it('creates a pool from size alone and echoes only what was sent', async () => {
    const { http: client } = await newProject(ctx.http);
    const res = await client.post('/browser_pools', { size: 3 });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bpool_[a-z0-9]+$/),
      acquired_count: 0,
      available_count: 0,
      starting_count: 0,
      browser_pool_config: { size: 3 },
      created_at: clock.now().toISOString(),
      extension_ids: [],
      region: 'us-east',
    });
    expect(ctx.runtime.launched).toEqual([]);
  });

  it('echoes every field as sent, resolves the profile and shows refresh_on_profile_update', async () => {
    const project = await newProject(ctx.http);
    const profileId = await createProfile(project.http, 'shopper');
    const proxyId = await createProxy(project.http);
    const body = {
      name: 'checkout-pool',
      size: 4,
      fill_rate_per_minute: 250,
      timeout_seconds: 900,
      headless: true,
      stealth: true,
      kiosk_mode: true,
      start_url: 'https://example.test/start',
      proxy_id: proxyId,
      profile: { name: 'shopper', save_changes: true },
      viewport: { width: 1280, height: 720, refresh_rate: 60 },
      chrome_policy: { BookmarkBarEnabled: false, HomepageLocation: 'https://example.test' },
      extensions: [],
      telemetry: { enabled: true, browser: { network: { enabled: true }, captcha: { enabled: false } } },
    };
    const res = await project.http.post('/browser_pools', body);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bpool_/),
      acquired_count: 0,
      available_count: 0,
      starting_count: 0,
      created_at: clock.now().toISOString(),
      extension_ids: [],
      region: 'us-east',
      name: 'checkout-pool',
      profile_id: profileId,
      browser_pool_config: {
        ...body,
        // save_changes is accepted and dropped; the default refresh is shown while a profile is attached.
        profile: { name: 'shopper' },
        refresh_on_profile_update: true,
        // Telemetry in its response form, as browsers present it.
        telemetry: {
          browser: {
            captcha: { enabled: false },
            connection: { enabled: true },
            console: { enabled: false },
            control: { enabled: true },
            interaction: { enabled: false },
            monitor: { enabled: false },
            network: { enabled: true },
            page: { enabled: false },
            platform: { enabled: false },
            screenshot: { enabled: false },
            system: { enabled: true },
          },
        },
      },
    });
    expect((await project.http.get(`/browser_pools/${res.body.id}`)).body).toEqual(res.body);
    expect(ctx.runtime.launched).toEqual([]);
  });

  it('finds the profile by id and keeps an explicit refresh_on_profile_update false', async () => {
    const project = await newProject(ctx.http);
    const profileId = await createProfile(project.http, 'by-id');
    const pool = await createPool(project.http, { size: 1, profile: { id: profileId }, refresh_on_profile_update: false });
    expect(pool.profile_id).toBe(profileId);
    expect(pool.browser_pool_config).toEqual({ size: 1, profile: { id: profileId }, refresh_on_profile_update: false });
  });

  it.each([
    ['no size', {}, ['body.size']],
    ['a size of 0', { size: 0 }, ['body.size']],
    ['a fractional size', { size: 1.5 }, ['body.size']],
    ['a size given as a string', { size: '5' }, ['body.size']],
    ['a fill rate of 0', { size: 1, fill_rate_per_minute: 0 }, ['body.fill_rate_per_minute']],
    ['a fractional fill rate', { size: 1, fill_rate_per_minute: 2.5 }, ['body.fill_rate_per_minute']],
    ['a timeout below 10', { size: 1, timeout_seconds: 9 }, ['body.timeout_seconds']],
    ['a timeout above 259200', { size: 1, timeout_seconds: 259201 }, ['body.timeout_seconds']],
    ['a non-boolean headless', { size: 1, headless: 'yes' }, ['body.headless']],
    ['a non-boolean stealth', { size: 1, stealth: 1 }, ['body.stealth']],
    ['a non-boolean kiosk_mode', { size: 1, kiosk_mode: 'true' }, ['body.kiosk_mode']],
    ['a start_url that is not a URL', { size: 1, start_url: 'not a url' }, ['body.start_url']],
    ['a file: start_url', { size: 1, start_url: 'file:///etc/passwd' }, ['body.start_url']],
    ['a profile with both id and name', { size: 1, profile: { id: 'prof_x', name: 'x' } }, ['body.profile']],
    ['a profile with neither id nor name', { size: 1, profile: { save_changes: true } }, ['body.profile']],
    ['a profile name with a space', { size: 1, profile: { name: 'my profile' } }, ['body.profile.name']],
    ['refresh_on_profile_update without a profile', { size: 1, refresh_on_profile_update: true }, ['body.refresh_on_profile_update']],
    ['a non-boolean refresh_on_profile_update', { size: 1, profile: { name: 'p' }, refresh_on_profile_update: 'yes' }, ['body.refresh_on_profile_update']],
    ['an extension named by both id and name', { size: 1, extensions: [{ id: 'ext_x', name: 'adblock' }] }, ['body.extensions.0']],
    ['a zero-width viewport', { size: 1, viewport: { width: 0, height: 10 } }, ['body.viewport.width']],
    ['a viewport without height', { size: 1, viewport: { width: 800 } }, ['body.viewport.height']],
    ['chrome_policy that is not an object', { size: 1, chrome_policy: ['ProxyMode'] }, ['body.chrome_policy']],
    ['the blocked chrome policy ProxyMode', { size: 1, chrome_policy: { BookmarkBarEnabled: true, ProxyMode: 'direct' } }, ['body.chrome_policy.ProxyMode']],
    ['telemetry enabled false with categories', { size: 1, telemetry: { enabled: false, browser: { page: { enabled: true } } } }, ['body.telemetry.browser']],
    ['an unknown telemetry category', { size: 1, telemetry: { browser: { audio: { enabled: true } } } }, ['body.telemetry.browser']],
    ['a name with a control character', { size: 1, name: 'a\u0001b' }, ['body.name']],
    ['a name of 256 characters', { size: 1, name: 'x'.repeat(256) }, ['body.name']],
    ['an unknown field', { size: 1, headles: true }, ['body']],
    ['discard_all_idle, which only PATCH takes', { size: 1, discard_all_idle: true }, ['body']],
  ])('refuses %s with 400 naming the field, and creates nothing', async (_label, body, fields) => {
    const project = await newProject(ctx.http);
    const res = await project.http.post('/browser_pools', body);
    expectError(res, 400, 'invalid_request');
    expect(errorFields(res)).toEqual(fields);
    expect(await livePoolIds(project.http)).toEqual([]);
  });

  it('takes any fill rate from 1 up, and the timeout bounds 10 and 259200', async () => {
    const { http: client } = await newProject(ctx.http);
    expect((await createPool(client, { size: 1, fill_rate_per_minute: 1, timeout_seconds: 10 })).browser_pool_config).toMatchObject({
      fill_rate_per_minute: 1,
      timeout_seconds: 10,
    });
    expect((await createPool(client, { size: 1, fill_rate_per_minute: 10_000, timeout_seconds: 259_200 })).browser_pool_config).toMatchObject({
      fill_rate_per_minute: 10_000,
      timeout_seconds: 259_200,
    });
    expect((await createPool(client, { size: 1, start_url: 'about:blank' })).browser_pool_config.start_url).toBe('about:blank');
  });

  it('answers 404 for a proxy or profile that is not in the project, and creates nothing', async () => {
    const project = await newProject(ctx.http);
    const other = await newProject(ctx.http);
    const foreignProfile = await createProfile(other.http, 'theirs');
    const foreignProxy = await createProxy(other.http);
    for (const body of [
      { size: 1, proxy_id: 'proxy_missing' },
      { size: 1, proxy_id: foreignProxy },
      { size: 1, profile: { id: 'prof_missing' } },
      { size: 1, profile: { id: foreignProfile } },
      { size: 1, profile: { name: 'theirs' } },
    ]) {
      expectError(await project.http.post('/browser_pools', body), 404, 'not_found');
    }
    expect(await livePoolIds(project.http)).toEqual([]);
  });

  it('keeps names unique among live pools, case- and accent-insensitively (409 pool_name_taken)', async () => {
    const project = await newProject(ctx.http);
    const first = await createPool(project.http, { size: 1, name: 'Café-Pool' });
    for (const name of ['café-pool', 'CAFE-POOL', 'cafe-pool']) {
      const again = await project.http.post('/browser_pools', { size: 1, name });
      expectError(again, 409, 'pool_name_taken');
      expect(again.headers.get('x-should-retry')).toBe('false');
    }
    expect(await livePoolIds(project.http)).toEqual([first.id]);
    // Another project may use the name; a deleted pool frees it.
    await createPool((await newProject(ctx.http)).http, { size: 1, name: 'Café-Pool' });
    expect((await project.http.delete(`/browser_pools/${first.id}`, {})).status).toBe(204);
    expect((await createPool(project.http, { size: 1, name: 'cafe-pool' })).name).toBe('cafe-pool');
  });

  it('lets exactly one of 8 parallel creates with the same name through', async () => {
    const project = await newProject(ctx.http);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => project.http.post('/browser_pools', { size: 1, name: i % 2 ? 'Racer' : 'racer' })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) expectError(r, 409, 'pool_name_taken');
    expect(await livePoolIds(project.http)).toHaveLength(1);
  });

  it('addresses a name with a slash through its percent-encoded path segment', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1, name: 'team/eu' });
    const res = await client.get(`/browser_pools/${encodeURIComponent('team/eu')}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.id).toBe(pool.id);
  });
});

describe('GET /browser_pools/{id_or_name}', () => {
  it('finds a pool by id and by name, case-insensitively; unknown ids and names are 404 not_found', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 2, name: 'Reader-Pool' });
    for (const path of [`/browser_pools/${pool.id}`, '/browser_pools/Reader-Pool', '/browser_pools/reader-pool', '/browser_pools/READER-POOL']) {
      const res = await client.get(path);
      expect(res.status, path).toBe(200);
      expect(res.body).toEqual(pool);
    }
    expectError(await client.get('/browser_pools/bpool_missing'), 404, 'not_found');
    expectError(await client.get('/browser_pools/no-such-pool'), 404, 'not_found');
  });
});

describe('DELETE /browser_pools/{id_or_name}', () => {
  it('deletes a pool without leases with 204; then it is 404, unlisted, and its name is free', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 2, name: 'short-lived' });
    const res = await client.delete('/browser_pools/short-lived', {});
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    expectError(await client.get(`/browser_pools/${pool.id}`), 404, 'not_found');
    expectError(await client.get('/browser_pools/short-lived'), 404, 'not_found');
    expectError(await client.patch(`/browser_pools/${pool.id}`, { size: 3 }), 404, 'not_found');
    expectError(await client.delete(`/browser_pools/${pool.id}`, {}), 404, 'not_found');
    expect(await livePoolIds(client)).toEqual([]);
    expect((await createPool(client, { size: 1, name: 'short-lived' })).id).not.toBe(pool.id);
  });

  it('accepts {"force": true}, a null body and no body at all', async () => {
    const { http: client } = await newProject(ctx.http);
    const forced = await createPool(client, { size: 1 });
    const nulled = await createPool(client, { size: 1 });
    const bare = await createPool(client, { size: 1 });
    expect((await client.delete(`/browser_pools/${forced.id}`, { force: true })).status).toBe(204);
    expect((await client.delete(`/browser_pools/${nulled.id}`, 'null')).status).toBe(204);
    expect((await client.delete(`/browser_pools/${bare.id}`)).status).toBe(204);
    expect(await livePoolIds(client)).toEqual([]);
  });

  it.each([
    ['a body that is not JSON', 'force=true'],
    ['a JSON array', '[]'],
    ['a JSON string', '"force"'],
    ['a non-boolean force', '{"force":"yes"}'],
  ])('refuses %s with 400 and keeps the pool', async (_label, body) => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1 });
    const res = await client.delete(`/browser_pools/${pool.id}`, body);
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ code: expect.any(String), message: expect.any(String), details: expect.any(Array) });
    expect(await livePoolIds(client)).toEqual([pool.id]);
  });
});

describe('the project', () => {
  it('cannot be deleted while it has a live pool', async () => {
    const project = await newProject(ctx.http);
    const pool = await createPool(project.http, { size: 1 });
    const blocked = await ctx.http.delete(`/org/projects/${project.id}`);
    expectError(blocked, 409, blocked.body.code);
    expect(blocked.text).toContain('browser_pools');
    expect((await project.http.delete(`/browser_pools/${pool.id}`, {})).status).toBe(204);
    expect((await ctx.http.delete(`/org/projects/${project.id}`)).status).toBe(204);
  });
});

describe('tenancy', () => {
  it('hides a pool from other orgs and other projects (404), by id and by name, and leaves it untouched', async () => {
    const mine = await newProject(ctx.http);
    const pool = await createPool(mine.http, { size: 2, name: 'private-pool' });
    const sibling = await newProject(ctx.http);
    const siblingKey = await createKey(ctx.app.tenant, { name: 'sibling key', project_id: sibling.id });
    const stranger = await ctx.app.newTenant('pool-stranger');
    for (const client of [sibling.http, ctx.app.client(siblingKey.key), stranger.http]) {
      for (const path of [`/browser_pools/${pool.id}`, '/browser_pools/private-pool']) {
        expectError(await client.get(path), 404, 'not_found');
        expectError(await client.patch(path, { size: 1, name: 'hijacked' }), 404, 'not_found');
        expectError(await client.delete(path, { force: true }), 404, 'not_found');
      }
      const listed = await client.get<Pool[]>('/browser_pools?limit=100');
      expect(listed.status).toBe(200);
      expect(poolIds(listed)).not.toContain(pool.id);
      expect(poolIds(await client.get(`/browser_pools?query=${pool.id}`))).toEqual([]);
      expect(poolIds(await client.get('/browser_pools?name=private-pool'))).toEqual([]);
    }
    expect((await mine.http.get(`/browser_pools/${pool.id}`)).body).toEqual(pool);
    // The pool's own project key sees it; the name stays free in the other projects.
    const ownKey = await createKey(ctx.app.tenant, { name: 'own key', project_id: mine.id });
    expect((await ctx.app.client(ownKey.key).get('/browser_pools/private-pool')).body).toEqual(pool);
    await createPool(sibling.http, { size: 1, name: 'private-pool' });
  });
});
