import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import type { Connection } from './auth-connections.fixtures.js';

/** A managed auth login flow in real Chromium, started, shown and canceled through HTTP. */

describe('auth connections: a login flow in real Chromium', () => {
  let app: TestApp;
  let site: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    app = await startTestApp({ clock: systemClock });
    site = await startLoginPage();
  });
  afterAll(async () => {
    await app?.close();
    await site?.close();
  });

  it('starts a login, refuses a second one, shows the flow, and cancels it with its browser on delete', { timeout: 180_000 }, async () => {
    const api = app.tenant.http;
    const connection = await create(api, { domain: '127.0.0.1', profile_name: 'chromium-login', login_url: `${site.url}/login`, health_checks: false });
    const started = Date.now();
    // Two at once: exactly one starts, the other is told a flow is in progress.
    const both = await Promise.all([1, 2].map(() => api.post(`/auth/connections/${connection.id}/login`, {})));
    expect(both.map((r) => r.status).sort(), both.map((r) => r.text).join('\n')).toEqual([200, 409]);
    const login = both.find((r) => r.status === 200)!;
    expect(both.find((r) => r.status === 409)!.body.code).toBe('flow_in_progress');
    expect(login.body).toEqual({
      id: expect.stringMatching(/^maflow_/),
      flow_type: 'LOGIN',
      hosted_url: expect.any(String),
      handoff_code: expect.any(String),
      flow_expires_at: expect.any(String),
      live_view_url: expect.any(String),
    });
    expect(login.body.hosted_url).toBe(`${app.url}/auth/hosted/${login.body.id}#code=${login.body.handoff_code}`);
    expect(login.body.handoff_code.length).toBeGreaterThanOrEqual(24);
    const expiresIn = Date.parse(login.body.flow_expires_at) - started;
    expect(expiresIn).toBeGreaterThan(14 * 60_000);
    expect(expiresIn).toBeLessThan(16 * 60_000);

    const again = await api.post(`/auth/connections/${connection.id}/login`, {});
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe('flow_in_progress');

    const shown = await api.get(`/auth/connections/${connection.id}`);
    expect(shown.body).toMatchObject({ flow_status: 'IN_PROGRESS', flow_type: 'LOGIN', browser_session_id: expect.any(String) });
    const sessionId = shown.body.browser_session_id as string;
    expect(login.body.live_view_url).toContain(sessionId);
    expect((await api.get(`/browsers/${sessionId}`)).status).toBe(200);

    // The flow reads the page and waits for the username and password.
    const awaiting = await eventually(
      async () => {
        const res = await api.get<{ flow_step: string; flow_status: string; fields: Array<{ type: string }> }>(`/auth/connections/${connection.id}`);
        return res.body.flow_step === 'AWAITING_INPUT' || res.body.flow_status !== 'IN_PROGRESS' ? res.body : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(awaiting).toMatchObject({ flow_status: 'IN_PROGRESS', flow_step: 'AWAITING_INPUT' });
    expect(awaiting.fields.map((f) => f.type)).toEqual(['identifier', 'password']);
    // A submission that does not fit the step is refused and not handed to the driver.
    const wrong = await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { nosuchfield: 'x' } });
    expect(wrong.status, wrong.text).toBe(400);
    expect(wrong.body.code).toBe('invalid_submission');

    const timeline = await api.get(`/auth/connections/${connection.id}/timeline`);
    expect(timeline.body).toEqual([expect.objectContaining({ id: login.body.id, type: 'login', status: 'IN_PROGRESS', step: 'AWAITING_INPUT' })]);

    expect((await api.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
    expect((await api.get(`/auth/connections/${connection.id}`)).status).toBe(404);
    const ended = await eventually(
      async () => {
        const res = await api.get(`/browsers/${sessionId}`);
        return res.status === 404 || res.body.deleted_at ? res : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(ended.status === 404 || typeof ended.body.deleted_at === 'string').toBe(true);
    // The connection's profile outlives it.
    expect((await api.get('/profiles/chromium-login')).status).toBe(200);
    // One browser was started for the two simultaneous logins.
    const { rows } = await app.database.db.query(`SELECT id FROM browser_sessions WHERE tags->>'managed_auth' = $1`, [connection.id]);
    expect(rows).toEqual([{ id: sessionId }]);
  });

  const create = async (client: HttpClient, body: Record<string, unknown>): Promise<Connection> => {
    const res = await client.post('/auth/connections', body);
    expect(res.status, res.text).toBe(200);
    return res.body as Connection;
  };
});

// ---- helpers -----------------------------------------------------------------------

/** A login page with a username/password form, on loopback. */
async function startLoginPage(): Promise<{ url: string; close: () => Promise<void> }> {
  const page = `<!doctype html><html><head><title>Sign in</title></head><body>
    <h1>Sign in</h1>
    <form method="post" action="/login">
      <label for="username">Username</label><input id="username" name="username" type="text" autocomplete="username" required>
      <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
      <button type="submit">Sign in</button>
    </form></body></html>`;
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(req.url?.startsWith('/login') ? page : '<!doctype html><title>Home</title><a href="/login">Sign in</a>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

