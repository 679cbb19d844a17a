import Kernel, { AuthenticationError, BadRequestError, ConflictError, NotFoundError, PermissionDeniedError } from '@onkernel/sdk';
import type { APIKey } from '@onkernel/sdk/resources/api-keys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_MS, detailFields, msBetween, recordingFetch, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

const OWNER_EMAIL = 'e2e-owner@example.com';

let service: RunningService;
let admin: Kernel;
let adminKeyId: string;

beforeAll(async () => {
  service = await startService({ env: { BROWSERPLANE_ADMIN_EMAIL: OWNER_EMAIL } });
  admin = service.client();
  const [bootstrapKey] = await collect(admin.apiKeys.list({ name: 'bootstrap admin' }));
  adminKeyId = bootstrapKey!.id;
});
afterAll(cleanupServices);

/** A key that works: the cheapest org route answers it. */
const works = (key: string) => service.client(key).organization.limits.retrieve();

describe('apiKeys.create', () => {
  it('creates an org-wide key whose plaintext works and is returned only by create', async () => {
    const name = unique('org-wide');

    const created = await admin.apiKeys.create({ name });

    expect(created).toEqual({
      id: expect.any(String),
      name,
      key: expect.stringMatching(/^bp_[A-Za-z0-9_-]{40,}$/),
      masked_key: expect.any(String),
      created_at: expect.any(String),
      created_by: { id: adminKeyId, email: OWNER_EMAIL, name: 'bootstrap admin' },
      deleted_at: null,
      expires_at: null,
      project_id: null,
      project_name: null,
    });
    expect(Math.abs(Date.now() - Date.parse(created.created_at))).toBeLessThan(60_000);
    expect(created.masked_key.startsWith(created.key.slice(0, 5))).toBe(true);
    expect(created.masked_key.endsWith(created.key.slice(-4))).toBe(true);
    expect(created.masked_key).not.toContain(created.key.slice(5, -4));
    await expect(works(created.key)).resolves.toBeDefined();
    const retrieved = await admin.apiKeys.retrieve(created.id);
    expect(retrieved).not.toHaveProperty('key');
    const { key: _key, ...withoutKey } = created;
    expect(retrieved).toEqual(withoutKey);
  });

  it('scopes a key to a project named by id or by name', async () => {
    const project = await admin.projects.create({ name: unique('scope') });

    const byId = await admin.apiKeys.create({ name: unique('by-id'), project_id: project.id });
    const byName = await admin.apiKeys.create({ name: unique('by-name'), project_id: project.name.toUpperCase() });

    for (const key of [byId, byName]) {
      expect(key).toMatchObject({ project_id: project.id, project_name: project.name });
      // Authenticated (403, not 401), but a project-scoped key is refused on /org routes.
      await rejection(works(key.key), PermissionDeniedError);
    }
  });

  it('sets expires_at days_to_expire days after created_at', async () => {
    const created = await admin.apiKeys.create({ name: unique('expiring'), days_to_expire: 30 });

    expect(msBetween(created.created_at, created.expires_at)).toBe(30 * DAY_MS);
    await expect(works(created.key)).resolves.toBeDefined();
  });

  it('refuses invalid fields with BadRequestError listing each of them', async () => {
    const error = await rejection(admin.apiKeys.create({ name: '', days_to_expire: 0 }), BadRequestError);
    expect(error.status).toBe(400);
    expect(detailFields(error)).toEqual(['body.days_to_expire', 'body.name']);

    const tooLong = await rejection(admin.apiKeys.create({ name: 'x', days_to_expire: 3651 }), BadRequestError);
    expect(detailFields(tooLong)).toEqual(['body.days_to_expire']);
    await rejection(admin.apiKeys.create({ name: 'n'.repeat(256) }), BadRequestError);
  });

  it('refuses a project that does not exist with NotFoundError', async () => {
    const error = await rejection(admin.apiKeys.create({ name: unique('orphan'), project_id: unique('no-such-project') }), NotFoundError);
    expect(error.error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  });
});

describe('apiKeys.retrieve', () => {
  it('finds a deleted key only with include_deleted', async () => {
    const created = await admin.apiKeys.create({ name: unique('deleted') });
    await admin.apiKeys.delete(created.id);

    await rejection(admin.apiKeys.retrieve(created.id), NotFoundError);
    await rejection(admin.apiKeys.retrieve(created.id, { include_deleted: false }), NotFoundError);
    const found = await admin.apiKeys.retrieve(created.id, { include_deleted: true });

    expect(found).toMatchObject({ id: created.id, name: created.name });
    expect(Math.abs(Date.now() - Date.parse(found.deleted_at!))).toBeLessThan(60_000);
  });

  it('answers an unknown id with NotFoundError', async () => {
    await rejection(admin.apiKeys.retrieve('key_doesnotexist'), NotFoundError);
  });
});

describe('apiKeys.update', () => {
  it('renames a key, which keeps working', async () => {
    const created = await admin.apiKeys.create({ name: unique('before') });
    const name = unique('after');

    const updated = await admin.apiKeys.update(created.id, { name });

    expect(updated).toMatchObject({ id: created.id, name, masked_key: created.masked_key });
    await expect(admin.apiKeys.retrieve(created.id)).resolves.toMatchObject({ name });
    await expect(works(created.key)).resolves.toBeDefined();
  });

  it('refuses an empty name, an unknown key and a deleted key', async () => {
    const created = await admin.apiKeys.create({ name: unique('rename-me') });
    const error = await rejection(admin.apiKeys.update(created.id, { name: '   ' }), BadRequestError);
    expect(detailFields(error)).toEqual(['body.name']);

    await rejection(admin.apiKeys.update('key_doesnotexist', { name: 'x' }), NotFoundError);
    await admin.apiKeys.delete(created.id);
    await rejection(admin.apiKeys.update(created.id, { name: 'x' }), NotFoundError);
  });
});

describe('apiKeys.list', () => {
  async function keysNamed(prefix: string, count: number, extra: { days?: (i: number) => number } = {}): Promise<APIKey[]> {
    const keys: APIKey[] = [];
    for (let i = 0; i < count; i++) {
      keys.push(await admin.apiKeys.create({ name: `${prefix}-${i}`, days_to_expire: extra.days?.(i) ?? null }));
    }
    return keys;
  }

  it('pages through more than one page with for await, following X-Next-Offset', async () => {
    const prefix = unique('paged');
    const keys = await keysNamed(prefix, 5);
    const wire = recordingFetch();
    const client = service.client(undefined, { fetch: wire.fetch });

    const seen: string[] = [];
    for await (const key of client.apiKeys.list({ query: prefix, limit: 2, sort_by: 'name', sort_direction: 'asc' })) {
      seen.push(key.name);
    }

    expect(seen).toEqual(keys.map((k) => k.name));
    expect(wire.calls.map((c) => c.url.searchParams.get('offset'))).toEqual([null, '2', '4']);
    expect(wire.calls.map((c) => [c.headers.get('x-has-more'), c.headers.get('x-next-offset')])).toEqual([
      ['true', '2'],
      ['true', '4'],
      ['false', '0'],
    ]);
  });

  it('exposes pages: a full first page says there is more', async () => {
    const prefix = unique('pages');
    await keysNamed(prefix, 3);

    const first = await admin.apiKeys.list({ query: prefix, limit: 2 });
    expect(first.getPaginatedItems()).toHaveLength(2);
    expect(first.hasNextPage()).toBe(true);
    const second = await first.getNextPage();
    expect(second.getPaginatedItems()).toHaveLength(1);
    expect(second.hasNextPage()).toBe(false);
  });

  it('filters by exact name', async () => {
    const name = unique('exact');
    const wanted = await admin.apiKeys.create({ name });
    await admin.apiKeys.create({ name: `${name}-longer` });

    const found = await collect(admin.apiKeys.list({ name }));

    expect(found.map((k) => k.id)).toEqual([wanted.id]);
  });

  it('query matches a name substring, an id prefix, the masked key and the project name', async () => {
    const project = await admin.projects.create({ name: unique('queried-project') });
    const key = await admin.apiKeys.create({ name: unique('queried'), project_id: project.id });
    const ids = async (query: string) => (await collect(admin.apiKeys.list({ query, status: 'all' }))).map((k) => k.id);

    expect(await ids(key.name.slice(3, -2).toUpperCase())).toEqual([key.id]);
    expect(await ids(key.id)).toEqual([key.id]);
    expect(await ids(key.masked_key)).toEqual([key.id]);
    expect(await ids(project.name)).toEqual([key.id]);
    expect(await ids(unique('matches-nothing'))).toEqual([]);
  });

  it('status selects active, deleted or all keys; include_deleted still means all', async () => {
    const prefix = unique('status');
    const [kept, gone] = await keysNamed(prefix, 2);
    await admin.apiKeys.delete(gone!.id);
    const names = async (params: Parameters<typeof admin.apiKeys.list>[0]) =>
      (await collect(admin.apiKeys.list({ query: prefix, sort_by: 'name', sort_direction: 'asc', ...params }))).map((k) => k.name);

    expect(await names({})).toEqual([kept!.name]);
    expect(await names({ status: 'active' })).toEqual([kept!.name]);
    expect(await names({ status: 'deleted' })).toEqual([gone!.name]);
    expect(await names({ status: 'all' })).toEqual([kept!.name, gone!.name]);
    expect(await names({ include_deleted: true })).toEqual([kept!.name, gone!.name]);
  });

  it('sorts by name, created_at and expires_at in either direction', async () => {
    const prefix = unique('sorted');
    // Created in the order 0, 1, 2 with expiries 30, 10, 20 days.
    const keys = await keysNamed(prefix, 3, { days: (i) => [30, 10, 20][i]! });
    const order = async (sort_by: 'name' | 'created_at' | 'expires_at', sort_direction?: 'asc' | 'desc') =>
      (await collect(admin.apiKeys.list({ query: prefix, sort_by, ...(sort_direction ? { sort_direction } : {}) }))).map((k) =>
        keys.findIndex((c) => c.id === k.id),
      );

    expect(await order('name', 'asc')).toEqual([0, 1, 2]);
    expect(await order('name', 'desc')).toEqual([2, 1, 0]);
    expect(await order('created_at', 'asc')).toEqual([0, 1, 2]);
    expect(await order('created_at')).toEqual([2, 1, 0]); // newest first by default
    expect(await order('expires_at', 'asc')).toEqual([1, 2, 0]);
    expect(await order('expires_at', 'desc')).toEqual([0, 2, 1]);
  });

  it('refuses an invalid sort_by, status or limit with BadRequestError', async () => {
    const bad = (params: Record<string, unknown>) => collect(admin.apiKeys.list(params as never));

    expect(detailFields(await rejection(bad({ sort_by: 'key' }), BadRequestError))).toEqual(['query.sort_by']);
    expect(detailFields(await rejection(bad({ status: 'expired' }), BadRequestError))).toEqual(['query.status']);
    expect(detailFields(await rejection(bad({ limit: 0 }), BadRequestError))).toEqual(['query.limit']);
    expect(detailFields(await rejection(bad({ limit: 101 }), BadRequestError))).toEqual(['query.limit']);
  });
});

describe('apiKeys.delete', () => {
  it('deletes a key, which is then refused and no longer listed', async () => {
    const created = await admin.apiKeys.create({ name: unique('doomed') });
    const wire = recordingFetch();

    await expect(service.client(undefined, { fetch: wire.fetch }).apiKeys.delete(created.id)).resolves.toBeNull(); // the SDK yields null for a 204

    expect(wire.calls.map((c) => c.status)).toEqual([204]);
    await rejection(works(created.key), AuthenticationError);
    expect(await collect(admin.apiKeys.list({ name: created.name }))).toEqual([]);
    await rejection(admin.apiKeys.delete(created.id), NotFoundError);
  });

  it('refuses to delete the key making the request with ConflictError, without retries', async () => {
    const own = await admin.apiKeys.create({ name: unique('self') });
    const wire = recordingFetch();
    // Default retries (2): the 409 must carry x-should-retry: false so the SDK sends it once.
    const client = new Kernel({ apiKey: own.key, baseURL: service.url, fetch: wire.fetch });

    const error = await rejection(client.apiKeys.delete(own.id), ConflictError);

    expect(error.headers.get('x-should-retry')).toBe('false');
    expect(wire.calls).toHaveLength(1);
    await expect(works(own.key)).resolves.toBeDefined();
  });

  it('answers an unknown id with NotFoundError', async () => {
    await rejection(admin.apiKeys.delete('key_doesnotexist'), NotFoundError);
  });
});

describe('apiKeys.rotate', () => {
  it('issues a working successor with the same name and project and gives the old key 7 days', async () => {
    const project = await admin.projects.create({ name: unique('rotating') });
    const old = await admin.apiKeys.create({ name: unique('rotated'), project_id: project.id });

    const successor = await admin.apiKeys.rotate(old.id);

    expect(successor).toMatchObject({ name: old.name, project_id: project.id, project_name: project.name, expires_at: null });
    expect(successor.id).not.toBe(old.id);
    expect(successor.key).not.toBe(old.key);
    // Both authenticate (a scoped key gets 403 on /org routes, an unknown one 401).
    await rejection(works(successor.key), PermissionDeniedError);
    await rejection(works(old.key), PermissionDeniedError);
    const oldNow = await admin.apiKeys.retrieve(old.id);
    expect(msBetween(successor.created_at, oldNow.expires_at)).toBe(7 * DAY_MS);
  });

  it('with expire_in_days 0 retires the old key at once', async () => {
    const old = await admin.apiKeys.create({ name: unique('retired') });

    const successor = await admin.apiKeys.rotate(old.id, { expire_in_days: 0 });

    await rejection(works(old.key), AuthenticationError);
    await expect(works(successor.key)).resolves.toBeDefined();
  });

  it('keeps the old lifetime unless days_to_expire says otherwise', async () => {
    const old = await admin.apiKeys.create({ name: unique('lifetime'), days_to_expire: 30 });

    const same = await admin.apiKeys.rotate(old.id);
    const shorter = await admin.apiKeys.rotate(same.id, { days_to_expire: 5 });
    const forever = await admin.apiKeys.rotate(shorter.id, { days_to_expire: null });

    expect(msBetween(same.created_at, same.expires_at)).toBe(30 * DAY_MS);
    expect(msBetween(shorter.created_at, shorter.expires_at)).toBe(5 * DAY_MS);
    expect(forever.expires_at).toBeNull();
  });

  it('never extends an old key that expires before the grace period ends', async () => {
    const old = await admin.apiKeys.create({ name: unique('short-lived'), days_to_expire: 1 });

    await admin.apiKeys.rotate(old.id, { expire_in_days: 7 });

    await expect(admin.apiKeys.retrieve(old.id)).resolves.toMatchObject({ expires_at: old.expires_at });
  });

  it('refuses a deleted key with NotFoundError and a negative grace with BadRequestError', async () => {
    const key = await admin.apiKeys.create({ name: unique('unrotatable') });
    expect(detailFields(await rejection(admin.apiKeys.rotate(key.id, { expire_in_days: -1 }), BadRequestError))).toEqual([
      'body.expire_in_days',
    ]);
    await admin.apiKeys.delete(key.id);
    await rejection(admin.apiKeys.rotate(key.id), NotFoundError);
  });
});
