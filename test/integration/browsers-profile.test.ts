import { mkdtemp, mkdir, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { rawTar } from '../support/raw-tar.js';
import { archiveRequest, downloadedPaths, startStatePage, visit, type StatePage } from './browsers-profile.fixtures.js';

/** Profiles through real agents and real Chromium: loaded at start, saved back at the end. */

let app: TestApp;
let page: StatePage;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  // Its own loopback host: the cookie and the storage belong to this origin alone.
  page = await startStatePage('127.0.0.23');
});
afterAll(async () => {
  await app?.close();
  await page?.close();
});

const profileOf = async (client: HttpClient, name: string) => {
  const res = await client.get(`/profiles/${name}`);
  expect(res.status, res.text).toBe(200);
  return res.body as { id: string; updated_at: string; last_used_at?: string; org_id?: string };
};

const createSession = async (client: HttpClient, body: Record<string, unknown>) => {
  const res = await client.post('/browsers', { headless: true, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as { session_id: string; cdp_ws_url: string; profile?: { id: string; last_used_at?: string } };
};

const end = async (client: HttpClient, sessionId: string) => expect((await client.delete(`/browsers/${sessionId}`)).status).toBe(204);

/** 101 when the WebSocket opens, else the status the upgrade was refused with. */
const upgradeStatus = (url: string) =>
  new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', reject);
  });

const refOf = (projectId: string, profileId: string) => ({ orgId: app.tenant.orgId, projectId, profileId });

describe('a profile loaded into a session', () => {
  it('is saved back by a writer at DELETE; a reader sees the state and its own changes are not saved', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'round-trip' })).body;

    // Headful (the API's default) writes, headless reads: one profile serves both.
    const writer = await createSession(client, { headless: false, profile: { name: 'round-trip', save_changes: true } });
    expect(writer.profile?.last_used_at).toBeDefined();
    expect((await profileOf(client, 'round-trip')).last_used_at).toBe(writer.profile?.last_used_at);
    const secondWriter = await client.post('/browsers', { headless: true, profile: { name: 'round-trip', save_changes: true } });
    expect(secondWriter.status).toBe(409);
    expect(secondWriter.body.code).toBe('profile_in_use');
    const readerBeside = await createSession(client, { profile: { name: 'round-trip' } });
    await end(client, readerBeside.session_id);

    expect(await visit(writer.cdp_ws_url, page.url, 'A')).toEqual({ cookie: '', stored: null });
    await end(client, writer.session_id);

    const saved = await profileOf(client, 'round-trip');
    expect(Date.parse(saved.updated_at)).toBeGreaterThan(Date.parse(created.updated_at));
    const paths = await downloadedPaths(client, created.id);
    expect(paths).toContain('Default/Cookies');
    expect(paths.some((p) => p.startsWith('Default/Local Storage/leveldb/'))).toBe(true);
    // Caches and run-time files stay behind.
    expect(paths.filter((p) => /(^|\/)(Cache|Code Cache|GPUCache|DawnGraphiteCache|GPUPersistentCache)\/|Singleton|DevToolsActivePort|(^|\/)LOCK$/.test(p))).toEqual([]);

    const reader = await createSession(client, { profile: { name: 'round-trip' } });
    expect(await visit(reader.cdp_ws_url, page.url, 'B')).toEqual({ cookie: 'who=A', stored: 'A' });
    await end(client, reader.session_id);
    expect((await profileOf(client, 'round-trip')).updated_at).toBe(saved.updated_at);

    const later = await createSession(client, { profile: { id: created.id } });
    expect(await visit(later.cdp_ws_url, page.url)).toEqual({ cookie: 'who=A', stored: 'A' });
    await end(client, later.session_id);
  }, 240_000);

  it('is saved when the session ends by idle timeout', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'idle' })).body;
    const writer = await createSession(client, { timeout_seconds: 10, profile: { name: 'idle', save_changes: true } });
    await visit(writer.cdp_ws_url, page.url, 'idle');
    const reaper = new IdleReaper(app.deps, { connections: app.cdpProxy.connections });
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    await reaper.tick();
    expect((await client.get(`/browsers/${writer.session_id}`)).status).toBe(404);
    expect(Date.parse((await profileOf(client, 'idle')).updated_at)).toBeGreaterThan(Date.parse(created.updated_at));

    const reader = await createSession(client, { profile: { name: 'idle' } });
    expect(await visit(reader.cdp_ws_url, page.url)).toEqual({ cookie: 'who=idle', stored: 'idle' });
    await end(client, reader.session_id);
  }, 120_000);

  it('is not saved when Chromium crashes: the stored profile may not be replaced by half-written files', async () => {
    const { http: client, id: projectId } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'crash' })).body;
    const writer = await createSession(client, { profile: { name: 'crash', save_changes: true } });
    await visit(writer.cdp_ws_url, page.url, 'crash');
    const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [writer.session_id]);
    const health = (await (await fetch(`${rows[0]!.agent_url}/health?wait_ms=5000`, { headers: { authorization: `Bearer ${app.deps.agentTokens(writer.session_id)}` } })).json()) as { browser: { pid: number } };
    process.kill(health.browser.pid, 'SIGKILL');
    for (let i = 0; i < 100; i++) {
      const observed = await app.runtime.observe(writer.session_id);
      if (!observed || observed.phase === 'Failed' || observed.phase === 'Gone') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await new IdleReaper(app.deps, { connections: app.cdpProxy.connections }).tick();
    expect((await client.get(`/browsers/${writer.session_id}`)).status).toBe(404);
    expect((await profileOf(client, 'crash')).updated_at).toBe(created.updated_at);
    expect(await app.deps.profileStore.has(refOf(projectId, created.id))).toBe(false);
  }, 120_000);

  it('fails the launch with the reason when the stored profile cannot be restored', async () => {
    const { http: client, id: projectId } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'broken' })).body;
    // Only a store written behind the service's back can hold this: uploads are checked.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-broken-profile-'));
    try {
      await mkdir(path.join(dir, 'Default'));
      await symlink('/etc', path.join(dir, 'Default', 'escape'));
      await app.deps.profileStore.saveFrom(refOf(projectId, created.id), dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const res = await client.post('/browsers', { headless: true, profile: { name: 'broken' } });
    expect(res.status).toBe(502);
    expect(res.body.code).toBe('browser_launch_failed');
    expect(res.body.message).toMatch(/could not be unpacked: symlink "Default\/escape" points to the absolute path "\/etc"/);
  }, 60_000);

  it('can be attached to a running session that has none, when it holds nothing yet, and is saved at the end', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'late' })).body;
    const session = await createSession(client, {});
    const patched = await client.patch(`/browsers/${session.session_id}`, { profile: { name: 'late', save_changes: true } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.profile).toMatchObject({ id: created.id, last_used_at: expect.any(String) });
    await visit(session.cdp_ws_url, page.url, 'late');
    await end(client, session.session_id);
    expect(Date.parse((await profileOf(client, 'late')).updated_at)).toBeGreaterThan(Date.parse(created.updated_at));

    // Now it holds data, which a running browser cannot load (Chromium reads it only at start).
    const other = await createSession(client, {});
    const refused = await client.patch(`/browsers/${other.session_id}`, { profile: { name: 'late' } });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('profile_not_loadable');
    expect((await client.get(`/browsers/${other.session_id}`)).body.profile).toBeUndefined();
    await end(client, other.session_id);
  }, 120_000);
});

describe('the agent’s profile archive route', () => {
  it('takes only the session’s own profile token, writes only with save_changes, and refuses unsafe tars whole', async () => {
    const { http: client, id: projectId } = await newProject(app.tenant.http);
    const created = (await client.post('/profiles', { name: 'guarded' })).body;
    const ref = refOf(projectId, created.id);
    const writer = await createSession(client, { profile: { name: 'guarded', save_changes: true } });
    const reader = await createSession(client, { profile: { name: 'guarded' } });
    const tokens = createCdpTokens(app.deps);
    const own = (await tokens.issue(writer.session_id, 'profile')).token;
    const readerToken = (await tokens.issue(reader.session_id, 'profile')).token;
    const cdpToken = new URL(writer.cdp_ws_url).searchParams.get('token')!;
    const good = rawTar([{ path: 'Default/', type: 'Directory' }, { path: 'Default/Preferences', body: '{"ok":true}' }]);
    const put = (token: string | undefined, body: Buffer, sessionId = writer.session_id) => archiveRequest(app.url, sessionId, token, { method: 'PUT', body });
    const get = (token: string | undefined, sessionId = writer.session_id) => archiveRequest(app.url, sessionId, token, { method: 'GET' });

    expect((await get(undefined)).status).toBe(401);
    expect((await put('garbage', good)).status).toBe(401);
    for (const token of [cdpToken, readerToken]) {
      expect((await get(token)).status).toBe(403);
      expect((await put(token, good)).status).toBe(403);
    }
    // The writer's profile token is no CDP token either.
    expect(await upgradeStatus(writer.cdp_ws_url.replace(cdpToken, own))).toBe(403);
    expect(await upgradeStatus(writer.cdp_ws_url)).toBe(101);
    expect((await get(readerToken, reader.session_id)).status).toBe(204);
    const readOnly = await put(readerToken, good, reader.session_id);
    expect(readOnly.status).toBe(403);
    expect((readOnly.body as { code: string }).code).toBe('profile_read_only');

    const unsafe: [string, Buffer][] = [
      ['a path with ..', rawTar([{ path: 'Default/../../escape', body: 'x' }])],
      ['a leading ../', rawTar([{ path: '../escape', body: 'x' }])],
      ['an absolute path', rawTar([{ path: '/tmp/browserplane-owned', body: 'x' }])],
      ['a symlink leaving the profile', rawTar([{ path: 'Default/', type: 'Directory' }, { path: 'Default/up', type: 'SymbolicLink', linkpath: '../../..' }])],
      ['a symlink to an absolute path', rawTar([{ path: 'passwd', type: 'SymbolicLink', linkpath: '/etc/passwd' }])],
      ['a file written through a symlink', rawTar([{ path: 'here', type: 'SymbolicLink', linkpath: '.' }, { path: 'here/x', body: 'x' }])],
      ['a hard link', rawTar([{ path: 'a', body: 'x' }, { path: 'b', type: 'Link', linkpath: 'a' }])],
      ['a FIFO', rawTar([{ path: 'pipe', type: 'FIFO' }])],
      ['a good entry before a bad one', Buffer.concat([good.subarray(0, good.length - 1024), rawTar([{ path: '../late', body: 'x' }])])],
      ['bytes that are no tar', Buffer.from('this is not a tar archive at all, but it is long enough to be read as one block'.repeat(10))],
    ];
    for (const [what, body] of unsafe) {
      const res = await put(own, body);
      expect(res.status, what).toBe(400);
      expect((res.body as { code: string }).code, what).toBe('invalid_profile_archive');
      expect(await app.deps.profileStore.has(ref), what).toBe(false);
    }
    expect((await profileOf(client, 'guarded')).updated_at).toBe(created.updated_at);

    const accepted = await put(own, good);
    expect(accepted.status).toBe(200);
    expect(await downloadedPaths(client, created.id)).toEqual(['Default/', 'Default/Preferences']);
    expect((await get(own)).status).toBe(200);

    await end(client, reader.session_id);
    await end(client, writer.session_id);
    // The session is over: its token opens nothing any more.
    expect((await get(own)).status).toBe(404);
    expect((await put(own, good)).status).toBe(404);
  }, 120_000);
});
