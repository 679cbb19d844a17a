import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { FixedClock } from '../../api/src/clock.js';
import { CDP_TOKEN_TTL_MS } from '../../api/src/modules/browsers/cdp-token.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakeAgent, FakeRuntime, newProject, startCdpProxy, useRuntime } from './browsers.fixtures.js';

/*
 * The API logic here (validation, caps, PATCH rules, launch failures and hangs) runs
 * against a stand-in runtime and agent (browsers.fixtures.ts): injected launch failures
 * cannot be produced with real Chromium on demand. Real sessions are exercised in
 * browsers-chromium.test.ts (Playwright over cdp_ws_url, the idle reaper, the cap with
 * real browsers) and in the SDK e2e tests.
 */

const clock = new FixedClock(new Date());
let app: TestApp;
let http: HttpClient;
let agent: FakeAgent;
let runtime: FakeRuntime;
let cdp: Awaited<ReturnType<typeof startCdpProxy>>;

beforeAll(async () => {
  app = await startTestApp({ clock });
  http = app.tenant.http;
  agent = new FakeAgent();
  runtime = new FakeRuntime(await agent.listen());
  useRuntime(app, runtime);
  cdp = await startCdpProxy(app);
});
afterAll(async () => {
  await cdp?.close();
  await app?.close();
  await agent?.close();
});

const create = async (client: HttpClient, body: Record<string, unknown> = {}) => {
  const res = await client.post('/browsers', body);
  expect(res.status).toBe(200);
  return res.body as { session_id: string; cdp_ws_url: string; webdriver_ws_url: string };
};
const deletedReason = async (id: string) =>
  (await app.database.db.query<{ deleted_reason: string | null }>('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [id])).rows[0]!
    .deleted_reason;

/** Opens a WebSocket; resolves with it, or with the HTTP status that refused the upgrade. */
function connect(url: string): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('error', reject);
  });
}

describe('the CDP WebSocket through the service', () => {
  it('pipes frames both ways to the agent and counts the connection', async () => {
    const s = await create((await newProject(http)).http);
    const ws = await connect(cdp.rewrite(s.cdp_ws_url));
    expect(ws).toBeInstanceOf(WebSocket);
    const socket = ws as WebSocket;
    const echoed = new Promise<string>((resolve) => socket.once('message', (data) => resolve((data as Buffer).toString())));
    socket.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
    expect(JSON.parse(await echoed)).toEqual({ id: 1, method: 'Browser.getVersion' });
    expect(cdp.proxy.connections.count(s.session_id)).toBe(1);
    socket.close();
    await new Promise((resolve) => socket.once('close', resolve));
    await expect.poll(() => cdp.proxy.connections.count(s.session_id)).toBe(0);
  });

  it('refuses a missing or malformed token with 401, a token of another session with 403, an expired one with 401', async () => {
    const client = (await newProject(http)).http;
    const a = await create(client);
    const b = await create(client);
    const url = new URL(cdp.rewrite(a.cdp_ws_url));
    const tokenOfB = new URL(b.cdp_ws_url).searchParams.get('token')!;
    const without = new URL(url);
    without.search = '';
    expect(await connect(without.toString())).toBe(401);
    expect(await connect(`${without.toString()}?token=abc`)).toBe(401);
    expect(await connect(`${without.toString()}?token=${tokenOfB}`)).toBe(403);
    clock.advance(CDP_TOKEN_TTL_MS + 1000);
    try {
      expect(await connect(url.toString())).toBe(401);
    } finally {
      clock.advance(-(CDP_TOKEN_TTL_MS + 1000));
    }
  });

  it('answers 404 on every WebSocket of a deleted session', async () => {
    const client = (await newProject(http)).http;
    const s = await create(client);
    await client.delete(`/browsers/${s.session_id}`);
    expect(await connect(cdp.rewrite(s.cdp_ws_url))).toBe(404);
    expect(await connect(cdp.rewrite(s.webdriver_ws_url))).toBe(404);
    expect(await connect(cdp.rewrite(s.cdp_ws_url.replace('/cdp?', '/vnc?')))).toBe(404);
  });

  it('answers 502 when the agent refuses a WebSocket (this stand-in agent serves only /cdp)', async () => {
    const client = (await newProject(http)).http;
    const s = await create(client);
    expect(await connect(cdp.rewrite(s.webdriver_ws_url))).toBe(502);
  });

  it('closes the client when the agent goes away', async () => {
    const s = await create((await newProject(http)).http);
    const socket = (await connect(cdp.rewrite(s.cdp_ws_url))) as WebSocket;
    const closed = new Promise((resolve) => socket.once('close', resolve));
    // Closing the fake agent stands in for the browser going away.
    await agent.close();
    await closed;
    agent = new FakeAgent();
    runtime = new FakeRuntime(await agent.listen());
    useRuntime(app, runtime);
  });
});

describe('the idle reaper', () => {
  it('deletes a session with no CDP client for timeout_seconds, not before', async () => {
    const s = await create((await newProject(http)).http, { timeout_seconds: 10 });
    const reaper = new IdleReaper(app.deps, { connections: cdp.proxy.connections });
    agent.connections = 0;
    agent.idleSince = null;
    clock.advance(9_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBeNull();
    clock.advance(1_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBe('idle_timeout');
    expect(runtime.terminated).toContain(s.session_id);
  });

  it('keeps a session alive while a client is connected, and counts idleness from when it left', async () => {
    const s = await create((await newProject(http)).http, { timeout_seconds: 10 });
    const reaper = new IdleReaper(app.deps, { connections: cdp.proxy.connections });
    agent.idleSince = null;
    agent.connections = 1;
    clock.advance(60_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBeNull();
    agent.connections = 0;
    clock.advance(9_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBeNull();
    clock.advance(1_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBe('idle_timeout');
  });

  it('counts the connections the service proxies itself', async () => {
    const s = await create((await newProject(http)).http, { timeout_seconds: 10 });
    const reaper = new IdleReaper(app.deps, { connections: cdp.proxy.connections });
    agent.connections = 0;
    agent.idleSince = null;
    const socket = (await connect(cdp.rewrite(s.cdp_ws_url))) as WebSocket;
    clock.advance(30_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBeNull();
    socket.close();
    await expect.poll(() => cdp.proxy.connections.count(s.session_id)).toBe(0);
    clock.advance(10_000);
    await reaper.tick();
    expect(await deletedReason(s.session_id)).toBe('idle_timeout');
  });

  it('deletes a session whose browser is gone', async () => {
    const s = await create((await newProject(http)).http, { timeout_seconds: 600 });
    const reaper = new IdleReaper(app.deps);
    agent.healthy = false;
    runtime.browsers.delete(s.session_id);
    try {
      await reaper.tick();
    } finally {
      agent.healthy = true;
    }
    expect(await deletedReason(s.session_id)).toBe('browser_gone');
  });

  it('runs on its interval once started, and stops', async () => {
    const reaper = new IdleReaper(app.deps, { intervalMs: 20 });
    const s = await create((await newProject(http)).http, { timeout_seconds: 10 });
    agent.connections = 0;
    agent.idleSince = null;
    clock.advance(10_000);
    reaper.start();
    await expect.poll(() => deletedReason(s.session_id)).toBe('idle_timeout');
    await reaper.stop();
  });
});

describe('browsers of an invocation', () => {
  const invocation = async (client: HttpClient) =>
    (await client.post('/invocations', { app_name: 'a', action_name: 'b', version: '1', async: true })).body.id as string;

  it('lists them, and DELETE /invocations/{id}/browsers deletes them', async () => {
    const { http: client } = await newProject(http);
    const inv = await invocation(client);
    const owned = await create(client, { invocation_id: inv });
    const other = await create(client);
    const listed = await client.get(`/invocations/${inv}/browsers`);
    expect(listed.status).toBe(200);
    expect((listed.body.browsers as Array<{ session_id: string }>).map((b) => b.session_id)).toEqual([owned.session_id]);
    expect(listed.body.browsers[0].cdp_ws_url).toMatch(/^ws:\/\/localhost\/browsers\/.+\/cdp\?token=/);
    expect((await client.delete(`/invocations/${inv}/browsers`)).status).toBe(204);
    expect(await deletedReason(owned.session_id)).toBe('invocation_finished');
    expect(await deletedReason(other.session_id)).toBeNull();
    expect((await client.get(`/invocations/${inv}/browsers`)).body.browsers).toEqual([]);
  });

  it('finishing the invocation deletes its browsers', async () => {
    const { http: client } = await newProject(http);
    const inv = await invocation(client);
    const owned = await create(client, { invocation_id: inv });
    expect((await client.patch(`/invocations/${inv}`, { status: 'running' })).status).toBe(200);
    expect(await deletedReason(owned.session_id)).toBeNull();
    expect((await client.patch(`/invocations/${inv}`, { status: 'failed' })).status).toBe(200);
    expect(await deletedReason(owned.session_id)).toBe('invocation_finished');
  });

  it('the reaper deletes browsers of invocations that finished without the hook', async () => {
    const { http: client } = await newProject(http);
    const inv = await invocation(client);
    const owned = await create(client, { invocation_id: inv, timeout_seconds: 600 });
    await app.database.db.query(`UPDATE invocations SET status = 'succeeded', finished_at = now() WHERE id = $1`, [inv]);
    await new IdleReaper(app.deps).tick();
    expect(await deletedReason(owned.session_id)).toBe('invocation_finished');
  });
});
