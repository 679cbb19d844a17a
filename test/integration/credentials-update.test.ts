import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { openCredentialSecrets } from '../../api/src/modules/credentials/service.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { type Credential, RFC6238_SECRET, createCredential } from './credentials.fixtures.js';

/** PATCH /credentials/{id_or_name}: the merge rule and every field. */
describe('credentials: update', () => {
  let app: TestApp;
  let http: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    app = await startTestApp({ clock });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const fresh = (body: Record<string, unknown> = {}) => createCredential(http, { name: `update-${++seq}`, ...body });

  const patch = async (ref: string, body: unknown) => {
    const res = await http.patch(`/credentials/${encodeURIComponent(ref)}`, body);
    expect(res.status, res.text).toBe(200);
    return res.body as Credential;
  };

  /** The stored values, opened the way the auth-connection flow will open them. */
  const storedValues = async (id: string) => {
    const opened = await openCredentialSecrets(app.deps, { orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId }, id);
    return opened?.values;
  };
  const storedSecret = async (id: string) =>
    (await openCredentialSecrets(app.deps, { orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId }, id))
      ?.totpSecret;

  describe('values', () => {
    it('adds new keys, overwrites existing ones and keeps the rest', async () => {
      const created = await fresh({ values: { username: 'alice', password: 'old' } });
      const updated = await patch(created.id, { values: { password: 'new', otp_email: 'a@example.com' } });
      expect(updated.value_keys).toEqual(['username', 'password', 'otp_email']);
      expect(await storedValues(created.id)).toEqual({ username: 'alice', password: 'new', otp_email: 'a@example.com' });
    });

    it('applies remove_value_keys before the merge, so a key in both keeps its new value', async () => {
      const created = await fresh({ values: { username: 'alice', password: 'old', pin: '1234' } });
      const updated = await patch(created.id, { remove_value_keys: ['password', 'pin'], values: { password: 'new' } });
      expect(updated.value_keys).toEqual(['username', 'password']);
      expect(await storedValues(created.id)).toEqual({ username: 'alice', password: 'new' });
    });

    it('ignores a removed key that is not stored, so a retried PATCH is harmless', async () => {
      const created = await fresh({ values: { username: 'alice', password: 'p' } });
      const updated = await patch(created.id, { remove_value_keys: ['password', 'never-stored'] });
      expect(updated.value_keys).toEqual(['username']);
      const retried = await patch(created.id, { remove_value_keys: ['password', 'never-stored'] });
      expect(retried.value_keys).toEqual(['username']);
      expect(await storedValues(created.id)).toEqual({ username: 'alice' });
    });

    it('can remove every value, leaving has_values false', async () => {
      const created = await fresh({ values: { username: 'alice', password: 'p' } });
      const updated = await patch(created.id, { remove_value_keys: ['username', 'password'] });
      expect(updated).toMatchObject({ has_values: false, value_keys: [] });
      expect((await http.get(`/credentials/${created.id}`)).body).toMatchObject({ has_values: false, value_keys: [] });
    });

    it('refuses a merge that would hold more than 64 values, and changes nothing', async () => {
      const many = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, 'v']));
      const created = await fresh({ values: many });
      const extra = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`extra${i}`, 'v']));
      const res = await http.patch(`/credentials/${created.id}`, { values: extra });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('too_many_values');
      expect(await storedValues(created.id)).toEqual(many);
      // Removing in the same request makes room.
      const fits = await patch(created.id, { values: extra, remove_value_keys: ['k0', 'k1', 'k2', 'k3', 'k4'] });
      expect(fits.value_keys).toHaveLength(60);
    });
  });

  describe('other fields', () => {
    it('renames, with the new name usable for lookups and the old one gone', async () => {
      const created = await fresh();
      const updated = await patch(created.id, { name: '  Renamed Login ' });
      expect(updated.name).toBe('Renamed Login');
      expect((await http.get('/credentials/renamed%20login')).body.id).toBe(created.id);
      expect((await http.get(`/credentials/${created.name}`)).status).toBe(404);
      // A change of case of its own name is not a conflict.
      expect((await patch(created.id, { name: 'RENAMED LOGIN' })).name).toBe('RENAMED LOGIN');
    });

    it('refuses a name another credential has with a 409 that must not be retried', async () => {
      const taken = await fresh();
      const created = await fresh();
      const res = await http.patch(`/credentials/${created.id}`, { name: taken.name.toUpperCase(), values: { x: 'y' } });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('credential_name_taken');
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect((await http.get(`/credentials/${created.id}`)).body).toEqual(created);
    });

    it('sets the SSO provider, keeps it when absent, and removes it with "" or null', async () => {
      const created = await fresh();
      expect((await patch(created.id, { sso_provider: 'google' })).sso_provider).toBe('google');
      expect((await patch(created.id, { values: { a: 'b' } })).sso_provider).toBe('google');
      expect((await patch(created.id, { sso_provider: '' })).sso_provider).toBeNull();
      await patch(created.id, { sso_provider: 'github' });
      expect((await patch(created.id, { sso_provider: null })).sso_provider).toBeNull();
    });

    it('sets a normalised TOTP secret and answers with the current code', async () => {
      const created = await fresh();
      const updated = await patch(created.id, { totp_secret: ' gezd gnbv-gy3t qojq gezd-gnbv gy3t qojq== ' });
      expect(updated.has_totp_secret).toBe(true);
      expect(updated.totp_code).toMatch(/^\d{6}$/);
      const stepEnd = (Math.floor(clock.now().getTime() / 30_000) + 1) * 30_000;
      expect(updated.totp_code_expires_at).toBe(new Date(stepEnd).toISOString());
      expect(await storedSecret(created.id)).toBe(RFC6238_SECRET);
      const code = await http.get(`/credentials/${created.id}/totp-code`);
      expect(code.body.code).toBe(updated.totp_code);
    });

    it('keeps the TOTP secret when absent and removes it with ""', async () => {
      const created = await fresh({ totp_secret: RFC6238_SECRET });
      const kept = await patch(created.id, { name: `${created.name}-kept` });
      expect(kept.has_totp_secret).toBe(true);
      expect(kept).not.toHaveProperty('totp_code');
      const removed = await patch(created.id, { totp_secret: '' });
      expect(removed.has_totp_secret).toBe(false);
      expect(removed).not.toHaveProperty('totp_code');
      expect(await storedSecret(created.id)).toBeNull();
    });

    it('stamps updated_at with the clock and keeps created_at', async () => {
      const created = await fresh();
      clock.advance(60_000);
      const updated = await patch(created.id, { values: { a: 'b' } });
      expect(updated.created_at).toBe(created.created_at);
      expect(updated.updated_at).toBe(clock.now().toISOString());
    });

    it('answers an empty body with the credential unchanged', async () => {
      const created = await fresh();
      clock.advance(60_000);
      for (const body of [{}, undefined]) {
        const res = await http.patch(`/credentials/${created.id}`, body);
        expect(res.status).toBe(200);
        expect(res.body).toEqual(created);
      }
    });

    it('finds the credential to update by name', async () => {
      const created = await fresh();
      expect((await patch(created.name.toUpperCase(), { sso_provider: 'okta' })).id).toBe(created.id);
    });

    it('answers 404 for an unknown credential', async () => {
      const res = await http.patch('/credentials/no-such-credential', { sso_provider: 'okta' });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    });
  });

  describe('validation', () => {
    it.each([
      ['an empty name', { name: '' }, 'body.name'],
      ['a non-object values', { values: 'password=x' }, 'body.values'],
      ['a non-string value', { values: { password: null } }, 'body.values.password'],
      ['a reserved value name', { values: JSON.parse('{"__proto__":"x"}') as object }, 'body.values.__proto__'],
      ['remove_value_keys as a string', { remove_value_keys: 'password' }, 'body.remove_value_keys'],
      ['an empty key to remove', { remove_value_keys: [''] }, 'body.remove_value_keys.0'],
      ['65 keys to remove', { remove_value_keys: Array.from({ length: 65 }, (_, i) => `k${i}`) }, 'body.remove_value_keys'],
      ['a TOTP secret that is not base32', { totp_secret: 'not base32 at all!' }, 'body.totp_secret'],
      ['a null TOTP secret', { totp_secret: null }, 'body.totp_secret'],
      ['an SSO provider that is a number', { sso_provider: 1 }, 'body.sso_provider'],
      ['a domain, which cannot change', { domain: 'other.example' }, 'body'],
    ])('refuses %s with 400 and changes nothing', async (_case, body, field) => {
      const created = await fresh({ values: { username: 'alice', password: 'p' }, totp_secret: RFC6238_SECRET, sso_provider: 'google' });
      const { totp_code: _c, totp_code_expires_at: _e, ...shown } = created;
      clock.advance(1000);
      const res = await http.patch(`/credentials/${created.id}`, { values: { password: 'changed' }, ...body });
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(
        true,
      );
      expect((await http.get(`/credentials/${created.id}`)).body).toEqual(shown);
      expect(await storedValues(created.id)).toEqual({ username: 'alice', password: 'p' });
      expect(await storedSecret(created.id)).toBe(RFC6238_SECRET);
    });
  });
});
