import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type Tenant, type TestApp } from '../support/test-app.js';
import { createKey as createKeyNow, createProject, DAY, errorFields, idsOf, withoutPlaintext, type ApiKey } from './api-keys.fixtures.js';

describe('listing API keys', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-05-20T09:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  /** Creates a key a second after the previous one, so creation order is unambiguous. */
  const createKey = (tenant: Tenant, body: Record<string, unknown>) => {
    clock.advance(1000);
    return createKeyNow(tenant, body);
  };
  const list = async (tenant: Tenant, query: string) => {
    const res = await tenant.http.get<ApiKey[]>(`/org/api_keys${query}`);
    expect(res.status, res.text).toBe(200);
    return res;
  };
  const names = async (tenant: Tenant, query: string) => (await list(tenant, query)).body.map((k) => k.name);
  const ids = async (tenant: Tenant, query: string) => idsOf((await list(tenant, query)).body);

  it('returns a bare array of APIKeys, newest first, with paging headers', async () => {
    const tenant = await app.newTenant();
    const first = await createKey(tenant, { name: 'first' });
    await createKey(tenant, { name: 'second' });
    const res = await list(tenant, '');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-has-more')).toBe('false');
    expect(res.headers.get('x-next-offset')).toBe('0');
    expect(res.body.map((k) => k.name)).toEqual(['second', 'first', 'admin']);
    expect(res.body[1]).toEqual(withoutPlaintext(first));
  });

  it('pages with offset and limit until X-Next-Offset is 0', async () => {
    const tenant = await app.newTenant();
    for (const name of ['k1', 'k2', 'k3', 'k4']) await createKey(tenant, { name });
    const seen: string[] = [];
    const heads: [string | null, string | null][] = [];
    for (let offset = 0, guard = 0; guard < 5; guard++) {
      const res = await list(tenant, `?limit=2&offset=${offset}`);
      seen.push(...res.body.map((k) => k.name));
      heads.push([res.headers.get('x-has-more'), res.headers.get('x-next-offset')]);
      offset = Number(res.headers.get('x-next-offset'));
      if (offset === 0) break;
    }
    expect(seen).toEqual(['k4', 'k3', 'k2', 'k1', 'admin']);
    expect(heads).toEqual([['true', '2'], ['true', '4'], ['false', '0']]);
    const beyond = await list(tenant, '?offset=10');
    expect(beyond.body).toEqual([]);
    expect([beyond.headers.get('x-has-more'), beyond.headers.get('x-next-offset')]).toEqual(['false', '0']);
  });

  it('returns 20 keys by default and up to 100 on request', async () => {
    const tenant = await app.newTenant();
    for (let i = 0; i < 21; i++) await createKey(tenant, { name: `bulk ${i}` });
    const page = await list(tenant, '');
    expect(page.body).toHaveLength(20);
    expect([page.headers.get('x-has-more'), page.headers.get('x-next-offset')]).toEqual(['true', '20']);
    const all = await list(tenant, '?limit=100');
    expect(all.body).toHaveLength(22);
    expect(all.headers.get('x-has-more')).toBe('false');
  });

  it.each([
    ['limit=0', ['query.limit']],
    ['limit=101', ['query.limit']],
    ['limit=ten', ['query.limit']],
    ['limit=2.5', ['query.limit']],
    ['offset=-1', ['query.offset']],
    ['offset=first', ['query.offset']],
    ['limit=0&offset=-1', ['query.limit', 'query.offset']],
    ['status=expired', ['query.status']],
    ['sort_by=id', ['query.sort_by']],
    ['sort_direction=up', ['query.sort_direction']],
    ['include_deleted=perhaps', ['query.include_deleted']],
    ['query=a%00b', ['query.query']],
    ['name=a%00b', ['query.name']],
  ])('refuses %s with 400 naming the parameter', async (query, fields) => {
    const res = await app.tenant.http.get(`/org/api_keys?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(errorFields(res)).toEqual(fields);
  });

  it('filters by exact name', async () => {
    const tenant = await app.newTenant();
    const alpha = await createKey(tenant, { name: 'alpha' });
    await createKey(tenant, { name: 'alpha2' });
    await createKey(tenant, { name: 'the alpha' });
    expect(await ids(tenant, '?name=alpha')).toEqual([alpha.id]);
    expect(await ids(tenant, '?name=alp')).toEqual([]);
  });

  describe('query', () => {
    it('matches a substring of the name, case-insensitively', async () => {
      const tenant = await app.newTenant();
      await createKey(tenant, { name: 'Production Deploy' });
      await createKey(tenant, { name: 'staging' });
      expect(await names(tenant, '?query=duction%20dep')).toEqual(['Production Deploy']);
    });

    it('matches the name of the key that created a key', async () => {
      const tenant = await app.newTenant();
      const robot = await createKey(tenant, { name: 'robot-creator' });
      const child = (await app.client(robot.key).post<ApiKey>('/org/api_keys', { name: 'child' })).body;
      await createKey(tenant, { name: 'unrelated' });
      expect(await ids(tenant, '?query=ROBOT-creat')).toEqual([robot.id, child.id].sort());
    });

    it('matches the owner email of the organisation', async () => {
      const tenant = await app.newTenant('mailbox');
      const key = await createKey(tenant, { name: 'any' });
      expect(await ids(tenant, '?query=mailbox%40example')).toEqual([key.id, tenant.adminKeyId].sort());
    });

    it('matches the project name', async () => {
      const tenant = await app.newTenant();
      const project = await createProject(tenant, 'Blue Team');
      const scoped = await createKey(tenant, { name: 'scoped', project_id: project.id });
      await createKey(tenant, { name: 'org-wide' });
      expect(await ids(tenant, '?query=blue%20t')).toEqual([scoped.id]);
    });

    it('matches an id or a masked key exactly or by prefix, never in the middle', async () => {
      const tenant = await app.newTenant();
      const key = await createKey(tenant, { name: 'target' });
      await createKey(tenant, { name: 'decoy' });
      for (const q of [key.id, key.id.slice(0, 12), key.masked_key, key.masked_key.slice(0, 7)]) {
        expect(await ids(tenant, `?query=${encodeURIComponent(q)}`), q).toEqual([key.id]);
      }
      for (const q of [key.id.slice(5, 15), key.masked_key.slice(3, 7), key.masked_key.slice(-4)]) {
        expect(await ids(tenant, `?query=${encodeURIComponent(q)}`), q).toEqual([]);
      }
    });

    it('treats LIKE wildcards and backslashes literally', async () => {
      const tenant = await app.newTenant();
      await createKey(tenant, { name: '100% done' });
      await createKey(tenant, { name: '1000 done' });
      await createKey(tenant, { name: 'a_b' });
      await createKey(tenant, { name: 'axb' });
      await createKey(tenant, { name: 'back\\slash' });
      expect(await names(tenant, '?query=%25')).toEqual(['100% done']);
      expect(await names(tenant, '?query=0%25%20d')).toEqual(['100% done']);
      expect(await names(tenant, '?query=_')).toEqual(['a_b']);
      expect(await names(tenant, '?query=a_b')).toEqual(['a_b']);
      expect(await names(tenant, '?query=%5C')).toEqual(['back\\slash']);
    });
  });

  describe('status', () => {
    const arrange = async () => {
      const tenant = await app.newTenant();
      const live = await createKey(tenant, { name: 'live' });
      const expired = await createKey(tenant, { name: 'expired', days_to_expire: 1 });
      const deleted = await createKey(tenant, { name: 'deleted' });
      expect((await tenant.http.delete(`/org/api_keys/${deleted.id}`)).status).toBe(204);
      clock.advance(2 * DAY);
      return { tenant, live: live.id, expired: expired.id, deleted: deleted.id, admin: tenant.adminKeyId };
    };

    it('lists active keys by default, expired ones included', async () => {
      const k = await arrange();
      const active = [k.live, k.expired, k.admin].sort();
      expect(await ids(k.tenant, '')).toEqual(active);
      expect(await ids(k.tenant, '?status=active')).toEqual(active);
      expect(await ids(k.tenant, '?include_deleted=false')).toEqual(active);
    });

    it('lists only deleted keys with status=deleted', async () => {
      const k = await arrange();
      expect(await ids(k.tenant, '?status=deleted')).toEqual([k.deleted]);
    });

    it('lists every key with status=all or the deprecated include_deleted=true', async () => {
      const k = await arrange();
      const all = [k.live, k.expired, k.deleted, k.admin].sort();
      expect(await ids(k.tenant, '?status=all')).toEqual(all);
      expect(await ids(k.tenant, '?include_deleted=true')).toEqual(all);
    });

    it('lets an explicit status win over include_deleted', async () => {
      const k = await arrange();
      expect(await ids(k.tenant, '?status=active&include_deleted=true')).toEqual([k.live, k.expired, k.admin].sort());
    });
  });

  describe('sorting', () => {
    const arrange = async () => {
      const tenant = await app.newTenant();
      await createKey(tenant, { name: 'sortme b', days_to_expire: 3 });
      await createKey(tenant, { name: 'sortme a', days_to_expire: 1 });
      await createKey(tenant, { name: 'sortme c', days_to_expire: 2 });
      return tenant;
    };

    it.each([
      ['', ['sortme c', 'sortme a', 'sortme b']],
      ['&sort_direction=asc', ['sortme b', 'sortme a', 'sortme c']],
      ['&sort_by=name', ['sortme c', 'sortme b', 'sortme a']],
      ['&sort_by=name&sort_direction=asc', ['sortme a', 'sortme b', 'sortme c']],
      ['&sort_by=expires_at&sort_direction=asc', ['sortme a', 'sortme c', 'sortme b']],
      ['&sort_by=expires_at&sort_direction=desc', ['sortme b', 'sortme c', 'sortme a']],
    ])('orders by "%s"', async (params, expected) => {
      const tenant = await arrange();
      expect(await names(tenant, `?query=sortme${params}`)).toEqual(expected);
    });

    it('pages through a sort without repeating or skipping keys that share a timestamp', async () => {
      const tenant = await app.newTenant();
      const created: string[] = [];
      for (let i = 0; i < 5; i++) created.push((await createKeyNow(tenant, { name: 'same' })).id);
      const seen: string[] = [];
      for (const offset of [0, 2, 4]) {
        const res = await list(tenant, `?name=same&limit=2&offset=${offset}&sort_by=name`);
        seen.push(...res.body.map((k) => k.id));
      }
      expect(seen.sort()).toEqual(created.sort());
    });
  });
});
