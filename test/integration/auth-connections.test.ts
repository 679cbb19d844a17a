import http from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock, systemClock } from '../../api/src/clock.js';
import { errorMiddleware } from '../../api/src/http/error-middleware.js';
import { mountRoutes } from '../../api/src/http/router.js';
import { authConnectionRoutes } from '../../api/src/modules/auth-connections/routes.js';
import { connectionSchema } from '../../api/src/modules/auth-connections/schema.js';
import { connectionChannel } from '../../api/src/modules/auth-connections/service.js';
import { errorFields, type HttpClient, type HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Managed auth connections through HTTP: create/read/change/list/delete with good and
 * bad input, the health-check job each one keeps in graphile-worker, the flow endpoints
 * without a browser, and tenancy. One browser-backed login at the end.
 */

interface Connection {
  id: string;
  domain: string;
  profile_name: string;
  status: string;
  [field: string]: unknown;
}

const HOUR_MS = 3_600_000;
let seq = 0;
/** A name no other test uses, so tests never depend on each other's data. */
const unique = (prefix: string) => `${prefix}-${++seq}`;

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  /** A client acting in a fresh project of the first org. */
  const inNewProject = async (name = unique('project')) => {
    const project = await api.post('/org/projects', { name });
    expect(project.status, project.text).toBe(200);
    return { projectId: project.body.id as string, http: api.withHeaders({ 'X-Kernel-Project-Id': project.body.id }) };
  };

  const create = async (client: HttpClient, body: Record<string, unknown>): Promise<Connection> => {
    const res = await client.post('/auth/connections', body);
    expect(res.status, res.text).toBe(200);
    return res.body as Connection;
  };

  const all = async (client: HttpClient, query = ''): Promise<Connection[]> => {
    const res = await client.get(`/auth/connections?limit=100${query}`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-has-more')).toBe('false');
    return res.body as Connection[];
  };

  const idsIn = (res: HttpResponse) => (res.body as Array<{ id: string }>).map((c) => c.id);

  const profileNames = async (client: HttpClient): Promise<string[]> => {
    const res = await client.get('/profiles?limit=100');
    expect(res.status, res.text).toBe(200);
    return (res.body as Array<{ name: string }>).map((p) => p.name);
  };

  /** A custom proxy (managed types need upstreams this app does not configure). */
  const createProxy = async (client: HttpClient, name: string) => {
    const res = await client.post('/proxies', { type: 'custom', name, config: { host: 'squid.corp.example', port: 3128 } });
    expect(res.status, res.text).toBe(200);
    return res;
  };

  /** The connection's scheduled health check, as graphile-worker holds it. */
  const jobOf = async (id: string) => {
    const { rows } = await app.database.db.query<{ task_identifier: string; run_at: Date; payload: unknown }>(
      `SELECT j.task_identifier, j.run_at, p.payload FROM graphile_worker.jobs j
         JOIN graphile_worker._private_jobs p ON p.id = j.id WHERE j.key = $1`,
      [`auth-health:${id}`],
    );
    expect(rows.length).toBeLessThanOrEqual(1);
    return rows[0];
  };

  const expectError = (res: HttpResponse, status: number, code: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.code, res.text).toBe(code);
    expect(typeof res.body.message).toBe('string');
  };

  /** Writes a flow as the driver would and makes it the connection's current one. */
  const arrangeFlow = async (
    connection: Connection,
    flow: { status: string; step: string; type?: string; view?: object; startedAt?: Date; sessionId?: string; error?: [string, string]; current?: boolean },
  ) => {
    const id = unique('maflow_arranged');
    const at = flow.startedAt ?? clock.now();
    await app.database.db.query(
      `INSERT INTO auth_flows (id, connection_id, org_id, project_id, type, status, step, view, browser_session_id, error_code, error_message,
         driver, heartbeat_at, expires_at, started_at, updated_at, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'replica_elsewhere', $12, $13, $12, $12, $14)`,
      [
        id,
        connection.id,
        app.tenant.orgId,
        app.tenant.defaultProjectId,
        flow.type ?? 'LOGIN',
        flow.status,
        flow.step,
        JSON.stringify(flow.view ?? {}),
        flow.sessionId ?? null,
        flow.error?.[0] ?? null,
        flow.error?.[1] ?? null,
        at,
        new Date(at.getTime() + 15 * 60_000),
        flow.status === 'IN_PROGRESS' ? null : at,
      ],
    );
    if (flow.current !== false) await app.database.db.query('UPDATE auth_connections SET current_flow_id = $2 WHERE id = $1', [connection.id, id]);
    return id;
  };

  const loginView = {
    fields: [
      { id: 'username', ref: 'username', type: 'identifier', label: 'Username', observed_selector: '#username', required: true },
      { id: 'password', ref: 'password', type: 'password', label: 'Password', observed_selector: '#password', required: true },
    ],
    discovered_fields: [
      { label: 'Username', name: 'username', selector: '#username', type: 'text' },
      { label: 'Password', name: 'password', selector: '#password', type: 'password' },
    ],
    choices: [{ id: 'sso_google', label: 'Sign in with Google', type: 'sso_provider', description: null, observed_selector: '//button[1]' }],
  };

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

    it('refuses an external credential provider with 400 credential_provider_unsupported, and writes nothing', async () => {
      const { http: client } = await inNewProject();
      for (const credential of [{ provider: 'onepassword', path: 'Vault/Item' }, { provider: 'onepassword', auto: true }]) {
        const res = await client.post('/auth/connections', { domain: 'example.com', profile_name: 'p', credential });
        expectError(res, 400, 'credential_provider_unsupported');
        expect(errorFields(res)).toEqual(['body.credential.provider']);
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

  describe('get and update', () => {
    it('answers 404 for an unknown id', async () => {
      expectError(await api.get('/auth/connections/mauth_doesnotexist'), 404, 'not_found');
      expectError(await api.patch('/auth/connections/mauth_doesnotexist', { auto_reauth: false }), 404, 'not_found');
    });

    it('changes only the fields sent', async () => {
      const original = await create(api, {
        domain: 'example.com',
        profile_name: unique('patch'),
        login_url: 'https://example.com/login',
        allowed_domains: ['sso.example.net'],
      });
      clock.advance(1000);
      const res = await api.patch(`/auth/connections/${original.id}`, { auto_reauth: false, record_session: true });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ ...original, auto_reauth: false, record_session: true, updated_at: clock.now().toISOString() });
      // An empty body changes nothing but is accepted.
      const empty = await api.patch(`/auth/connections/${original.id}`, {});
      expect(empty.status, empty.text).toBe(200);
      expect({ ...empty.body, updated_at: undefined }).toEqual({ ...res.body, updated_at: undefined });
    });

    it('clears login_url with "" and replaces allowed_domains', async () => {
      const original = await create(api, {
        domain: 'example.com',
        profile_name: unique('clear'),
        login_url: 'https://example.com/login',
        allowed_domains: ['a.example.net', 'b.example.net'],
      });
      const res = await api.patch(`/auth/connections/${original.id}`, { login_url: '', allowed_domains: ['C.example.net', 'c.example.net'] });
      expect(res.status, res.text).toBe(200);
      expect(res.body).not.toHaveProperty('login_url');
      expect(res.body.allowed_domains).toEqual(['c.example.net']);
      const emptied = await api.patch(`/auth/connections/${original.id}`, { allowed_domains: [], login_url: 'http://example.com/in' });
      expect(emptied.body).toMatchObject({ allowed_domains: [], login_url: 'http://example.com/in' });
    });

    it('moves the health check: false removes the job, true schedules it again, a new interval reschedules', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('schedule') });
      const createdAt = clock.now().getTime();
      expect((await jobOf(connection.id))?.run_at).toEqual(new Date(createdAt + HOUR_MS));

      clock.advance(60_000);
      const off = await api.patch(`/auth/connections/${connection.id}`, { health_checks: false });
      expect(off.body.health_checks).toBe(false);
      expect(await jobOf(connection.id)).toBeUndefined();
      // Changing the interval while checks are off schedules nothing.
      const interval = await api.patch(`/auth/connections/${connection.id}`, { health_check_interval: 7200 });
      expect(interval.body).toMatchObject({ health_checks: false, health_check_interval: 7200 });
      expect(await jobOf(connection.id)).toBeUndefined();

      clock.advance(60_000);
      const on = await api.patch(`/auth/connections/${connection.id}`, { health_checks: true });
      expect(on.body.health_checks).toBe(true);
      expect((await jobOf(connection.id))?.run_at).toEqual(new Date(clock.now().getTime() + 7200_000));

      clock.advance(60_000);
      await api.patch(`/auth/connections/${connection.id}`, { health_check_interval: 600 });
      expect((await jobOf(connection.id))?.run_at).toEqual(new Date(clock.now().getTime() + 600_000));

      // A change unrelated to the schedule leaves the job where it is.
      const runAt = (await jobOf(connection.id))?.run_at;
      clock.advance(60_000);
      await api.patch(`/auth/connections/${connection.id}`, { auto_reauth: false });
      expect((await jobOf(connection.id))?.run_at).toEqual(runAt);
    });

    it('turns telemetry off with enabled: false and on again with a request', async () => {
      const original = await create(api, { domain: 'example.com', profile_name: unique('telemetry'), browser_telemetry: { enabled: true } });
      expect(original.browser_telemetry).toMatchObject({ enabled: true });
      const off = await api.patch(`/auth/connections/${original.id}`, { browser_telemetry: { enabled: false } });
      expect(off.body.browser_telemetry).toBeNull();
      const on = await api.patch(`/auth/connections/${original.id}`, { browser_telemetry: { enabled: true } });
      expect(on.body.browser_telemetry).toMatchObject({ enabled: true });
      const cleared = await api.patch(`/auth/connections/${original.id}`, { browser_telemetry: null });
      expect(cleared.body.browser_telemetry).toBeNull();
    });

    it('shows the profile’s current name after the profile is renamed', async () => {
      const { http: client } = await inNewProject();
      const connection = await create(client, { domain: 'example.com', profile_name: 'before' });
      const renamed = await client.patch('/profiles/before', { name: 'after' });
      expect(renamed.status, renamed.text).toBe(200);
      expect((await client.get(`/auth/connections/${connection.id}`)).body.profile_name).toBe('after');
      expect(idsIn(await client.get('/auth/connections?profile_name=after'))).toEqual([connection.id]);
      expect(idsIn(await client.get('/auth/connections?profile_name=before'))).toEqual([]);
    });

    it('links a credential and a proxy on update', async () => {
      const { http: client } = await inNewProject();
      const cred = await client.post('/credentials', { name: 'later', domain: 'example.com', values: { username: 'u', password: 'p' } });
      const proxy = await createProxy(client, 'later');
      const connection = await create(client, { domain: 'example.com', profile_name: 'p' });
      const res = await client.patch(`/auth/connections/${connection.id}`, { credential: { name: 'later' }, proxy: { name: 'later' } });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ credential: { name: 'later' }, can_reauth: true, proxy_id: proxy.body.id });
      expect(cred.status).toBe(200);
    });

    it.each([
      ['a URL as an allowed domain', { allowed_domains: ['https://x.example'] }, 'body.allowed_domains.0'],
      ['an ftp login_url', { login_url: 'ftp://example.com' }, 'body.login_url'],
      ['a null login_url', { login_url: null }, 'body.login_url'],
      ['health_check_interval above 86400', { health_check_interval: 100_000 }, 'body.health_check_interval'],
      ['health_check_interval below the minimum', { health_check_interval: 60 }, 'body.health_check_interval'],
      ['a domain (it cannot change)', { domain: 'other.example.com' }, 'body'],
      ['a profile_name (it cannot change)', { profile_name: 'other' }, 'body'],
      ['an unknown field', { status: 'AUTHENTICATED' }, 'body'],
      ['an empty credential', { credential: {} }, 'body.credential'],
      ['a string save_credentials', { save_credentials: 'false' }, 'body.save_credentials'],
    ])('refuses %s with 400 and changes nothing', async (_case, change, field) => {
      const original = await create(api, { domain: 'example.com', profile_name: unique('bad-patch'), login_url: 'https://example.com/l' });
      const job = await jobOf(original.id);
      const res = await api.patch(`/auth/connections/${original.id}`, change);
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(true);
      expect((await api.get(`/auth/connections/${original.id}`)).body).toEqual(original);
      expect(await jobOf(original.id)).toEqual(job);
    });

    it('refuses an unknown credential (404), a provider (400) and an unknown proxy (404/400) on update, changing nothing', async () => {
      const original = await create(api, { domain: 'example.com', profile_name: unique('bad-refs') });
      const attempts: Array<[Record<string, unknown>, number, string]> = [
        [{ credential: { name: 'nobody' }, auto_reauth: false }, 404, 'not_found'],
        [{ credential: { provider: 'vault', auto: true }, auto_reauth: false }, 400, 'credential_provider_unsupported'],
        [{ proxy: { id: 'proxy_nosuchproxy' }, auto_reauth: false }, 404, 'not_found'],
        [{ proxy: { name: 'nobody' }, auto_reauth: false }, 400, 'invalid_proxy'],
      ];
      for (const [body, status, code] of attempts) expectError(await api.patch(`/auth/connections/${original.id}`, body), status, code);
      expect((await api.get(`/auth/connections/${original.id}`)).body).toEqual(original);
    });
  });

  describe('list', () => {
    it('lists newest first with limit, offset and the pagination headers', async () => {
      const { http: client } = await inNewProject();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await create(client, { domain: `d${i}.example.com`, profile_name: `p${i}` })).id);
        clock.advance(1000);
      }
      const newestFirst = [...ids].reverse();
      const first = await client.get('/auth/connections?limit=2');
      expect(idsIn(first)).toEqual(newestFirst.slice(0, 2));
      expect([first.headers.get('x-has-more'), first.headers.get('x-next-offset')]).toEqual(['true', '2']);
      const second = await client.get('/auth/connections?limit=2&offset=2');
      expect(idsIn(second)).toEqual(newestFirst.slice(2, 4));
      expect([second.headers.get('x-has-more'), second.headers.get('x-next-offset')]).toEqual(['true', '4']);
      const last = await client.get('/auth/connections?limit=2&offset=4');
      expect(idsIn(last)).toEqual(newestFirst.slice(4));
      expect([last.headers.get('x-has-more'), last.headers.get('x-next-offset')]).toEqual(['false', '0']);
      const beyond = await client.get('/auth/connections?offset=50');
      expect([beyond.status, beyond.body]).toEqual([200, []]);
      // The default page is 20 and holds them all; items are shaped like GET's.
      const defaults = await client.get('/auth/connections');
      expect(idsIn(defaults)).toEqual(newestFirst);
      expect(defaults.body[0]).toEqual((await client.get(`/auth/connections/${newestFirst[0]}`)).body);
    });

    it('breaks ties on the same creation time by creation order', async () => {
      const { http: client } = await inNewProject();
      const a = await create(client, { domain: 'a.example.com', profile_name: 'p' });
      const b = await create(client, { domain: 'b.example.com', profile_name: 'p' });
      expect((await all(client)).map((c) => c.id)).toEqual([b.id, a.id]);
    });

    it('pages 21 connections with the default limit of 20', async () => {
      const { http: client } = await inNewProject();
      for (let i = 0; i < 21; i++) await create(client, { domain: `d${i}.example.com`, profile_name: 'p', health_checks: false });
      const res = await client.get('/auth/connections');
      expect(res.body).toHaveLength(20);
      expect([res.headers.get('x-has-more'), res.headers.get('x-next-offset')]).toEqual(['true', '20']);
    });

    it.each(['limit=0', 'limit=101', 'limit=-1', 'limit=ten', 'offset=-1', 'offset=1.5', 'domain=https%3A%2F%2Fexample.com', 'domain=example.com%3A80'])(
      'refuses %s with 400',
      async (query) => {
        const res = await api.get(`/auth/connections?${query}`);
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)[0]).toMatch(/^query\./);
      },
    );

    it('filters by domain (normalised), profile name (case-insensitive) and query (substring or exact id)', async () => {
      const { http: client } = await inNewProject();
      const shopAlice = await create(client, { domain: 'shop.example.com', profile_name: 'Alice-Work' });
      const mailAlice = await create(client, { domain: 'mail.example.org', profile_name: 'Alice-Work' });
      const shopBob = await create(client, { domain: 'shop.example.com', profile_name: 'bob_home' });
      const ids = async (query: string) => (await all(client, `&${query}`)).map((c) => c.id).sort();
      const sorted = (...list: Connection[]) => list.map((c) => c.id).sort();

      expect(await ids('domain=shop.example.com')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('domain=SHOP.example.com.')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('domain=example.com')).toEqual([]);
      expect(await ids('profile_name=alice-work')).toEqual(sorted(shopAlice, mailAlice));
      expect(await ids('profile_name=alice')).toEqual([]);
      expect(await ids('domain=shop.example.com&profile_name=Alice-Work')).toEqual(sorted(shopAlice));
      expect(await ids('query=example.org')).toEqual(sorted(mailAlice));
      expect(await ids('query=SHOP')).toEqual(sorted(shopAlice, shopBob));
      expect(await ids('query=ALICE')).toEqual(sorted(shopAlice, mailAlice));
      expect(await ids('query=b_h')).toEqual(sorted(shopBob));
      expect(await ids(`query=${shopBob.id}`)).toEqual(sorted(shopBob));
      expect(await ids(`query=${shopBob.id.slice(0, -2)}`)).toEqual([]);
      // LIKE wildcards are literal characters.
      expect(await ids('query=%25')).toEqual([]);
      expect(await ids('query=_')).toEqual(sorted(shopBob));
      expect(await ids('query=nothing-like-this')).toEqual([]);
    });

    it('still filters by the profile name the connection was made with after that profile is deleted', async () => {
      const { http: client } = await inNewProject();
      const connection = await create(client, { domain: 'example.com', profile_name: 'Gone-Soon' });
      expect((await client.delete('/profiles/Gone-Soon')).status).toBe(204);
      expect((await client.get(`/auth/connections/${connection.id}`)).body.profile_name).toBe('Gone-Soon');
      expect((await all(client, '&profile_name=gone-soon')).map((c) => c.id)).toEqual([connection.id]);
      expect((await all(client, '&query=gone')).map((c) => c.id)).toEqual([connection.id]);
      expect((await all(client, '&profile_name=gone-soon&query=example')).map((c) => c.id)).toEqual([connection.id]);
    });
  });

  describe('delete', () => {
    it('deletes with 204, then answers 404; its job is gone; its profile stays', async () => {
      const profile = unique('deleted');
      const connection = await create(api, { domain: 'example.com', profile_name: profile });
      expect(await jobOf(connection.id)).toBeDefined();
      const res = await api.delete(`/auth/connections/${connection.id}`);
      expect(res.status, res.text).toBe(204);
      expect(res.text).toBe('');
      expectError(await api.get(`/auth/connections/${connection.id}`), 404, 'not_found');
      expectError(await api.delete(`/auth/connections/${connection.id}`), 404, 'not_found');
      expect(await jobOf(connection.id)).toBeUndefined();
      expect((await api.get(`/profiles/${profile}`)).status).toBe(200);
      expect((await all(api, `&query=${connection.id}`)).length).toBe(0);
      // The pair is free again.
      await create(api, { domain: 'example.com', profile_name: profile });
    });
  });

  describe('flow endpoints with no flow', () => {
    it('refuses a submission with 409 flow_not_running when no flow runs', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('submit') });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u' } });
      expectError(res, 409, 'flow_not_running');
      expectError(await api.post('/auth/connections/mauth_doesnotexist/submit', { field_values: { a: 'b' } }), 404, 'not_found');
    });

    it.each([
      ['sso_button_selector with sso_provider', { sso_button_selector: '//button', sso_provider: 'google' }, 'body.sso_provider'],
      ['an unknown field', { password: 'x' }, 'body'],
      ['field_values as an array', { field_values: ['x'] }, 'body.field_values'],
      ['a non-string field value', { field_values: { username: 1 } }, 'body.field_values.username'],
      ['a field value over 4096 characters', { field_values: { password: 'x'.repeat(4097) } }, 'body.field_values.password'],
      ['65 field values', { field_values: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, 'v'])) }, 'body.field_values'],
      ['a field id with a control character', { field_values: { 'a\nb': 'v' } }, 'body.field_values'],
      ['an empty selected_choice_id', { selected_choice_id: '' }, 'body.selected_choice_id'],
    ])('refuses a submission with %s with 400', async (_case, body, field) => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('bad-submit') });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, body);
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(true);
    });

    it('shows an empty timeline, 404 for an unknown connection, and validates the type filter', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('timeline') });
      for (const query of ['', '?type=login', '?type=reauth', '?type=health_check', '?limit=1&offset=3']) {
        const res = await api.get(`/auth/connections/${connection.id}/timeline${query}`);
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual([]);
        expect([res.headers.get('x-has-more'), res.headers.get('x-next-offset')]).toEqual(['false', '0']);
      }
      expectError(await api.get('/auth/connections/mauth_doesnotexist/timeline'), 404, 'not_found');
      for (const query of ['type=LOGIN', 'type=flow', 'limit=101', 'limit=0']) {
        const res = await api.get(`/auth/connections/${connection.id}/timeline?${query}`);
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)[0], query).toMatch(/^query\./);
      }
    });

    it('refuses POST …/login for an unknown connection with 404 and bad login bodies with 400', async () => {
      expectError(await api.post('/auth/connections/mauth_doesnotexist/login', {}), 404, 'not_found');
      const connection = await create(api, { domain: 'example.com', profile_name: unique('login-body') });
      for (const body of [{ unknown: true }, { proxy: {} }, { record_session: 'yes' }]) {
        expectError(await api.post(`/auth/connections/${connection.id}/login`, body), 400, 'invalid_request');
      }
      expectError(await api.post(`/auth/connections/${connection.id}/login`, { proxy: { name: 'nobody' } }), 400, 'invalid_proxy');
      const { rows } = await app.database.db.query('SELECT id FROM auth_flows WHERE connection_id = $1', [connection.id]);
      expect(rows).toEqual([]);
      expect((await api.get(`/auth/connections/${connection.id}`)).body.flow_status).toBeNull();
    });
  });

  describe('event stream', () => {
    let fast: { url: string; server: Server };

    beforeAll(async () => {
      // The same routes with a short heartbeat, on the same database and event hub.
      const e = express();
      e.use(express.json());
      mountRoutes(e, authConnectionRoutes(app.deps, app.services, { heartbeatMs: 50 }), app.deps);
      e.use(errorMiddleware(app.deps.log));
      const server = await new Promise<Server>((resolve) => {
        const s = e.listen(0, '127.0.0.1', () => resolve(s));
      });
      fast = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
    });
    afterAll(async () => {
      if (!fast) return;
      fast.server.closeAllConnections();
      await new Promise((resolve) => fast.server.close(resolve));
    });

    it('streams heartbeats only, then an error event and the end when the connection is deleted', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events') });
      const stream = await openStream(`${fast.url}/auth/connections/${connection.id}/events`, app.tenant.adminKey);
      try {
        expect(stream.res.status).toBe(200);
        expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        await stream.frame(3);
        expect(stream.frames.slice(0, 3).map((f) => f.event)).toEqual(['sse_heartbeat', 'sse_heartbeat', 'sse_heartbeat']);
        expect(stream.frames[0]).toEqual({ event: 'sse_heartbeat', timestamp: expect.any(String) });

        expect((await api.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
        await within(stream.ended, 10_000);
        const last = stream.frames.at(-1)!;
        expect(last).toMatchObject({ event: 'error', error: { code: 'not_found' } });
        expect(stream.frames.filter((f) => f.event === 'managed_auth_state')).toEqual([]);
      } finally {
        stream.abort();
      }
    });

    it('sends the running flow’s state, each change, and ends once the flow finishes', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-flow') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView });
      const stream = await openStream(`${fast.url}/auth/connections/${connection.id}/events`, app.tenant.adminKey);
      try {
        const states = () => stream.frames.filter((f) => f.event === 'managed_auth_state');
        await poll(() => (states().length >= 1 ? true : undefined), 10_000);
        expect(states()[0]).toEqual({
          event: 'managed_auth_state',
          flow_status: 'IN_PROGRESS',
          flow_step: 'AWAITING_INPUT',
          flow_type: 'LOGIN',
          hosted_url: `${fast.url}/auth/hosted/${flowId}`,
          fields: loginView.fields,
          discovered_fields: loginView.discovered_fields,
          choices: loginView.choices,
          timestamp: expect.any(String),
        });
        // A notification without a change sends nothing new; a change is sent.
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await app.database.db.query(`UPDATE auth_flows SET step = 'SUBMITTING' WHERE id = $1`, [flowId]);
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await poll(() => (states().length >= 2 ? true : undefined), 10_000);
        await app.database.db.query(`UPDATE auth_flows SET status = 'SUCCESS', step = 'COMPLETED', post_login_url = 'https://example.com/home' WHERE id = $1`, [
          flowId,
        ]);
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await within(stream.ended, 10_000);
        expect(states().map((f) => [f.flow_status, f.flow_step])).toEqual([
          ['IN_PROGRESS', 'AWAITING_INPUT'],
          ['IN_PROGRESS', 'SUBMITTING'],
          ['SUCCESS', 'COMPLETED'],
        ]);
        expect(states()[2]).toMatchObject({ post_login_url: 'https://example.com/home' });
        expect(states()[2]).not.toHaveProperty('hosted_url');
      } finally {
        stream.abort();
      }
    });

    it('ends a running flow’s stream with CANCELED when the connection is deleted', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-cancel') });
      await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'DISCOVERING' });
      const stream = await openStream(`${fast.url}/auth/connections/${connection.id}/events`, app.tenant.adminKey);
      try {
        await poll(() => (stream.frames.some((f) => f.event === 'managed_auth_state') ? true : undefined), 10_000);
        expect((await api.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
        await within(stream.ended, 10_000);
        expect(stream.frames.filter((f) => f.event === 'managed_auth_state').map((f) => f.flow_status)).toEqual(['IN_PROGRESS', 'CANCELED']);
        expect(stream.frames.at(-1)).toMatchObject({ flow_step: 'COMPLETED', error_code: 'flow_canceled' });
      } finally {
        stream.abort();
      }
    });

    it('answers the real route with 200 text/event-stream, and an unknown id with a JSON 404 before any header', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-real') });
      const stream = await openStream(`${app.url}/auth/connections/${connection.id}/events`, app.tenant.adminKey);
      expect(stream.res.status).toBe(200);
      expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      stream.abort();
      const missing = await fetch(`${app.url}/auth/connections/mauth_doesnotexist/events`, {
        headers: { authorization: `Bearer ${app.tenant.adminKey}`, accept: 'text/event-stream' },
      });
      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await missing.json()) as { code: string }).code).toBe('not_found');
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

  describe('flow state (flows arranged in the database)', () => {
    it('shows a finished flow as COMPLETED, without its view, browser or hosted page, and refuses submissions', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('finished') });
      await arrangeFlow(connection, { status: 'FAILED', step: 'SUBMITTING', view: loginView, sessionId: 'sess_gone', error: ['login_failed', 'Wrong password'] });
      const res = await api.get(`/auth/connections/${connection.id}`);
      expect(res.body).toMatchObject({
        flow_status: 'FAILED',
        flow_step: 'COMPLETED',
        flow_type: 'LOGIN',
        flow_expires_at: new Date(clock.now().getTime() + 15 * 60_000).toISOString(),
        browser_session_id: null,
        live_view_url: null,
        hosted_url: null,
        fields: null,
        choices: null,
        error_code: 'login_failed',
        error_message: 'Wrong password',
      });
      expectError(await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u', password: 'p' } }), 409, 'flow_not_running');
    });

    it('refuses a submission to a flow past its expiry that the engine has not marked EXPIRED yet, and stores nothing', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('expired') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView, startedAt: new Date(clock.now().getTime() - 16 * 60_000) });
      expectError(await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u', password: 'p' } }), 409, 'flow_not_running');
      const { rows } = await app.database.db.query('SELECT pending_input FROM auth_flows WHERE id = $1', [flowId]);
      expect(rows[0].pending_input).toBeNull();
    });

    it('takes a submission that fits the awaiting step once, sealed, and refuses ones that do not fit', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('awaiting') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView });
      const shown = (await api.get(`/auth/connections/${connection.id}`)).body;
      expect(shown).toMatchObject({ flow_status: 'IN_PROGRESS', flow_step: 'AWAITING_INPUT', fields: loginView.fields, choices: loginView.choices });
      expect(shown.hosted_url).toBe(`${app.url}/auth/hosted/${flowId}`);

      const submit = (body: object) => api.post(`/auth/connections/${connection.id}/submit`, body);
      const unknownField = await submit({ field_values: { username: 'u', password: 'p', email: 'e' } });
      expectError(unknownField, 400, 'invalid_submission');
      expect(errorFields(unknownField)).toEqual(['body.field_values.email']);
      const missing = await submit({ field_values: { username: 'u' } });
      expectError(missing, 400, 'invalid_submission');
      expect(errorFields(missing)).toEqual(['body.field_values.password']);
      expectError(await submit({ selected_choice_id: 'sso_github' }), 400, 'invalid_submission');
      expectError(await submit({}), 400, 'invalid_submission');
      const pending = async () =>
        (await app.database.db.query<{ pending_input: string | null; input_seq: number }>('SELECT pending_input, input_seq FROM auth_flows WHERE id = $1', [flowId]))
          .rows[0]!;
      expect(await pending()).toEqual({ pending_input: null, input_seq: 0 });

      const taken = await submit({ field_values: { username: 'alice', password: 'hunter2-sealed' } });
      expect([taken.status, taken.body]).toEqual([200, { accepted: true }]);
      const stored = await pending();
      expect(stored.input_seq).toBe(1);
      expect(stored.pending_input).not.toContain('hunter2-sealed');
      expect(stored.pending_input).not.toContain('alice');
      // The driver has not taken it yet: a second one is not accepted.
      const second = await submit({ selected_choice_id: 'sso_google' });
      expect([second.status, second.body]).toEqual([200, { accepted: false }]);
      expect((await pending()).input_seq).toBe(1);
    });

    it('does not accept a submission while the flow is not awaiting input', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('discovering') });
      await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'DISCOVERING' });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u' } });
      expect([res.status, res.body]).toEqual([200, { accepted: false }]);
    });

    it('lists the timeline newest first, filtered by type and paged', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('history') });
      const t0 = clock.now().getTime();
      const at = (minutes: number) => new Date(t0 + minutes * 60_000);
      const login = await arrangeFlow(connection, { status: 'SUCCESS', step: 'SUBMITTING', startedAt: at(1), sessionId: 'sess_login', current: false });
      const reauth = await arrangeFlow(connection, { type: 'REAUTH', status: 'EXPIRED', step: 'AWAITING_INPUT', startedAt: at(3), error: ['flow_expired', 'The login flow expired'] });
      await app.database.db.query(
        `INSERT INTO auth_health_checks (id, connection_id, status, previous_status, browser_session_id, started_at, updated_at)
         VALUES ('mahc_done', $1, 'NEEDS_AUTH', 'AUTHENTICATED', 'sess_check', $2, $2), ('mahc_running', $1, NULL, 'NEEDS_AUTH', NULL, $3, $3)`,
        [connection.id, at(2), at(4)],
      );
      const timeline = async (query = '') => {
        const res = await api.get(`/auth/connections/${connection.id}/timeline${query}`);
        expect(res.status, res.text).toBe(200);
        return res;
      };
      expect((await timeline()).body).toEqual([
        { id: 'mahc_running', type: 'health_check', status: 'NEEDS_AUTH', previous_status: 'NEEDS_AUTH', timestamp: at(4).toISOString(), updated_at: at(4).toISOString(), telemetry_captured: false },
        {
          id: reauth,
          type: 'reauth',
          status: 'EXPIRED',
          step: 'EXPIRED',
          error_code: 'flow_expired',
          error_message: 'The login flow expired',
          timestamp: at(3).toISOString(),
          updated_at: at(3).toISOString(),
          telemetry_captured: false,
        },
        {
          id: 'mahc_done',
          type: 'health_check',
          status: 'NEEDS_AUTH',
          previous_status: 'AUTHENTICATED',
          browser_session_id: 'sess_check',
          timestamp: at(2).toISOString(),
          updated_at: at(2).toISOString(),
          telemetry_captured: false,
        },
        { id: login, type: 'login', status: 'SUCCESS', step: 'COMPLETED', browser_session_id: 'sess_login', timestamp: at(1).toISOString(), updated_at: at(1).toISOString(), telemetry_captured: false },
      ]);
      const ids = async (query: string) => ((await timeline(query)).body as Array<{ id: string }>).map((e) => e.id);
      expect(await ids('?type=health_check')).toEqual(['mahc_running', 'mahc_done']);
      expect(await ids('?type=login')).toEqual([login]);
      expect(await ids('?type=reauth')).toEqual([reauth]);
      const first = await timeline('?limit=3');
      expect([first.body.length, first.headers.get('x-has-more'), first.headers.get('x-next-offset')]).toEqual([3, 'true', '3']);
      const rest = await timeline('?limit=3&offset=3');
      expect([idsIn(rest), rest.headers.get('x-has-more'), rest.headers.get('x-next-offset')]).toEqual([[login], 'false', '0']);
    });
  });

  describe('tenancy', () => {
    /** The first org's connection, and three outsiders: another org, another project by header, a project key. */
    const arrange = async () => {
      const { http: owner, projectId } = await inNewProject();
      const cred = await owner.post('/credentials', { name: 'owned', domain: 'example.com', values: { username: 'u', password: 'p' } });
      expect(cred.status).toBe(200);
      const connection = await create(owner, {
        domain: 'example.com',
        profile_name: 'owned',
        credential: { name: 'owned' },
        allowed_domains: ['sso.example.net'],
      });
      const otherOrg = await app.newTenant(unique('other-org'));
      const { http: otherProject } = await inNewProject();
      const key = await api.post('/org/api_keys', { name: unique('project-key'), project_id: (await inNewProject()).projectId });
      expect(key.status, key.text).toBe(200);
      const outsiders: Array<[string, HttpClient]> = [
        ['another org', otherOrg.http],
        ['another project', otherProject],
        ['a key of another project', app.client(key.body.key)],
      ];
      return { owner, projectId, connection, outsiders, job: await jobOf(connection.id) };
    };

    it('answers 404 to every connection route from another org or project, and changes nothing', async () => {
      const { owner, connection, outsiders, job } = await arrange();
      const path = `/auth/connections/${connection.id}`;
      for (const [who, client] of outsiders) {
        const attempts: Array<[string, Promise<HttpResponse>]> = [
          ['get', client.get(path)],
          ['patch', client.patch(path, { health_checks: false, login_url: 'https://evil.example/' })],
          ['login', client.post(`${path}/login`, {})],
          ['submit', client.post(`${path}/submit`, { field_values: { username: 'x' } })],
          ['timeline', client.get(`${path}/timeline`)],
          ['delete', client.delete(path)],
        ];
        for (const [what, attempt] of attempts) {
          const res = await attempt;
          expect(res.status, `${who} ${what}: ${res.text}`).toBe(404);
          expect(res.body.code).toBe('not_found');
        }
        const events = await fetch(`${client.baseUrl}${path}/events`, {
          headers: { authorization: `Bearer ${client.key}`, accept: 'text/event-stream', ...client.extraHeaders },
        });
        expect(events.status, `${who} events`).toBe(404);
        await events.body?.cancel();
      }
      expect((await owner.get(path)).body).toEqual(connection);
      expect(await jobOf(connection.id)).toEqual(job);
      const { rows } = await app.database.db.query('SELECT id FROM auth_flows WHERE connection_id = $1', [connection.id]);
      expect(rows).toEqual([]);
    });

    it('never lists another org’s or project’s connections, whatever the filter', async () => {
      const { connection, outsiders } = await arrange();
      for (const [who, client] of outsiders) {
        for (const query of ['', `&query=${connection.id}`, '&domain=example.com', '&profile_name=owned', '&query=owned']) {
          const res = await client.get(`/auth/connections?limit=100${query}`);
          expect(res.status, `${who} ${query}`).toBe(200);
          expect(res.text, `${who} ${query}`).not.toContain(connection.id);
        }
      }
    });

    it('does not let another project use the owner’s credential or proxy, or see its profile', async () => {
      const { owner, outsiders } = await arrange();
      const proxy = await createProxy(owner, 'owned');
      for (const [who, client] of outsiders) {
        const before = await all(client);
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', credential: { name: 'owned' } }), 404, 'not_found');
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', proxy: { id: proxy.body.id } }), 404, 'not_found');
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', proxy: { name: 'owned' } }), 400, 'invalid_proxy');
        expect(await all(client), who).toEqual(before);
        // The same profile name and domain elsewhere is another profile and another connection.
        const own = await create(client, { domain: 'example.com', profile_name: 'owned', health_checks: false });
        expect(own.can_reauth).toBe(false);
        expect((await client.delete(`/auth/connections/${own.id}`)).status).toBe(204);
      }
    });
  });

  describe('project deletion', () => {
    it('is refused while a connection exists, naming auth_connections, and allowed once it is deleted', async () => {
      const { http: client, projectId } = await inNewProject();
      const connection = await create(client, { domain: 'example.com', profile_name: 'p' });
      // The profile also keeps the project: delete it so only the connection counts.
      expect((await client.delete('/profiles/p')).status).toBe(204);
      const refused = await api.delete(`/org/projects/${projectId}`);
      expectError(refused, 409, 'project_not_empty');
      expect(refused.body.details).toEqual([expect.objectContaining({ field: 'auth_connections', message: '1 active auth_connections' })]);
      expect((await client.get(`/auth/connections/${connection.id}`)).status).toBe(200);
      expect((await client.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
      expect((await api.delete(`/org/projects/${projectId}`)).status).toBe(204);
    });
  });
});

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
    const awaiting = await poll(async () => {
      const res = await api.get<{ flow_step: string; flow_status: string; fields: Array<{ type: string }> }>(`/auth/connections/${connection.id}`);
      return res.body.flow_step === 'AWAITING_INPUT' || res.body.flow_status !== 'IN_PROGRESS' ? res.body : undefined;
    }, 90_000);
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
    const ended = await poll(async () => {
      const res = await api.get(`/browsers/${sessionId}`);
      return res.status === 404 || res.body.deleted_at ? res : undefined;
    }, 60_000);
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

async function poll<T>(check: () => T | undefined | Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const within = async <T>(promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);

/** A raw SSE reader: every frame is one JSON data line. */
async function openStream(url: string, key: string) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' }, signal: controller.signal });
  const frames: Array<{ event: string; [k: string]: unknown }> = [];
  const ended = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const data = buffer
            .slice(0, cut)
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim());
          buffer = buffer.slice(cut + 2);
          if (data.length === 0) continue;
          expect(data).toHaveLength(1);
          frames.push(JSON.parse(data[0]!) as { event: string });
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  })();
  const frame = async (n: number, ms = 10_000) => poll(() => (frames.length >= n ? frames[n - 1] : undefined), ms);
  return { res, frames, frame, ended, abort: () => controller.abort() };
}
