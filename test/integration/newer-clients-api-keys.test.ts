import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { DAY } from './api-keys.fixtures.js';

describe('API keys: expires_at', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-08-15T10:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const keyCount = async (orgId: string) =>
    (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1', [orgId])).rows[0]!.n;

  it('makes a key that works until expires_at and is refused from then on', async () => {
    const tenant = await app.newTenant();
    const expiresAt = new Date(clock.now().getTime() + 2 * 3_600_000);
    const res = await tenant.http.post('/org/api_keys', { name: 'short-lived', expires_at: expiresAt.toISOString() });
    expect(res.status, res.text).toBe(200);
    expect(res.body.expires_at).toBe(expiresAt.toISOString());
    expect((await tenant.http.get(`/org/api_keys/${res.body.id}`)).body.expires_at).toBe(expiresAt.toISOString());

    const client = app.client(res.body.key);
    expect((await client.get('/credentials')).status).toBe(200);
    clock.set(new Date(expiresAt.getTime() - 1));
    expect((await client.get('/credentials')).status).toBe(200);
    clock.set(expiresAt);
    const refused = await client.get('/credentials');
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'unauthorized', message: 'The API key has expired' });
    clock.set(new Date('2026-08-15T10:00:00Z'));
  });

  it('takes an offset and null (never expires)', async () => {
    const tenant = await app.newTenant();
    const offset = await tenant.http.post('/org/api_keys', { name: 'offset', expires_at: '2026-08-16T12:00:00+02:00' });
    expect(offset.status, offset.text).toBe(200);
    expect(offset.body.expires_at).toBe('2026-08-16T10:00:00.000Z');
    const never = await tenant.http.post('/org/api_keys', { name: 'never', expires_at: null });
    expect(never.body.expires_at).toBeNull();
  });

  it.each([
    ['in the past', { expires_at: '2026-08-15T09:59:59Z' }, 'body.expires_at'],
    ['now', { expires_at: '2026-08-15T10:00:00Z' }, 'body.expires_at'],
    ['beyond 3650 days', { expires_at: new Date(Date.parse('2026-08-15T10:00:00Z') + 3651 * DAY).toISOString() }, 'body.expires_at'],
    ['not a timestamp', { expires_at: 'tomorrow' }, 'body.expires_at'],
    ['a date without time', { expires_at: '2026-09-01' }, 'body.expires_at'],
    ['a number', { expires_at: 1_800_000_000 }, 'body.expires_at'],
    ['with days_to_expire', { expires_at: '2026-09-01T00:00:00Z', days_to_expire: 30 }, 'body.expires_at'],
  ])('refuses expires_at %s with 400 naming the field, and makes no key', async (_case, body, field) => {
    const tenant = await app.newTenant();
    const before = await keyCount(tenant.orgId);
    const res = await tenant.http.post('/org/api_keys', { name: 'bad', ...body });
    expect(res.status, res.text).toBe(400);
    expect(errorFields(res)).toContain(field);
    expect(await keyCount(tenant.orgId)).toBe(before);
  });
});
