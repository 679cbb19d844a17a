import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { connectionSchema } from '../../api/src/modules/auth-connections/schema.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, HOUR_MS, unique } from './auth-connections.fixtures.js';

/** Creating managed auth connections: defaults, validation, the profile, credential and proxy it links, the health-check interval bounds, and simultaneous creates. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { inNewProject, create, all, profileNames, createProxy, jobOf, expectError } = connectionHelpers(() => app, clock);

  describe('create', () => {
    it('answers with the defaults and no flow, and schedules one health check one interval ahead', async () => {
      const profile = unique('defaults');
      const res = await api.post('/auth/connections', { domain: 'example.com', profile_name: profile });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^mauth_/),
        domain: 'example.com',
        profile_name: profile,
        status: 'NEEDS_AUTH',
        record_session: false,
        save_credentials: true,
        allowed_domains: [],
        auto_reauth: true,
        health_checks: true,
        health_check_interval: 3600,
        browser_telemetry: null,
        sso_provider: null,
        can_reauth: false,
        can_reauth_reason: 'no_credential',
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
        flow_status: null,
        flow_step: null,
        flow_type: null,
        flow_expires_at: null,
        browser_session_id: null,
        live_view_url: null,
        hosted_url: null,
        fields: null,
        discovered_fields: null,
        mfa_options: null,
        sign_in_options: null,
        pending_sso_buttons: null,
        choices: null,
        external_action_message: null,
        error_code: null,
        error_message: null,
        website_error: null,
      });
      // The documented ManagedAuth schema forbids undocumented fields (additionalProperties:
      // false): the random fuzz found created_at and updated_at returned but not documented.
      expect(connectionSchema.strict().safeParse(res.body).error).toBeUndefined();
      const job = await jobOf(res.body.id);
      expect(job).toEqual({
        task_identifier: 'auth_health_check',
        run_at: new Date(clock.now().getTime() + HOUR_MS),
        payload: { connection_id: res.body.id },
      });
      expect((await api.get(`/auth/connections/${res.body.id}`)).body).toEqual(res.body);
    });

    it('creates the profile when it is missing', async () => {
      const profile = unique('new-profile');
      expect((await api.get(`/profiles/${profile}`)).status).toBe(404);
      await create(api, { domain: 'example.com', profile_name: profile });
      const found = await api.get(`/profiles/${profile}`);
      expect(found.status, found.text).toBe(200);
      expect(found.body.name).toBe(profile);
    });

    it('reuses a profile that exists, found case-insensitively, and shows its own name', async () => {
      const profile = unique('Existing');
      const made = await api.post('/profiles', { name: profile });
      expect(made.status, made.text).toBe(200);
      const before = await profileNames(api);
      const connection = await create(api, { domain: 'example.com', profile_name: profile.toLowerCase() });
      expect(connection.profile_name).toBe(profile);
      expect(await profileNames(api)).toEqual(before);
      expect((await api.get(`/profiles/${profile}`)).body.id).toBe(made.body.id);
    });

    it('refuses a second connection for the same profile and domain with 409 that must not be retried', async () => {
      const profile = unique('twice');
      const first = await create(api, { domain: 'shop.example.com', profile_name: profile });
      for (const domain of ['shop.example.com', 'SHOP.Example.COM.']) {
        for (const name of [profile, profile.toUpperCase()]) {
          const res = await api.post('/auth/connections', { domain, profile_name: name, health_checks: false });
          expectError(res, 409, 'auth_connection_exists');
          expect(res.headers.get('x-should-retry')).toBe('false');
        }
      }
      expect((await all(api, `&profile_name=${profile}`)).map((c) => c.id)).toEqual([first.id]);
      // The refused attempts left the first one's job alone.
      expect((await jobOf(first.id))?.run_at).toEqual(new Date(clock.now().getTime() + HOUR_MS));
    });

    it('allows the same profile with another domain, and the same domain with another profile', async () => {
      const profile = unique('multi');
      const a = await create(api, { domain: 'a.example.com', profile_name: profile });
      const b = await create(api, { domain: 'b.example.com', profile_name: profile });
      const c = await create(api, { domain: 'a.example.com', profile_name: unique('other') });
      expect(new Set([a.id, b.id, c.id]).size).toBe(3);
      expect((await all(api, `&profile_name=${profile}`)).map((x) => x.domain).sort()).toEqual(['a.example.com', 'b.example.com']);
    });

    it('normalises the domain and allowed_domains, deduplicating the latter', async () => {
      const connection = await create(api, {
        domain: ' Login.EXAMPLE.com. ',
        profile_name: unique('normalise'),
        allowed_domains: ['SSO.Example.net', 'sso.example.net.', 'Bücher.example', 'cdn.example.org'],
      });
      expect(connection.domain).toBe('login.example.com');
      expect(connection.allowed_domains).toEqual(['sso.example.net', 'xn--bcher-kva.example', 'cdn.example.org']);
    });

    it('keeps what it is given: login_url, flags, interval, telemetry', async () => {
      const connection = await create(api, {
        domain: 'example.com',
        profile_name: unique('given'),
        login_url: 'https://example.com/sign-in?next=%2F',
        auto_reauth: false,
        health_checks: true,
        health_check_interval: 300,
        record_session: true,
        save_credentials: false,
        browser_telemetry: { enabled: true },
      });
      expect(connection).toMatchObject({
        login_url: 'https://example.com/sign-in?next=%2F',
        auto_reauth: false,
        health_checks: true,
        health_check_interval: 300,
        record_session: true,
        save_credentials: false,
      });
      expect(connection.browser_telemetry).toMatchObject({ enabled: true });
      expect((await jobOf(connection.id))?.run_at).toEqual(new Date(clock.now().getTime() + 300_000));
    });

    it('schedules no health check when health_checks is false', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('no-checks'), health_checks: false });
      expect(connection.health_checks).toBe(false);
      expect(await jobOf(connection.id)).toBeUndefined();
    });

    it.each([
      ['no domain', { domain: undefined }, 'body.domain'],
      ['a URL as domain', { domain: 'https://example.com' }, 'body.domain'],
      ['a domain with a port', { domain: 'example.com:8443' }, 'body.domain'],
      ['a domain with a path', { domain: 'example.com/login' }, 'body.domain'],
      ['a wildcard domain', { domain: '*.example.com' }, 'body.domain'],
      ['an empty domain', { domain: '' }, 'body.domain'],
      ['a non-string domain', { domain: 42 }, 'body.domain'],
      ['no profile_name', { profile_name: undefined }, 'body.profile_name'],
      ['a profile_name with a space', { profile_name: 'my profile' }, 'body.profile_name'],
      ['the profile_name ".."', { profile_name: '..' }, 'body.profile_name'],
      ['an ftp login_url', { login_url: 'ftp://example.com/login' }, 'body.login_url'],
      ['a relative login_url', { login_url: '/login' }, 'body.login_url'],
      ['a javascript: login_url', { login_url: 'javascript:alert(1)' }, 'body.login_url'],
      ['a login_url with user info', { login_url: 'https://user:pw@example.com/login' }, 'body.login_url'],
      ['an empty login_url on create', { login_url: '' }, 'body.login_url'],
      ['allowed_domains as a string', { allowed_domains: 'example.org' }, 'body.allowed_domains'],
      ['a URL in allowed_domains', { allowed_domains: ['ok.example.org', 'https://bad.example.org'] }, 'body.allowed_domains.1'],
      ['51 allowed_domains', { allowed_domains: Array.from({ length: 51 }, (_, i) => `d${i}.example.org`) }, 'body.allowed_domains'],
      ['health_check_interval above 86400', { health_check_interval: 86_401 }, 'body.health_check_interval'],
      ['health_check_interval below the service minimum', { health_check_interval: 299 }, 'body.health_check_interval'],
      ['health_check_interval 0', { health_check_interval: 0 }, 'body.health_check_interval'],
      ['a negative health_check_interval', { health_check_interval: -3600 }, 'body.health_check_interval'],
      ['a fractional health_check_interval', { health_check_interval: 600.5 }, 'body.health_check_interval'],
      ['a string health_check_interval', { health_check_interval: '3600' }, 'body.health_check_interval'],
      ['a string auto_reauth', { auto_reauth: 'yes' }, 'body.auto_reauth'],
      ['a null health_checks', { health_checks: null }, 'body.health_checks'],
      ['an empty credential', { credential: {} }, 'body.credential'],
      ['a credential with name and provider', { credential: { name: 'c', provider: 'vault', path: 'x' } }, 'body.credential'],
      ['a credential provider without path or auto', { credential: { provider: 'vault' } }, 'body.credential'],
      ['a credential provider with path and auto', { credential: { provider: 'vault', path: 'a/b', auto: true } }, 'body.credential'],
      ['a credential path without provider', { credential: { name: 'c', path: 'a/b' } }, 'body.credential'],
      ['a credential as a string', { credential: 'c' }, 'body.credential'],
      ['an unknown credential key', { credential: { name: 'c', secret: 'x' } }, 'body.credential'],
      ['an empty proxy', { proxy: {} }, 'body.proxy'],
      ['a proxy with id and name', { proxy: { id: 'p', name: 'p' } }, 'body.proxy'],
      ['a proxy as a string', { proxy: 'p' }, 'body.proxy'],
      ['bad browser_telemetry', { browser_telemetry: 'on' }, 'body.browser_telemetry'],
      ['an unknown field', { password: 'hunter2' }, 'body'],
    ])('refuses %s with 400 naming the field, and writes nothing', async (_case, change, field) => {
      const { http: client } = await inNewProject();
      const profile = unique('refused');
      const res = await client.post('/auth/connections', { domain: 'example.com', profile_name: profile, ...change });
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(true);
      expect(await all(client)).toEqual([]);
      expect(await profileNames(client)).toEqual([]);
    });

    it('accepts exactly the service minimum and maximum interval', async () => {
      const min = await create(api, { domain: 'min.example.com', profile_name: unique('min'), health_check_interval: 300 });
      const max = await create(api, { domain: 'max.example.com', profile_name: unique('max'), health_check_interval: 86_400 });
      expect([min.health_check_interval, max.health_check_interval]).toEqual([300, 86_400]);
    });

    it('refuses a credential name that does not exist with 404, and writes nothing', async () => {
      const { http: client } = await inNewProject();
      const res = await client.post('/auth/connections', { domain: 'example.com', profile_name: 'p', credential: { name: 'nobody' } });
      expectError(res, 404, 'not_found');
      expect(await all(client)).toEqual([]);
      expect(await profileNames(client)).toEqual([]);
    });

    it('refuses a credential provider the org has not configured with 404, and writes nothing', async () => {
      const { http: client } = await inNewProject();
      for (const credential of [{ provider: 'onepassword', path: 'Vault/Item' }, { provider: 'onepassword', auto: true }]) {
        const res = await client.post('/auth/connections', { domain: 'example.com', profile_name: 'p', credential });
        expectError(res, 404, 'not_found');
        expect(res.body.message).toContain('Credential provider');
      }
      expect(await all(client)).toEqual([]);
      expect(await profileNames(client)).toEqual([]);
    });

    it('links a stored credential by name or id: can_reauth true, no requirements recorded yet', async () => {
      const name = unique('cred');
      const cred = await api.post('/credentials', { name, domain: 'example.com', values: { username: 'u', password: 'p' } });
      expect(cred.status, cred.text).toBe(200);
      const byName = await create(api, { domain: 'example.com', profile_name: unique('with-cred'), credential: { name } });
      expect(byName).toMatchObject({ credential: { name }, can_reauth: true, can_reauth_reason: 'no_requirements_recorded' });
      const byId = await create(api, { domain: 'example.com', profile_name: unique('with-cred-id'), credential: { name: cred.body.id } });
      expect(byId).toMatchObject({ can_reauth: true, can_reauth_reason: 'no_requirements_recorded' });
      // Deleting the credential leaves the connection, which can no longer re-auth.
      expect((await api.delete(`/credentials/${cred.body.id}`)).status).toBe(204);
      expect((await api.get(`/auth/connections/${byName.id}`)).body).toMatchObject({ can_reauth: false, can_reauth_reason: 'no_credential' });
    });

    it('takes a proxy by id or by a name matching exactly one proxy of the project', async () => {
      const { http: client } = await inNewProject();
      const one = await createProxy(client, 'solo');
      for (const _ of [1, 2]) await createProxy(client, 'twin');
      const byName = await create(client, { domain: 'a.example.com', profile_name: 'p', proxy: { name: 'solo' } });
      expect(byName.proxy_id).toBe(one.body.id);
      const byId = await create(client, { domain: 'b.example.com', profile_name: 'p', proxy: { id: one.body.id } });
      expect(byId.proxy_id).toBe(one.body.id);

      const before = await all(client);
      const none = await client.post('/auth/connections', { domain: 'c.example.com', profile_name: 'q', proxy: { name: 'nobody' } });
      expectError(none, 400, 'invalid_proxy');
      expect(none.body.details).toEqual([expect.objectContaining({ code: 'not_found', field: 'body.proxy.name' })]);
      const two = await client.post('/auth/connections', { domain: 'c.example.com', profile_name: 'q', proxy: { name: 'twin' } });
      expectError(two, 400, 'invalid_proxy');
      expect(two.body.details).toEqual([expect.objectContaining({ code: 'ambiguous', field: 'body.proxy.name' })]);
      const unknownId = await client.post('/auth/connections', { domain: 'c.example.com', profile_name: 'q', proxy: { id: 'proxy_nosuchproxy' } });
      expectError(unknownId, 404, 'not_found');
      expect(await all(client)).toEqual(before);
      expect(await profileNames(client)).toEqual(['p']);
    });
  });

  describe('service minimum health-check interval', () => {
    let strict: TestApp;
    beforeAll(async () => {
      strict = await startTestApp({ clock, settings: { authMinHealthCheckIntervalSeconds: 900 } });
    });
    afterAll(async () => strict?.close());

    it('refuses an interval under the configured minimum on create and update, naming the minimum', async () => {
      const client = strict.tenant.http;
      const low = await client.post('/auth/connections', { domain: 'example.com', profile_name: 'p', health_check_interval: 899 });
      expectError(low, 400, 'invalid_request');
      expect(low.body.message).toContain('900');
      expect(errorFields(low)).toEqual(['body.health_check_interval']);
      expect(await all(client)).toEqual([]);
      const ok = await create(client, { domain: 'example.com', profile_name: 'p', health_check_interval: 900 });
      const patched = await client.patch(`/auth/connections/${ok.id}`, { health_check_interval: 600 });
      expectError(patched, 400, 'invalid_request');
      expect((await client.get(`/auth/connections/${ok.id}`)).body).toEqual(ok);
    });
  });

  describe('races', () => {
    it('creates exactly one of several simultaneous connections for the same new profile and domain', async () => {
      const { http: client } = await inNewProject();
      const results = await Promise.all(Array.from({ length: 5 }, () => client.post('/auth/connections', { domain: 'race.example.com', profile_name: 'racer' })));
      expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409]);
      for (const r of results.filter((x) => x.status === 409)) expect(r.body.code).toBe('auth_connection_exists');
      expect(await all(client)).toHaveLength(1);
      expect(await profileNames(client)).toEqual(['racer']);
    });

    it('creates one profile for simultaneous connections of a new profile to different domains', async () => {
      const { http: client } = await inNewProject();
      const results = await Promise.all(
        ['a', 'b', 'c', 'd'].map((d) => client.post('/auth/connections', { domain: `${d}.example.com`, profile_name: 'shared' })),
      );
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect(await profileNames(client)).toEqual(['shared']);
    });
  });
});
