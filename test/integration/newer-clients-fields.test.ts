import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The fields newer SDKs (Python 0.131) send or require, on everything that needs no
 * running browser: pools (never filled here: no background loop), org limits,
 * invocations, auth connections, and browser creates refused before any launch.
 */
describe('newer clients: fields without a browser', () => {
  let app: TestApp;
  let http: HttpClient;
  const clock = new FixedClock(new Date('2026-10-01T08:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock, settings: { region: 'eu-west' } });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  let seq = 0;
  const count = async (table: string) =>
    (await app.database.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE org_id = $1`, [app.tenant.orgId])).rows[0]!.n;

  describe('browser pools', () => {
    it('accept region, memory and private_hosts, and report the configured region', async () => {
      const res = await http.post('/browser_pools', {
        name: `pool-${++seq}`,
        size: 1,
        region: 'ap-southeast',
        memory: '2GiB',
        network: { private_hosts: ['_.corp.example'] },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body.region).toBe('eu-west');
      for (const got of [(await http.get(`/browser_pools/${res.body.id}`)).body, (await http.get('/browser_pools')).body[0]]) {
        expect(got).toMatchObject({ id: res.body.id, region: 'eu-west' });
      }
      const patched = await http.patch(`/browser_pools/${res.body.id}`, { memory: '4GiB', network: { private_hosts: [] } });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.region).toBe('eu-west');
    });

    it.each([
      [{ region: 'mars-north' }, 'body.region'],
      [{ memory: '3GiB' }, 'body.memory'],
      [{ network: { allowed_hosts: ['example.com'] } }, 'body.network.allowed_hosts'],
      [{ network: { proxy_routes: [{ hosts: ['a.example'], proxy: { id: 'x' } }] } }, 'body.network.proxy_routes'],
      [{ network: { unknown: true } }, 'body.network'],
    ])('refuse %j with 400 and make no pool', async (bad, field) => {
      const before = await count('browser_pools');
      const res = await http.post('/browser_pools', { name: `bad-pool-${++seq}`, size: 1, ...bad });
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res)).toContain(field);
      expect(await count('browser_pools')).toBe(before);
    });
  });

  describe('browsers', () => {
    it.each([
      [{ region: 'moon' }, 'body.region'],
      [{ memory: '32GiB' }, 'body.memory'],
      [{ video_memory: '8GiB' }, 'body.video_memory'],
      [{ location: { timezone: 'Europe/Paris', planet: 'earth' } }, 'body.location'],
      [{ location: { timezone: 'Europe/Paris; rm -rf /' } }, 'body.location.timezone'],
      [{ network: { allowed_hosts: ['example.com'] } }, 'body.network.allowed_hosts'],
    ])('refuse %j on create with 400 before launching anything', async (bad, field) => {
      const before = await count('browser_sessions');
      const res = await http.post('/browsers', { headless: true, ...bad });
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res)).toContain(field);
      expect(await count('browser_sessions')).toBe(before);
    });

    it('say why an egress allowlist is refused', async () => {
      const res = await http.post('/browsers', { headless: true, network: { allowed_hosts: ['example.com'] } });
      expect(res.body.message).toContain('not enforced on this service');
    });
  });

  describe('GET /org/limits', () => {
    it('reports usage and the fields newer SDKs require', async () => {
      const tenant = await app.newTenant();
      const limits = await tenant.http.get('/org/limits');
      expect(limits.status).toBe(200);
      expect(limits.body).toEqual({
        max_concurrent_sessions: app.deps.settings.orgMaxConcurrentSessions,
        default_project_max_concurrent_sessions: null,
        concurrent_sessions_used: 0,
        concurrent_sessions_available: app.deps.settings.orgMaxConcurrentSessions,
        auth_connections_used: 0,
        max_auth_connections: null,
        min_health_check_interval_seconds: 300,
        vaults_used: 0,
        max_vaults: 0,
      });
      expect((await tenant.http.post('/auth/connections', { domain: 'example.com', profile_name: 'limits-profile' })).status).toBe(200);
      expect((await tenant.http.get('/org/limits')).body.auth_connections_used).toBe(1);
      // Another org's connections are not counted.
      expect((await app.tenant.http.post('/auth/connections', { domain: 'example.org', profile_name: `other-${++seq}` })).status).toBe(200);
      expect((await tenant.http.get('/org/limits')).body.auth_connections_used).toBe(1);
    });
  });

  describe('invocations', () => {
    const basic = { app_name: 'shop', action_name: 'checkout', version: '1.0.0', async: true };

    it('give a failed invocation a status_reason, and a succeeded one none', async () => {
      const failed = await http.post('/invocations', basic);
      expect((await http.patch(`/invocations/${failed.body.id}`, { status: 'failed' })).body.status_reason).toBe(
        'Marked failed with PATCH /invocations/{id}',
      );
      expect((await http.get(`/invocations/${failed.body.id}`)).body).toMatchObject({ status: 'failed', status_reason: expect.any(String) });
      const listed = (await http.get('/invocations?status=failed')).body as Array<{ id: string; status_reason?: string }>;
      expect(listed.find((i) => i.id === failed.body.id)?.status_reason).toBe('Marked failed with PATCH /invocations/{id}');

      const succeeded = await http.post('/invocations', basic);
      const done = await http.patch(`/invocations/${succeeded.body.id}`, { status: 'succeeded' });
      expect(done.body.status).toBe('succeeded');
      expect(done.body).not.toHaveProperty('status_reason');
    });
  });

  describe('auth connections: browser', () => {
    const createProxy = async (name: string) => {
      const res = await http.post('/proxies', { type: 'custom', name, config: { host: 'squid.corp.example', port: 3128 } });
      expect(res.status, res.text).toBe(200);
      return res.body as { id: string };
    };

    it('applies browser.proxy and browser.telemetry as proxy and browser_telemetry; ignores region and stealth', async () => {
      const proxy = await createProxy(`mauth-proxy-${++seq}`);
      const res = await http.post('/auth/connections', {
        domain: 'example.com',
        profile_name: `browser-opts-${seq}`,
        browser: { proxy: { id: proxy.id }, telemetry: { enabled: true }, region: 'us-west', stealth: false },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ proxy_id: proxy.id, browser_telemetry: { enabled: true } });

      const other = await createProxy(`mauth-proxy-${++seq}`);
      const patched = await http.patch(`/auth/connections/${res.body.id}`, { browser: { proxy: { name: `mauth-proxy-${seq}` } } });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.proxy_id).toBe(other.id);
    });

    it.each([
      [{ browser: { proxy: {} } }, 'body.browser.proxy'],
      [{ browser: { proxy: { id: 'a', mode: 'direct' } } }, 'body.browser.proxy'],
      [{ browser: { region: 'atlantis' } }, 'body.browser.region'],
      [{ browser: { headless: true } }, 'body.browser'],
      [{ browser: { telemetry: { enabled: true } }, browser_telemetry: { enabled: true } }, 'body.browser.telemetry'],
      [{ browser: { proxy: { name: 'p' } }, proxy: { name: 'p' } }, 'body.browser.proxy'],
    ])('refuses %j on create with 400 and makes no connection', async (bad, field) => {
      const before = await count('auth_connections');
      const res = await http.post('/auth/connections', { domain: 'example.com', profile_name: `bad-browser-${++seq}`, ...bad });
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res)).toContain(field);
      expect(await count('auth_connections')).toBe(before);
    });

    it('refuses a doubled or unknown browser option on login before any flow starts', async () => {
      const created = await http.post('/auth/connections', { domain: 'example.com', profile_name: `login-${++seq}` });
      for (const bad of [
        { browser: { telemetry: { enabled: true } }, browser_telemetry: { enabled: true } },
        { browser: { memory: '1GiB' } },
        { browser: { proxy: { mode: 'none' } } },
      ]) {
        const res = await http.post(`/auth/connections/${created.body.id}/login`, bad);
        expect(res.status, JSON.stringify(bad)).toBe(400);
      }
      expect((await http.get(`/auth/connections/${created.body.id}`)).body).toMatchObject({ flow_status: null, browser_session_id: null });
      expect(await count('auth_flows')).toBe(0);
    });

    it('refuses a proxy mode on update, which cannot remove a proxy, and changes nothing', async () => {
      const proxy = await createProxy(`mauth-proxy-${++seq}`);
      const created = await http.post('/auth/connections', { domain: 'example.com', profile_name: `mode-${seq}`, proxy: { id: proxy.id } });
      const res = await http.patch(`/auth/connections/${created.body.id}`, { browser: { proxy: { mode: 'direct' } }, record_session: true });
      expect(res.status, res.text).toBe(400);
      expect((await http.get(`/auth/connections/${created.body.id}`)).body).toMatchObject({ proxy_id: proxy.id, record_session: false });
    });
  });
});
