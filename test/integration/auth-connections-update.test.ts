import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, HOUR_MS, unique } from './auth-connections.fixtures.js';

/** Reading, changing and deleting managed auth connections, and what each change does to the health-check job. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { inNewProject, create, all, idsIn, createProxy, jobOf, expectError } = connectionHelpers(() => app, clock);

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

    it('refuses an unknown credential (404), an unknown provider (404) and an unknown proxy (404/400) on update, changing nothing', async () => {
      const original = await create(api, { domain: 'example.com', profile_name: unique('bad-refs') });
      const attempts: Array<[Record<string, unknown>, number, string]> = [
        [{ credential: { name: 'nobody' }, auto_reauth: false }, 404, 'not_found'],
        [{ credential: { provider: 'vault', auto: true }, auto_reauth: false }, 404, 'not_found'],
        [{ proxy: { id: 'proxy_nosuchproxy' }, auto_reauth: false }, 404, 'not_found'],
        [{ proxy: { name: 'nobody' }, auto_reauth: false }, 400, 'invalid_proxy'],
      ];
      for (const [body, status, code] of attempts) expectError(await api.patch(`/auth/connections/${original.id}`, body), status, code);
      expect((await api.get(`/auth/connections/${original.id}`)).body).toEqual(original);
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
});
