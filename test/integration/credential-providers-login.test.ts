import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { PASSWORD, startLoginSites, TOTP_SECRET, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { startConnectStandIn, type ConnectStandIn } from '../fixtures/onepassword-connect.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Managed auth with a provider credential: real Chromium (local runtime) logs in to the
 * fixture websites with a username, password and TOTP secret read at login time from a
 * local stand-in for 1Password Connect (test/fixtures/onepassword-connect.ts; the real
 * Connect server cannot run here, so the stand-in serves its documented JSON). The real
 * clock: the fixture site checks TOTP codes against real time.
 */

type Json = Record<string, any>;

let app: TestApp;
let sites: LoginSites;
let connect: ConnectStandIn;
let provider: Json;

beforeAll(async () => {
  sites = await startLoginSites();
  connect = await startConnectStandIn([
    {
      name: 'Web',
      items: [
        { title: 'Single site', urls: [sites.url('single', '/login')], username: USERNAME, password: PASSWORD },
        { title: 'Totp site', urls: [sites.url('totp', '/')], username: USERNAME, password: PASSWORD, totpSecret: TOTP_SECRET },
        { title: 'Wrong password', urls: ['https://elsewhere.example'], username: USERNAME, password: 'not-the-password' },
      ],
    },
  ]);
  app = await startTestApp({ clock: systemClock });
  const res = await app.tenant.http.post('/org/credential_providers', { name: 'my-1p', provider_type: 'onepassword', token: connect.token, connect_url: connect.url });
  expect(res.status, res.text).toBe(200);
  provider = res.body as Json;
}, 60_000);
afterAll(async () => {
  await app?.close();
  await sites?.close();
  await connect?.close();
});

async function connectAndLogin(site: 'single' | 'totp', credential: Json, profile: string): Promise<Json> {
  const created = await app.tenant.http.post('/auth/connections', {
    domain: sites.domain(site),
    profile_name: profile,
    login_url: sites.url(site, '/login'),
    health_checks: false,
    credential,
  });
  expect(created.status, created.text).toBe(200);
  const started = await app.tenant.http.post(`/auth/connections/${created.body.id}/login`, {});
  expect(started.status, started.text).toBe(200);
  let last: Json = {};
  return eventually(
    async () => {
      last = (await app.tenant.http.get(`/auth/connections/${created.body.id}`)).body as Json;
      if (last.flow_step === 'AWAITING_INPUT') throw new Error(`the flow asked for input: ${JSON.stringify(last.fields)}`);
      return last.flow_status && last.flow_status !== 'IN_PROGRESS' ? last : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 200, what: 'the end of the flow', detail: () => JSON.stringify(last) },
  );
}

/** Every row of the tables a login writes, as text: the secrets must be in none of them. */
async function storedText(): Promise<string> {
  const tables = ['auth_connections', 'auth_flows', 'credentials', 'credential_providers', 'profiles'];
  const parts: string[] = [];
  for (const table of tables) {
    const { rows } = await app.database.db.query<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM ${table} t`);
    parts.push(...rows.map((r) => r.row));
  }
  return parts.join('\n');
}

describe('managed auth with a 1Password Connect credential', () => {
  it('logs in with the username and password of the item at a path; nothing of it is stored', async () => {
    const done = await connectAndLogin('single', { provider: 'my-1p', path: 'Web/Single site' }, 'provider-path');
    expect(done).toMatchObject({
      flow_status: 'SUCCESS',
      status: 'AUTHENTICATED',
      credential: { provider: 'my-1p', path: 'Web/Single site' },
      can_reauth: true,
      can_reauth_reason: 'external_credential',
    });
    expect(sites.loginCount('single')).toBeGreaterThanOrEqual(1);
    const stored = await storedText();
    expect(stored).not.toContain(PASSWORD);
    expect(stored).not.toContain(connect.token);
    const { rows } = await app.database.db.query('SELECT id FROM credentials');
    expect(rows).toEqual([]);
  }, 120_000);

  it('finds the item by the connection’s domain (auto) and fills the TOTP code from its OTP field', async () => {
    const done = await connectAndLogin('totp', { provider: provider.id, auto: true }, 'provider-auto');
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    expect(sites.loginCount('totp')).toBeGreaterThanOrEqual(1);
    const stored = await storedText();
    for (const secret of [PASSWORD, TOTP_SECRET]) expect(stored).not.toContain(secret);
    const { rows } = await app.database.db.query('SELECT id FROM credentials');
    expect(rows).toEqual([]);
  }, 120_000);

  it('fails the flow with a clear error when the item is not there, or the provider refuses the token', async () => {
    const missing = await connectAndLogin('single', { provider: 'my-1p', path: 'Web/Nothing here' }, 'provider-missing');
    expect(missing).toMatchObject({ flow_status: 'FAILED', error_code: 'credential_provider_item_not_found', status: 'NEEDS_AUTH' });
    expect(missing.error_message).toContain('Web/Nothing here');

    const rotated = await app.tenant.http.patch(`/org/credential_providers/${provider.id}`, { token: 'revoked-token' });
    expect(rotated.status, rotated.text).toBe(200);
    try {
      const refused = await connectAndLogin('single', { provider: 'my-1p', path: 'Web/Single site' }, 'provider-refused');
      expect(refused).toMatchObject({ flow_status: 'FAILED', error_code: 'credential_provider_error' });
      expect(refused.error_message).toContain('401');
    } finally {
      await app.tenant.http.patch(`/org/credential_providers/${provider.id}`, { token: connect.token });
    }
  }, 180_000);

  it('a disabled provider fails the flow with credential_provider_disabled', async () => {
    await app.tenant.http.patch(`/org/credential_providers/${provider.id}`, { enabled: false });
    try {
      const done = await connectAndLogin('single', { provider: 'my-1p', path: 'Web/Single site' }, 'provider-disabled');
      expect(done).toMatchObject({ flow_status: 'FAILED', error_code: 'credential_provider_disabled' });
    } finally {
      await app.tenant.http.patch(`/org/credential_providers/${provider.id}`, { enabled: true });
    }
  }, 120_000);

  it('a connection of another org cannot name this org’s provider (404), and writes nothing', async () => {
    const other = await app.newTenant('provider-intruder');
    for (const credential of [{ provider: 'my-1p', auto: true }, { provider: provider.id, path: 'Web/Single site' }]) {
      const res = await other.http.post('/auth/connections', { domain: sites.domain('single'), profile_name: 'intruder', credential });
      expect(res.status, res.text).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await other.http.get('/auth/connections')).body).toEqual([]);
  });
});
