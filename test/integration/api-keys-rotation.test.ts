import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type Tenant, type TestApp } from '../support/test-app.js';
import { allKeys, createKey, createProject, DAY, errorFields, idsOf, type ApiKey, type CreatedApiKey } from './api-keys.fixtures.js';

describe('API key rotation', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-04-10T08:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const inDays = (days: number) => new Date(clock.now().getTime() + days * DAY).toISOString();
  const works = async (key: string) => (await app.client(key).get('/org/api_keys?limit=1')).status;
  const rotate = async (tenant: Tenant, id: string, body?: unknown): Promise<CreatedApiKey> => {
    const res = await tenant.http.post<CreatedApiKey>(`/org/api_keys/${id}/rotate`, body);
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  const expiryOf = async (tenant: Tenant, id: string) =>
    (await tenant.http.get<ApiKey>(`/org/api_keys/${id}`)).body.expires_at;

  it('issues a new key with the same name and project, returned with its plaintext', async () => {
    const tenant = await app.newTenant();
    const project = await createProject(tenant, 'rotating');
    const old = await createKey(tenant, { name: 'deploy', project_id: project.id });
    const fresh = await rotate(tenant, old.id, {});
    expect(fresh).toEqual({
      id: expect.stringMatching(/^key_/),
      key: expect.stringMatching(/^bp_[A-Za-z0-9_-]{43}$/),
      name: 'deploy',
      masked_key: `${fresh.key.slice(0, 7)}...${fresh.key.slice(-4)}`,
      created_at: clock.now().toISOString(),
      created_by: { id: tenant.adminKeyId, email: 'org@example.test', name: 'admin' },
      deleted_at: null,
      expires_at: null,
      project_id: project.id,
      project_name: 'rotating',
    });
    expect(fresh.id).not.toBe(old.id);
    expect(fresh.key).not.toBe(old.key);
    const listed = await tenant.http.get<ApiKey[]>('/org/api_keys?name=deploy');
    expect(idsOf(listed.body)).toEqual([old.id, fresh.id].sort());
  });

  it('keeps the old key valid until its default seven-day grace ends', async () => {
    const old = await createKey(app.tenant, { name: 'graceful' });
    const fresh = await rotate(app.tenant, old.id);
    const shown = await app.tenant.http.get<ApiKey>(`/org/api_keys/${old.id}`);
    expect(shown.body.expires_at).toBe(inDays(7));
    expect(shown.body.deleted_at).toBeNull();

    clock.advance(7 * DAY - 1);
    expect(await works(old.key)).toBe(200);
    clock.advance(1);
    expect(await works(old.key)).toBe(401);
    expect(await works(fresh.key)).toBe(200);
  });

  it('honours a custom grace period', async () => {
    const old = await createKey(app.tenant, { name: 'custom grace' });
    await rotate(app.tenant, old.id, { expire_in_days: 2 });
    expect(await expiryOf(app.tenant, old.id)).toBe(inDays(2));
    clock.advance(2 * DAY - 1);
    expect(await works(old.key)).toBe(200);
    clock.advance(1);
    expect(await works(old.key)).toBe(401);
  });

  it('expires the old key at once with expire_in_days 0', async () => {
    const old = await createKey(app.tenant, { name: 'immediate' });
    const fresh = await rotate(app.tenant, old.id, { expire_in_days: 0 });
    expect(await works(old.key)).toBe(401);
    expect(await works(fresh.key)).toBe(200);
    expect(await expiryOf(app.tenant, old.id)).toBe(clock.now().toISOString());
  });

  it('uses the default grace when expire_in_days is null', async () => {
    const old = await createKey(app.tenant, { name: 'null grace' });
    await rotate(app.tenant, old.id, { expire_in_days: null });
    expect(await expiryOf(app.tenant, old.id)).toBe(inDays(7));
  });

  it('never pushes the old key’s expiry later', async () => {
    const old = await createKey(app.tenant, { name: 'ending soon', days_to_expire: 2 });
    await rotate(app.tenant, old.id, { expire_in_days: 30 });
    expect(await expiryOf(app.tenant, old.id)).toBe(old.expires_at);
    clock.advance(2 * DAY);
    expect(await works(old.key)).toBe(401);
  });

  it('lets a key rotate itself and keep working through the grace period', async () => {
    const old = await createKey(app.tenant, { name: 'self rotating' });
    const res = await app.client(old.key).post<CreatedApiKey>(`/org/api_keys/${old.id}/rotate`, {});
    expect(res.status).toBe(200);
    expect(await works(old.key)).toBe(200);
    expect(await works(res.body.key)).toBe(200);
  });

  describe('lifetime of the new key', () => {
    it('keeps the old key’s lifetime in days when days_to_expire is omitted', async () => {
      const old = await createKey(app.tenant, { name: 'thirty days', days_to_expire: 30 });
      clock.advance(10 * DAY);
      expect((await rotate(app.tenant, old.id, {})).expires_at).toBe(inDays(30));
      const forever = await createKey(app.tenant, { name: 'forever' });
      expect((await rotate(app.tenant, forever.id, {})).expires_at).toBeNull();
    });

    it('keeps the lifetime across successive rotations', async () => {
      const first = await createKey(app.tenant, { name: 'chain', days_to_expire: 5 });
      const second = await rotate(app.tenant, first.id);
      clock.advance(DAY);
      expect((await rotate(app.tenant, second.id)).expires_at).toBe(inDays(5));
    });

    it('sets a new lifetime, or none with null', async () => {
      const old = await createKey(app.tenant, { name: 'relifed', days_to_expire: 30 });
      expect((await rotate(app.tenant, old.id, { days_to_expire: 90 })).expires_at).toBe(inDays(90));
      const again = await createKey(app.tenant, { name: 'unlimited', days_to_expire: 30 });
      const fresh = await rotate(app.tenant, again.id, { days_to_expire: null });
      expect(fresh.expires_at).toBeNull();
      clock.advance(31 * DAY);
      expect(await works(fresh.key)).toBe(200);
    });
  });

  it.each([
    ['days_to_expire 0', { days_to_expire: 0 }, 'body.days_to_expire'],
    ['days_to_expire 3651', { days_to_expire: 3651 }, 'body.days_to_expire'],
    ['a negative expire_in_days', { expire_in_days: -1 }, 'body.expire_in_days'],
    ['a fractional expire_in_days', { expire_in_days: 0.5 }, 'body.expire_in_days'],
    ['expire_in_days as a string', { expire_in_days: '7' }, 'body.expire_in_days'],
    ['an unknown field', { name: 'renamed' }, 'body'],
    ['an array body', [], 'body'],
  ])('refuses %s with 400 and changes nothing', async (_case, body, field) => {
    const tenant = await app.newTenant();
    const old = await createKey(tenant, { name: 'untouched', days_to_expire: 10 });
    const before = await allKeys(tenant.http);
    const res = await tenant.http.post(`/org/api_keys/${old.id}/rotate`, body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(errorFields(res)).toContain(field);
    expect(await allKeys(tenant.http)).toEqual(before);
    expect(await works(old.key)).toBe(200);
  });

  it('reports every bad field at once', async () => {
    const old = await createKey(app.tenant, { name: 'both wrong' });
    const res = await app.tenant.http.post(`/org/api_keys/${old.id}/rotate`, { days_to_expire: 0, expire_in_days: -1 });
    expect(res.status).toBe(400);
    expect(errorFields(res)).toEqual(['body.days_to_expire', 'body.expire_in_days']);
  });

  it('answers 404 for a deleted or unknown key and issues nothing', async () => {
    const tenant = await app.newTenant();
    const old = await createKey(tenant, { name: 'deleted' });
    expect((await tenant.http.delete(`/org/api_keys/${old.id}`)).status).toBe(204);
    const before = await allKeys(tenant.http);
    for (const id of [old.id, 'key_unknown']) {
      const res = await tenant.http.post(`/org/api_keys/${id}/rotate`, {});
      expect(res.status, id).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect(await allKeys(tenant.http)).toEqual(before);
  });

  it('refuses to rotate an expired key whose project was deleted since', async () => {
    const tenant = await app.newTenant();
    const project = await createProject(tenant, 'short lived');
    const old = await createKey(tenant, { name: 'orphan', project_id: project.id, days_to_expire: 1 });
    clock.advance(DAY);
    expect((await tenant.http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    const before = await allKeys(tenant.http);
    const res = await tenant.http.post(`/org/api_keys/${old.id}/rotate`, {});
    expect(res.status).toBe(409);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(res.body.code).toBe('project_deleted');
    expect(await allKeys(tenant.http)).toEqual(before);
  });
});
