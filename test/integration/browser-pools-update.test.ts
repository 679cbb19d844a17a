import { describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { createPool, createProfile, createProxy, expectError, startPoolApp, type Pool } from './browser-pools.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/*
 * PATCH /browser_pools/{id_or_name} (CONTRACT §3 PoolUpdate): present fields replace,
 * the special values clear, and the answer (like a later GET) shows the configuration
 * after the change with cleared fields absent. No browser is warmed in this slice; the
 * stand-in runtime keeps real Chromium out of it.
 */

const ctx = startPoolApp({ clock: new FixedClock(new Date('2026-08-01T09:00:00.000Z')) });

/** PATCHes, insists on 200, checks that a GET agrees with the answer, and returns the pool. */
const patch = async (client: HttpClient, idOrName: string, body: Record<string, unknown>): Promise<Pool> => {
  const res = await client.patch<Pool>(`/browser_pools/${encodeURIComponent(idOrName)}`, body);
  expect(res.status, res.text).toBe(200);
  expect((await client.get(`/browser_pools/${res.body.id}`)).body).toEqual(res.body);
  return res.body;
};

describe('PATCH /browser_pools/{id_or_name}', () => {
  it('replaces the fields it is given and keeps the others; {} changes nothing', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 2, headless: true, timeout_seconds: 300, viewport: { width: 800, height: 600 } });
    const changed = await patch(client, pool.id, {
      size: 5,
      stealth: true,
      kiosk_mode: false,
      fill_rate_per_minute: 50,
      viewport: { width: 1024, height: 768, refresh_rate: 60 },
      chrome_policy: { BookmarkBarEnabled: true },
      start_url: 'https://example.test/warm',
    });
    expect(changed).toEqual({
      ...pool,
      browser_pool_config: {
        size: 5,
        headless: true,
        timeout_seconds: 300,
        stealth: true,
        kiosk_mode: false,
        fill_rate_per_minute: 50,
        viewport: { width: 1024, height: 768, refresh_rate: 60 },
        chrome_policy: { BookmarkBarEnabled: true },
        start_url: 'https://example.test/warm',
      },
    });
    expect(await patch(client, pool.id, {})).toEqual(changed);
    expect(await patch(client, pool.id, { discard_all_idle: true })).toEqual(changed);
  });

  it('renames; "" is a no-op; a taken name is 409 pool_name_taken', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1, name: 'before' });
    await createPool(client, { size: 1, name: 'Taken' });
    const renamed = await patch(client, 'before', { name: 'after' });
    expect(renamed.name).toBe('after');
    expect(renamed.browser_pool_config.name).toBe('after');
    expectError(await client.get('/browser_pools/before'), 404, 'not_found');
    expect((await client.get('/browser_pools/after')).body.id).toBe(pool.id);
    expect(await patch(client, 'after', { name: '' })).toEqual(renamed);
    const clash = await client.patch('/browser_pools/after', { name: 'TAKEN' });
    expectError(clash, 409, 'pool_name_taken');
    expect(clash.headers.get('x-should-retry')).toBe('false');
    expect((await client.get(`/browser_pools/${pool.id}`)).body).toEqual(renamed);
  });

  it('gives an unnamed pool a name', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1 });
    expect((await patch(client, pool.id, { name: 'late-name' })).name).toBe('late-name');
    expect((await client.get('/browser_pools/late-name')).body.id).toBe(pool.id);
  });

  it('sets proxy_id, clears it with ""; an unknown or foreign proxy is 404 and changes nothing', async () => {
    const project = await newProject(ctx.http);
    const proxyId = await createProxy(project.http);
    const foreignProxy = await createProxy((await newProject(ctx.http)).http);
    const pool = await createPool(project.http, { size: 1 });
    expect((await patch(project.http, pool.id, { proxy_id: proxyId })).browser_pool_config.proxy_id).toBe(proxyId);
    expectError(await project.http.patch(`/browser_pools/${pool.id}`, { proxy_id: 'proxy_nope' }), 404, 'not_found');
    expectError(await project.http.patch(`/browser_pools/${pool.id}`, { proxy_id: foreignProxy, size: 2 }), 404, 'not_found');
    expect((await project.http.get(`/browser_pools/${pool.id}`)).body.browser_pool_config).toEqual({ size: 1, proxy_id: proxyId });
    expect((await patch(project.http, pool.id, { proxy_id: '' })).browser_pool_config).toEqual({ size: 1 });
  });

  it('clears start_url with "" and extensions with []; an unknown extension is 404', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1, start_url: 'https://example.test/', extensions: [] });
    expect(pool.browser_pool_config).toEqual({ size: 1, start_url: 'https://example.test/', extensions: [] });
    expect((await patch(client, pool.id, { start_url: '' })).browser_pool_config).toEqual({ size: 1, extensions: [] });
    expect((await patch(client, pool.id, { extensions: [] })).browser_pool_config).toEqual({ size: 1 });
    expectError(await client.patch(`/browser_pools/${pool.id}`, { extensions: [{ name: 'adblock' }] }), 404, 'not_found');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body.browser_pool_config).toEqual({ size: 1 });
  });

  it('changes the profile (refresh turns on unless sent), drops save_changes, and clears it with {id: ""}', async () => {
    const project = await newProject(ctx.http);
    const first = await createProfile(project.http, 'first');
    const second = await createProfile(project.http, 'second');
    const pool = await createPool(project.http, { size: 1, profile: { id: first }, refresh_on_profile_update: false });
    expect(pool.browser_pool_config.refresh_on_profile_update).toBe(false);

    const moved = await patch(project.http, pool.id, { profile: { name: 'second', save_changes: true } });
    expect(moved.profile_id).toBe(second);
    expect(moved.browser_pool_config).toEqual({ size: 1, profile: { name: 'second' }, refresh_on_profile_update: true });

    const quiet = await patch(project.http, pool.id, { profile: { id: first }, refresh_on_profile_update: false });
    expect(quiet.profile_id).toBe(first);
    expect(quiet.browser_pool_config).toEqual({ size: 1, profile: { id: first }, refresh_on_profile_update: false });
    expect((await patch(project.http, pool.id, { refresh_on_profile_update: true })).browser_pool_config.refresh_on_profile_update).toBe(true);

    const cleared = await patch(project.http, pool.id, { profile: { id: '' } });
    expect(cleared).not.toHaveProperty('profile_id');
    expect(cleared.browser_pool_config).not.toHaveProperty('profile');
    expect(cleared.browser_pool_config.refresh_on_profile_update ?? false).toBe(false);
    expect(cleared.browser_pool_config.size).toBe(1);
  });

  it('refuses refresh_on_profile_update on a pool without a profile, and an unknown profile', async () => {
    const project = await newProject(ctx.http);
    const pool = await createPool(project.http, { size: 1 });
    const refresh = await project.http.patch(`/browser_pools/${pool.id}`, { refresh_on_profile_update: true });
    expectError(refresh, 400, 'invalid_request');
    expect(errorFields(refresh)).toEqual(['body.refresh_on_profile_update']);
    expectError(await project.http.patch(`/browser_pools/${pool.id}`, { profile: { name: 'missing' } }), 404, 'not_found');
    expect((await project.http.get(`/browser_pools/${pool.id}`)).body).toEqual(pool);
  });

  it('merges telemetry like browsers: null and {} keep it, categories merge, enabled false clears', async () => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 1, telemetry: { enabled: true } });
    const on = (p: Pool) =>
      Object.entries((p.browser_pool_config.telemetry?.browser ?? {}) as Record<string, { enabled: boolean }>)
        .filter(([, v]) => v.enabled)
        .map(([k]) => k)
        .sort();
    expect(on(pool)).toEqual(['captcha', 'connection', 'control', 'system']);
    const merged = await patch(client, pool.id, { telemetry: { browser: { console: { enabled: true }, captcha: { enabled: false } } } });
    expect(on(merged)).toEqual(['connection', 'console', 'control', 'system']);
    expect(on(await patch(client, pool.id, { telemetry: {} }))).toEqual(['connection', 'console', 'control', 'system']);
    expect(on(await patch(client, pool.id, { telemetry: null }))).toEqual(['connection', 'console', 'control', 'system']);
    expect((await patch(client, pool.id, { telemetry: { enabled: false } })).browser_pool_config).not.toHaveProperty('telemetry');
  });

  it.each([
    ['a size of 0', { size: 0 }, ['body.size']],
    ['a timeout of 5', { timeout_seconds: 5 }, ['body.timeout_seconds']],
    ['a fill rate of 0', { fill_rate_per_minute: 0 }, ['body.fill_rate_per_minute']],
    ['a blocked chrome policy', { chrome_policy: { RemoteDebuggingAllowed: false } }, ['body.chrome_policy.RemoteDebuggingAllowed']],
    ['a non-boolean discard_all_idle', { discard_all_idle: 'yes' }, ['body.discard_all_idle']],
    ['a name with a control character', { name: 'x\u0007' }, ['body.name']],
    ['an unknown field', { gpu: true }, ['body']],
  ])('refuses %s with 400 naming the field and changes nothing', async (_label, body, fields) => {
    const { http: client } = await newProject(ctx.http);
    const pool = await createPool(client, { size: 2, name: 'steady' });
    const res = await client.patch('/browser_pools/steady', { headless: true, ...body });
    expectError(res, 400, 'invalid_request');
    expect(errorFields(res)).toEqual(fields);
    expect((await client.get(`/browser_pools/${pool.id}`)).body).toEqual(pool);
  });

  it('answers 404 not_found for an unknown pool', async () => {
    const { http: client } = await newProject(ctx.http);
    expectError(await client.patch('/browser_pools/bpool_missing', { size: 1 }), 404, 'not_found');
    expectError(await client.patch('/browser_pools/nobody', { size: 1 }), 404, 'not_found');
  });
});
