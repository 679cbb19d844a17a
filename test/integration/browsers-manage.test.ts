import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakeAgent, FakeRuntime, newProject, useRuntime } from './browsers.fixtures.js';

/*
 * The API logic here (validation, caps, PATCH rules, launch failures and hangs) runs
 * against a stand-in runtime and agent (browsers.fixtures.ts): injected launch failures
 * cannot be produced with real Chromium on demand. Real sessions are exercised in
 * browsers-chromium.test.ts (Playwright over cdp_ws_url, the idle reaper, the cap with
 * real browsers) and in the SDK e2e tests.
 */

const START = new Date('2026-07-01T12:00:00.000Z');
const clock = new FixedClock(START);
let app: TestApp;
let http: HttpClient;
let agent: FakeAgent;
let runtime: FakeRuntime;

beforeAll(async () => {
  app = await startTestApp({ clock });
  http = app.tenant.http;
  agent = new FakeAgent();
  runtime = new FakeRuntime(await agent.listen());
  useRuntime(app, runtime);
});
afterAll(async () => {
  await app?.close();
  await agent?.close();
});

const create = async (client: HttpClient, body: Record<string, unknown> = {}) => {
  const res = await client.post('/browsers', body);
  expect(res.status).toBe(200);
  return res.body as { session_id: string; [k: string]: any };
};
const ids = (res: { body: Array<{ session_id: string }> }) => res.body.map((b) => b.session_id);

describe('GET /browsers/{id_or_name}', () => {
  it('finds a session by id or by name, with usage.uptime_ms counted from its start', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { name: 'Reader' });
    clock.advance(1500);
    const byId = await client.get(`/browsers/${s.session_id}`);
    expect(byId.status).toBe(200);
    expect(byId.body.usage).toEqual({ uptime_ms: 1500 });
    expect((await client.get('/browsers/reader')).body.session_id).toBe(s.session_id);
  });

  it('renews the token on every read', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client);
    clock.advance(60_000);
    const again = await client.get(`/browsers/${s.session_id}`);
    expect(again.body.cdp_ws_url).not.toBe(s.cdp_ws_url);
  });

  it('uses the Host header and X-Forwarded-Proto for the WebSocket URLs', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client);
    const res = await client.get(`/browsers/${s.session_id}`, { 'x-forwarded-proto': 'https' });
    expect(res.body.cdp_ws_url).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/browsers\//);
  });

  it('finds deleted sessions only with include_deleted=true, and shows deleted_at', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { name: 'gone' });
    clock.advance(1000);
    await client.delete(`/browsers/${s.session_id}`);
    expect((await client.get(`/browsers/${s.session_id}`)).status).toBe(404);
    const res = await client.get(`/browsers/${s.session_id}?include_deleted=true`);
    expect(res.status).toBe(200);
    expect(res.body.deleted_at).toBe(clock.now().toISOString());
    expect(res.body.usage.uptime_ms).toBe(1000);
    expect((await client.get('/browsers/gone?include_deleted=true')).body.session_id).toBe(s.session_id);
  });

  it('hides other projects’ and other orgs’ sessions (404), by id and by name', async () => {
    const mine = await newProject(http);
    const s = await create(mine.http, { name: 'private' });
    const sibling = await newProject(http);
    const stranger = await app.newTenant('stranger');
    for (const client of [sibling.http, stranger.http]) {
      for (const path of [`/browsers/${s.session_id}`, '/browsers/private']) {
        expect((await client.get(path)).status).toBe(404);
        expect((await client.patch(path, { name: 'x' })).status).toBe(404);
        expect((await client.delete(path)).status).toBe(404);
      }
      expect(ids(await client.get('/browsers'))).not.toContain(s.session_id);
    }
    expect((await mine.http.get(`/browsers/${s.session_id}`)).status).toBe(200);
  });
});

describe('GET /browsers', () => {
  it('lists active sessions newest first, with status=deleted|all and the deprecated include_deleted', async () => {
    const { http: client } = await newProject(http);
    const a = await create(client);
    const b = await create(client);
    const c = await create(client);
    await client.delete(`/browsers/${b.session_id}`);
    expect(ids(await client.get('/browsers'))).toEqual([c.session_id, a.session_id]);
    expect(ids(await client.get('/browsers?status=active'))).toEqual([c.session_id, a.session_id]);
    expect(ids(await client.get('/browsers?status=deleted'))).toEqual([b.session_id]);
    expect(ids(await client.get('/browsers?status=all'))).toEqual([c.session_id, b.session_id, a.session_id]);
    expect(ids(await client.get('/browsers?include_deleted=true'))).toEqual([c.session_id, b.session_id, a.session_id]);
    const bad = await client.get('/browsers?status=gone');
    expect(bad.status).toBe(400);
    expect(errorFields(bad)).toEqual(['query.status']);
  });

  it('filters by tags[k]=v, every pair exactly', async () => {
    const { http: client } = await newProject(http);
    const a = await create(client, { tags: { team: 'growth', env: 'prod' } });
    const b = await create(client, { tags: { team: 'growth', env: 'dev' } });
    await create(client, { tags: { team: 'core' } });
    expect(ids(await client.get('/browsers?tags%5Bteam%5D=growth'))).toEqual([b.session_id, a.session_id]);
    expect(ids(await client.get('/browsers?tags[team]=growth&tags[env]=prod'))).toEqual([a.session_id]);
    expect(ids(await client.get('/browsers?tags[team]=grow'))).toEqual([]);
    expect((await client.get('/browsers?tags=team')).status).toBe(400);
  });

  it('searches by name, session id, profile id and proxy id', async () => {
    const project = await newProject(http);
    const profile = (await project.http.post('/profiles', { name: 'searchable' })).body;
    const proxy = (await project.http.post('/proxies', { type: 'custom', name: 'p', config: { host: 'proxy.example.test', port: 8080 } })).body;
    const named = await create(project.http, { name: 'Nightly-Crawler' });
    const withProfile = await create(project.http, { profile: { id: profile.id } });
    const withProxy = await create(project.http, { proxy_id: proxy.id });
    expect(ids(await project.http.get('/browsers?query=crawl'))).toEqual([named.session_id]);
    expect(ids(await project.http.get(`/browsers?query=${named.session_id}`))).toEqual([named.session_id]);
    expect(ids(await project.http.get(`/browsers?query=${profile.id}`))).toEqual([withProfile.session_id]);
    expect(ids(await project.http.get(`/browsers?query=${proxy.id}`))).toEqual([withProxy.session_id]);
    expect(ids(await project.http.get('/browsers?query=%25'))).toEqual([]);
  });

  it('pages with X-Has-More and X-Next-Offset', async () => {
    const { http: client } = await newProject(http);
    const made = [];
    for (let i = 0; i < 5; i++) made.unshift((await create(client)).session_id);
    const first = await client.get('/browsers?limit=2');
    expect(ids(first)).toEqual(made.slice(0, 2));
    expect(first.headers.get('x-has-more')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('2');
    const last = await client.get('/browsers?limit=2&offset=4');
    expect(ids(last)).toEqual(made.slice(4));
    expect(last.headers.get('x-has-more')).toBe('false');
    expect(last.headers.get('x-next-offset')).toBe('0');
  });
});

describe('PATCH /browsers/{id_or_name}', () => {
  it('changes the name; "" and null clear it; names stay unique', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { name: 'one' });
    await create(client, { name: 'taken' });
    expect((await client.patch('/browsers/one', { name: 'two' })).body.name).toBe('two');
    const clash = await client.patch('/browsers/two', { name: 'TAKEN' });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('browser_name_taken');
    expect((await client.patch(`/browsers/${s.session_id}`, { name: '' })).body).not.toHaveProperty('name');
    await client.patch(`/browsers/${s.session_id}`, { name: 'three' });
    expect((await client.patch(`/browsers/${s.session_id}`, { name: null })).body).not.toHaveProperty('name');
    expect((await client.patch(`/browsers/${s.session_id}`, {})).body.tags).toEqual({});
  });

  it('replaces tags as a whole; {} and null clear them; at most 50', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { tags: { a: '1', b: '2' } });
    expect((await client.patch(`/browsers/${s.session_id}`, { tags: { c: '3' } })).body.tags).toEqual({ c: '3' });
    expect((await client.patch(`/browsers/${s.session_id}`, { name: 'x' })).body.tags).toEqual({ c: '3' });
    expect((await client.patch(`/browsers/${s.session_id}`, { tags: {} })).body.tags).toEqual({});
    await client.patch(`/browsers/${s.session_id}`, { tags: { d: '4' } });
    expect((await client.patch(`/browsers/${s.session_id}`, { tags: null })).body.tags).toEqual({});
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    expect((await client.patch(`/browsers/${s.session_id}`, { tags: many })).status).toBe(400);
  });

  it('sets and removes proxy_id; an unknown proxy is 404', async () => {
    const project = await newProject(http);
    const proxy = (await project.http.post('/proxies', { type: 'custom', name: 'p', config: { host: 'proxy.example.test', port: 8080 } })).body;
    const s = await create(project.http);
    expect((await project.http.patch(`/browsers/${s.session_id}`, { proxy_id: proxy.id })).body.proxy_id).toBe(proxy.id);
    expect((await project.http.patch(`/browsers/${s.session_id}`, { proxy_id: 'proxy_nope' })).status).toBe(404);
    expect((await project.http.patch(`/browsers/${s.session_id}`, { proxy_id: '' })).body).not.toHaveProperty('proxy_id');
    await project.http.patch(`/browsers/${s.session_id}`, { proxy_id: proxy.id });
    expect((await project.http.patch(`/browsers/${s.session_id}`, { proxy_id: null })).body).not.toHaveProperty('proxy_id');
  });

  it('merges telemetry per CONTRACT §1.2', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { telemetry: { enabled: true } });
    const on = (res: any) =>
      Object.entries(res.body.telemetry?.browser ?? {})
        .filter(([, v]: any) => v.enabled)
        .map(([k]) => k)
        .sort();
    expect(on({ body: s })).toEqual(['captcha', 'connection', 'control', 'system']);
    const path = `/browsers/${s.session_id}`;
    expect(on(await client.patch(path, { telemetry: { browser: { console: { enabled: true }, captcha: { enabled: false } } } }))).toEqual([
      'connection',
      'console',
      'control',
      'system',
    ]);
    expect(on(await client.patch(path, { telemetry: {} }))).toEqual(['connection', 'console', 'control', 'system']);
    expect(on(await client.patch(path, { telemetry: null }))).toEqual(['connection', 'console', 'control', 'system']);
    expect((await client.patch(path, { telemetry: { enabled: false } })).body.telemetry).toBeNull();
    expect(on(await client.patch(path, { telemetry: { browser: { page: { enabled: true } } } }))).toEqual(['page']);
    expect((await client.patch(path, { telemetry: { enabled: false, browser: {} } })).status).toBe(400);
  });

  it('stores a new viewport (default refresh rate 25) and accepts force', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client);
    const res = await client.patch(`/browsers/${s.session_id}`, { viewport: { width: 800, height: 600, force: true } });
    expect(res.body.viewport).toEqual({ width: 800, height: 600, refresh_rate: 25 });
    expect((await client.patch(`/browsers/${s.session_id}`, { viewport: { width: -1, height: 600 } })).status).toBe(400);
  });

  it('loads a profile only while the session has none', async () => {
    const project = await newProject(http);
    const profile = (await project.http.post('/profiles', { name: 'later' })).body;
    const s = await create(project.http);
    expect((await project.http.patch(`/browsers/${s.session_id}`, { profile: { name: 'missing' } })).status).toBe(404);
    const res = await project.http.patch(`/browsers/${s.session_id}`, { profile: { name: 'later' } });
    expect(res.body.profile.id).toBe(profile.id);
    const again = await project.http.patch(`/browsers/${s.session_id}`, { profile: { id: profile.id } });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('profile_already_loaded');
  });

  it('refuses unknown fields and does not touch deleted sessions', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client);
    expect(errorFields(await client.patch(`/browsers/${s.session_id}`, { headless: true }))).toEqual(['body']);
    await client.delete(`/browsers/${s.session_id}`);
    expect((await client.patch(`/browsers/${s.session_id}`, { name: 'x' })).status).toBe(404);
  });
});

describe('DELETE /browsers/{id_or_name}', () => {
  it('terminates the browser, marks the session deleted and answers 204; then 404', async () => {
    const { http: client } = await newProject(http);
    const s = await create(client, { name: 'bye' });
    const res = await client.delete('/browsers/bye');
    expect(res.status).toBe(204);
    expect(runtime.terminated).toContain(s.session_id);
    const row = await app.database.db.query('SELECT deleted_at, deleted_reason FROM browser_sessions WHERE id = $1', [s.session_id]);
    expect(row.rows[0]).toEqual({ deleted_at: clock.now(), deleted_reason: 'deleted' });
    expect((await client.delete('/browsers/bye')).status).toBe(404);
    expect((await client.delete('/browsers/bs_unknown')).status).toBe(404);
  });

  it('keeps the project from being deleted while a session lives', async () => {
    const project = await newProject(http);
    const s = await create(project.http);
    const blocked = await http.delete(`/org/projects/${project.id}`);
    expect(blocked.status).toBe(409);
    expect(blocked.text).toContain('browser_sessions');
    await project.http.delete(`/browsers/${s.session_id}`);
    expect((await http.delete(`/org/projects/${project.id}`)).status).toBe(204);
  });
});
