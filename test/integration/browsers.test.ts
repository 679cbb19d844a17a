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
  app = await startTestApp({ clock, settings: { orgMaxConcurrentSessions: 40 } });
  http = app.tenant.http;
  agent = new FakeAgent();
  runtime = new FakeRuntime(await agent.listen());
  useRuntime(app, runtime);
});
afterAll(async () => {
  await app?.close();
  await agent?.close();
});

const liveRows = async (projectId: string) =>
  (
    await app.database.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM browser_sessions WHERE project_id = $1 AND deleted_at IS NULL',
      [projectId],
    )
  ).rows[0]!.n;

describe('POST /browsers', () => {
  it('creates a session with the defaults and answers the BrowserSession', async () => {
    const { http: client } = await newProject(http);
    const res = await client.post('/browsers', {});
    expect(res.status).toBe(200);
    const id = res.body.session_id as string;
    expect(res.body).toEqual({
      session_id: expect.stringMatching(/^bs_[a-z2-7]+$/),
      cdp_ws_url: expect.stringMatching(new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/browsers/${id}/cdp\\?token=\\d+\\.[A-Za-z0-9_-]{43}$`)),
      webdriver_ws_url: expect.stringMatching(new RegExp(`/browsers/${id}/webdriver\\?token=`)),
      browser_live_view_url: expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/browsers/${id}/live\\?token=`)),
      created_at: START.toISOString(),
      headless: false,
      stealth: false,
      gpu: false,
      kiosk_mode: false,
      timeout_seconds: 60,
      region: 'us-east',
      memory: '8GiB',
      viewport: { width: 1920, height: 1080, refresh_rate: 25 },
      tags: {},
      telemetry: null,
      usage: { uptime_ms: 0 },
    });
    expect(res.body.cdp_ws_url).not.toMatch(/jwt=/);
    expect(res.body).not.toHaveProperty('base_url');
    expect(runtime.launched.at(-1)).toMatchObject({ browserId: id, headless: false, viewport: { width: 1920, height: 1080, refreshRate: 25 } });
  });

  it('stores and echoes every field it was given, and hands the launch spec to the runtime', async () => {
    const project = await newProject(http);
    const profile = (await project.http.post('/profiles', { name: 'shopper' })).body;
    const proxy = (
      await project.http.post('/proxies', { type: 'custom', name: 'p', config: { host: 'proxy.example.test', port: 3128, username: 'u', password: 'secret' } })
    ).body;
    expect(proxy.id).toBeTruthy();
    const body = {
      name: 'checkout-bot',
      headless: true,
      stealth: true,
      gpu: false,
      kiosk_mode: true,
      start_url: 'https://example.test/start',
      timeout_seconds: 600,
      proxy_id: proxy.id,
      profile: { name: 'shopper', save_changes: true },
      extensions: [],
      viewport: { width: 1280, height: 720, refresh_rate: 60 },
      chrome_policy: { BookmarkBarEnabled: false, HomepageLocation: 'https://example.test' },
      tags: { team: 'growth', env: 'prod' },
      telemetry: { enabled: true, browser: { network: { enabled: true }, captcha: { enabled: false } } },
    };
    const res = await project.http.post('/browsers', body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      name: 'checkout-bot',
      headless: true,
      stealth: true,
      kiosk_mode: true,
      start_url: 'https://example.test/start',
      timeout_seconds: 600,
      proxy_id: proxy.id,
      profile: { id: profile.id, name: 'shopper', created_at: expect.any(String) },
      viewport: { width: 1280, height: 720, refresh_rate: 60 },
      chrome_policy: body.chrome_policy,
      tags: body.tags,
    });
    expect(res.body.telemetry.browser).toEqual({
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
    });
    expect(runtime.launched.at(-1)).toMatchObject({
      browserId: res.body.session_id,
      headless: true,
      stealth: true,
      kioskMode: true,
      startUrl: 'https://example.test/start',
      viewport: { width: 1280, height: 720, refreshRate: 60 },
      chromePolicy: body.chrome_policy,
      proxy: { url: 'http://proxy.example.test:3128', username: 'u', password: 'secret', bypassHosts: [] },
      labels: body.tags,
    });
    const got = await project.http.get(`/browsers/${res.body.session_id}`);
    expect({ ...got.body, cdp_ws_url: '', webdriver_ws_url: '' }).toEqual({ ...res.body, cdp_ws_url: '', webdriver_ws_url: '' });
  });

  it.each([
    ['a timeout below 10', { timeout_seconds: 9 }, ['body.timeout_seconds']],
    ['a timeout above 259200', { timeout_seconds: 259201 }, ['body.timeout_seconds']],
    ['a fractional timeout', { timeout_seconds: 10.5 }, ['body.timeout_seconds']],
    ['a zero-width viewport', { viewport: { width: 0, height: 10 } }, ['body.viewport.width']],
    ['a viewport without height', { viewport: { width: 800 } }, ['body.viewport.height']],
    ['a refresh rate of 0', { viewport: { width: 800, height: 600, refresh_rate: 0 } }, ['body.viewport.refresh_rate']],
    ['an unknown viewport field', { viewport: { width: 800, height: 600, depth: 24 } }, ['body.viewport']],
    ['51 tags', { tags: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }, ['body.tags']],
    ['a tag value that is not a string', { tags: { a: 1 } }, ['body.tags.a']],
    ['a tag key with brackets', { tags: { 'a[b]': 'x' } }, ['body.tags.a[b]']],
    ['a name with a control character', { name: 'a\u0001b' }, ['body.name']],
    ['a name of 256 characters', { name: 'x'.repeat(256) }, ['body.name']],
    ['gpu true', { gpu: true }, ['body.gpu']],
    ['a non-boolean headless', { headless: 'yes' }, ['body.headless']],
    ['a non-boolean stealth', { stealth: 1 }, ['body.stealth']],
    ['a non-boolean kiosk_mode', { kiosk_mode: 'true' }, ['body.kiosk_mode']],
    ['a start_url that is not a URL', { start_url: 'not a url' }, ['body.start_url']],
    ['a file: start_url', { start_url: 'file:///etc/passwd' }, ['body.start_url']],
    ['a profile with both id and name', { profile: { id: 'prof_x', name: 'x' } }, ['body.profile']],
    ['a profile with neither', { profile: { save_changes: true } }, ['body.profile']],
    ['a profile name with a space', { profile: { name: 'my profile' } }, ['body.profile.name']],
    ['an extension with both id and name', { extensions: [{ id: 'ext_x', name: 'x' }] }, ['body.extensions.0']],
    ['an empty proxy_id', { proxy_id: '' }, ['body.proxy_id']],
    ['telemetry enabled false with categories', { telemetry: { enabled: false, browser: { page: { enabled: true } } } }, ['body.telemetry.browser']],
    ['an unknown telemetry category', { telemetry: { browser: { audio: { enabled: true } } } }, ['body.telemetry.browser']],
    ['chrome_policy that is not an object', { chrome_policy: ['ProxyMode'] }, ['body.chrome_policy']],
    ['an unknown field', { headles: true }, ['body']],
  ])('refuses %s with 400 naming the field, and creates nothing', async (_label, body, fields) => {
    const project = await newProject(http);
    const res = await project.http.post('/browsers', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(errorFields(res)).toEqual(fields);
    expect(await liveRows(project.id)).toBe(0);
  });

  it.each(['ProxyMode', 'ProxyServer', 'ProxySettings', 'RemoteDebuggingAllowed', 'DeveloperToolsAvailability', 'ExtensionInstallForcelist', 'UserDataDir', 'IncognitoModeAvailability'])(
    'refuses the chrome policy %s with 400 naming it',
    async (policy) => {
      const project = await newProject(http);
      const res = await project.http.post('/browsers', { chrome_policy: { BookmarkBarEnabled: true, [policy]: 1 } });
      expect(res.status).toBe(400);
      expect(errorFields(res)).toEqual([`body.chrome_policy.${policy}`]);
      expect(res.body.message).toContain(`policy ${policy} cannot be set`);
    },
  );

  it('refuses a gpu session with a message saying why', async () => {
    const res = await (await newProject(http)).http.post('/browsers', { gpu: true });
    expect(res.body.details[0].message).toMatch(/no GPU is available/);
  });

  it('answers 404 for a proxy, profile or invocation that is not in the project', async () => {
    const project = await newProject(http);
    const other = await newProject(http);
    const foreignProfile = (await other.http.post('/profiles', { name: 'theirs' })).body;
    const foreignInvocation = (await other.http.post('/invocations', { app_name: 'a', action_name: 'b', version: '1' })).body;
    for (const [body, what] of [
      [{ proxy_id: 'proxy_missing' }, 'Proxy'],
      [{ profile: { id: foreignProfile.id } }, 'Profile'],
      [{ profile: { name: 'theirs' } }, 'Profile'],
      [{ invocation_id: foreignInvocation.id }, 'Invocation'],
    ] as const) {
      const res = await project.http.post('/browsers', body);
      expect(res.status, JSON.stringify(body)).toBe(404);
      expect(res.body.message).toMatch(new RegExp(`^${what} `));
    }
    expect(await liveRows(project.id)).toBe(0);
  });

  it('refuses an invocation that already finished with 409 invocation_finished', async () => {
    const project = await newProject(http);
    const inv = (await project.http.post('/invocations', { app_name: 'a', action_name: 'b', version: '1' })).body;
    await project.http.patch(`/invocations/${inv.id}`, { status: 'succeeded' });
    const res = await project.http.post('/browsers', { invocation_id: inv.id });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('invocation_finished');
    expect(res.headers.get('x-should-retry')).toBe('false');
  });

  it('keeps names unique among active sessions (case-insensitive); a deleted session frees its name', async () => {
    const project = await newProject(http);
    const first = await project.http.post('/browsers', { name: 'Bot' });
    const again = await project.http.post('/browsers', { name: 'bot' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('browser_name_taken');
    expect(again.headers.get('x-should-retry')).toBe('false');
    expect((await (await newProject(http)).http.post('/browsers', { name: 'Bot' })).status).toBe(200);
    expect((await project.http.delete(`/browsers/${first.body.session_id}`)).status).toBe(204);
    expect((await project.http.post('/browsers', { name: 'Bot' })).status).toBe(200);
  });

  it('lets one live session write a profile back at a time (409 profile_in_use)', async () => {
    const project = await newProject(http);
    await project.http.post('/profiles', { name: 'shared' });
    expect((await project.http.post('/browsers', { profile: { name: 'shared', save_changes: true } })).status).toBe(200);
    const second = await project.http.post('/browsers', { profile: { name: 'shared', save_changes: true } });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe('profile_in_use');
    expect((await project.http.post('/browsers', { profile: { name: 'shared' } })).status).toBe(200);
  });

  it('marks the session deleted and answers 502 when the browser fails to start', async () => {
    const project = await newProject(http);
    runtime.mode = 'fail';
    try {
      const res = await project.http.post('/browsers', { name: 'doomed' });
      expect(res.status).toBe(502);
      expect(res.body.code).toBe('browser_launch_failed');
      expect(res.body.message).toContain('chromium exited with code 1');
      expect(res.headers.get('x-should-retry')).toBe('false');
    } finally {
      runtime.mode = 'ready';
    }
    const rows = await app.database.db.query('SELECT deleted_reason FROM browser_sessions WHERE project_id = $1', [project.id]);
    expect(rows.rows).toEqual([{ deleted_reason: 'launch_failed' }]);
    expect((await project.http.post('/browsers', { name: 'doomed' })).status).toBe(200);
  });
});

describe('max_concurrent_sessions', () => {
  it('admits exactly the cap out of 20 parallel creates; the rest get 429 concurrency_limit_exceeded', async () => {
    const project = await newProject(http, { max_concurrent_sessions: 5 });
    const results = await Promise.all(Array.from({ length: 20 }, () => project.http.post('/browsers', {})));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    const refused = results.find((r) => r.status === 429)!;
    expect(refused.body.code).toBe('concurrency_limit_exceeded');
    expect(refused.body.message).toMatch(/project allows 5 concurrent browser sessions/);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await liveRows(project.id)).toBe(5);
  });

  it('frees a slot when a session is deleted', async () => {
    const project = await newProject(http, { max_concurrent_sessions: 1 });
    const first = await project.http.post('/browsers', {});
    expect((await project.http.post('/browsers', {})).status).toBe(429);
    await project.http.delete(`/browsers/${first.body.session_id}`);
    expect((await project.http.post('/browsers', {})).status).toBe(200);
  });

  it('falls back to the org default for projects without their own cap', async () => {
    const tenant = await app.newTenant('defaults');
    expect((await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 2 })).status).toBe(200);
    const project = await newProject(tenant.http);
    expect((await project.http.post('/browsers', {})).status).toBe(200);
    expect((await project.http.post('/browsers', {})).status).toBe(200);
    expect((await project.http.post('/browsers', {})).status).toBe(429);
  });

  it('enforces the org cap across projects, atomically', async () => {
    const tenant = await app.newTenant('org-cap');
    const a = await newProject(tenant.http);
    const b = await newProject(tenant.http);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).http.post('/browsers', {})));
    expect(results.filter((r) => r.status === 200)).toHaveLength(40);
    const refused = results.filter((r) => r.status === 429);
    expect(refused).toHaveLength(10);
    expect(refused[0]!.body.message).toMatch(/organisation allows 40/);
  });
});
