import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { allKeys, createKey, createProject, DAY, errorFields, idsOf, withoutPlaintext, type ApiKey, type CreatedApiKey } from './api-keys.fixtures.js';

const KEY_SHAPE = /^bp_[A-Za-z0-9_-]{43}$/;

describe('API keys: create, get, rename, delete', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-03-01T12:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  describe('create', () => {
    it('returns the plaintext key once, with every APIKey field', async () => {
      const tenant = await app.newTenant('maker');
      const res = await tenant.http.post<CreatedApiKey>('/org/api_keys', { name: 'ci' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const { key, ...rest } = res.body;
      expect(key).toMatch(KEY_SHAPE);
      expect(rest).toEqual({
        id: expect.stringMatching(/^key_/),
        name: 'ci',
        masked_key: `${key.slice(0, 7)}...${key.slice(-4)}`,
        created_at: clock.now().toISOString(),
        created_by: { id: tenant.adminKeyId, email: 'maker@example.test', name: 'admin' },
        deleted_at: null,
        expires_at: null,
        project_id: null,
        project_name: null,
      });
    });

    it('issues a key that authenticates and is never shown again', async () => {
      const tenant = await app.newTenant();
      const created = await createKey(tenant, { name: 'once' });
      expect((await app.client(created.key).get('/org/api_keys')).status).toBe(200);

      const got = await tenant.http.get(`/org/api_keys/${created.id}`);
      const listed = await tenant.http.get('/org/api_keys?status=all');
      for (const res of [got, listed]) {
        expect(res.status).toBe(200);
        expect(res.text).not.toContain(created.key);
        expect(res.text).not.toContain('"key"');
      }
      expect(got.body).toEqual(withoutPlaintext(created));
    });

    it('stores only the SHA-256 hash of the key', async () => {
      const created = await createKey(app.tenant, { name: 'hashed' });
      const { rows } = await app.database.db.query('SELECT * FROM api_keys WHERE id = $1', [created.id]);
      expect(rows).toHaveLength(1);
      expect(rows[0].key_hash).toEqual(createHash('sha256').update(created.key).digest());
      expect(JSON.stringify(rows[0])).not.toContain(created.key.slice(3));
    });

    it('generates a different key every time', async () => {
      const a = await createKey(app.tenant, { name: 'same' });
      const b = await createKey(app.tenant, { name: 'same' });
      expect(a.key).not.toBe(b.key);
      expect(a.id).not.toBe(b.id);
    });

    it('trims the name and accepts 255 characters, counted as code points', async () => {
      expect((await createKey(app.tenant, { name: '  padded  ' })).name).toBe('padded');
      for (const long of ['n'.repeat(255), '🚀'.repeat(255)]) {
        expect((await createKey(app.tenant, { name: long })).name).toBe(long);
      }
      expect((await app.tenant.http.post('/org/api_keys', { name: '🚀'.repeat(256) })).status).toBe(400);
    });

    it('sets expires_at days_to_expire days after creation, and never with null', async () => {
      const thirty = await createKey(app.tenant, { name: 'thirty', days_to_expire: 30 });
      expect(thirty.expires_at).toBe(new Date(clock.now().getTime() + 30 * DAY).toISOString());
      const max = await createKey(app.tenant, { name: 'max', days_to_expire: 3650 });
      expect(max.expires_at).toBe(new Date(clock.now().getTime() + 3650 * DAY).toISOString());
      expect((await createKey(app.tenant, { name: 'never', days_to_expire: null })).expires_at).toBeNull();
    });

    it('scopes a key to a project named by id or by name', async () => {
      const tenant = await app.newTenant();
      const project = await createProject(tenant, 'Équipe Rouge');
      const byId = await createKey(tenant, { name: 'by id', project_id: project.id });
      const byName = await createKey(tenant, { name: 'by name', project_id: 'equipe rouge' });
      for (const key of [byId, byName]) {
        expect(key.project_id).toBe(project.id);
        expect(key.project_name).toBe('Équipe Rouge');
      }
      expect((await createKey(tenant, { name: 'org-wide', project_id: null })).project_id).toBeNull();
      const longName = '🚀'.repeat(255);
      const long = await createProject(tenant, longName);
      expect((await createKey(tenant, { name: 'long', project_id: longName })).project_id).toBe(long.id);
    });

    it('refuses an unknown or deleted project with 404 and creates nothing', async () => {
      const tenant = await app.newTenant();
      const gone = await createProject(tenant, 'gone');
      expect((await tenant.http.delete(`/org/projects/${gone.id}`)).status).toBe(204);
      const before = await allKeys(tenant.http);
      for (const projectId of ['proj_doesnotexist', 'no such project', gone.id]) {
        const res = await tenant.http.post('/org/api_keys', { name: 'x', project_id: projectId });
        expect(res.status, projectId).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
      expect(await allKeys(tenant.http)).toEqual(before);
    });

    it.each([
      ['no name', {}, ['body.name']],
      ['an empty name', { name: '' }, ['body.name']],
      ['a blank name', { name: '   ' }, ['body.name']],
      ['a 256-character name', { name: 'n'.repeat(256) }, ['body.name']],
      ['a control character in the name', { name: 'a\u0000b' }, ['body.name']],
      ['a newline inside the name', { name: 'a\nb' }, ['body.name']],
      ['a numeric name', { name: 7 }, ['body.name']],
      ['days_to_expire 0', { name: 'x', days_to_expire: 0 }, ['body.days_to_expire']],
      ['days_to_expire 3651', { name: 'x', days_to_expire: 3651 }, ['body.days_to_expire']],
      ['a fractional days_to_expire', { name: 'x', days_to_expire: 1.5 }, ['body.days_to_expire']],
      ['days_to_expire as a string', { name: 'x', days_to_expire: '30' }, ['body.days_to_expire']],
      ['an empty project_id', { name: 'x', project_id: '' }, ['body.project_id']],
      ['a NUL in project_id', { name: 'x', project_id: 'a\u0000' }, ['body.project_id']],
      ['an unknown field', { name: 'x', scopes: ['all'] }, ['body']],
      ['a bad name and a bad days_to_expire', { name: '', days_to_expire: -1 }, ['body.name', 'body.days_to_expire']],
    ])('refuses %s with 400, naming every bad field, and creates nothing', async (_case, body, fields) => {
      const tenant = await app.newTenant();
      const before = await allKeys(tenant.http);
      const res = await tenant.http.post('/org/api_keys', body);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.body).toMatchObject({ code: 'invalid_request', message: expect.any(String) });
      expect(errorFields(res)).toEqual([...fields].sort());
      for (const detail of res.body.details) {
        expect(detail).toEqual({ code: expect.any(String), field: expect.any(String), message: expect.any(String) });
      }
      expect(await allKeys(tenant.http)).toEqual(before);
    });
  });

  describe('get', () => {
    it('finds a deleted key only with include_deleted=true', async () => {
      const key = await createKey(app.tenant, { name: 'doomed' });
      expect((await app.tenant.http.delete(`/org/api_keys/${key.id}`)).status).toBe(204);
      for (const suffix of ['', '?include_deleted=false']) {
        const res = await app.tenant.http.get(`/org/api_keys/${key.id}${suffix}`);
        expect(res.status, suffix).toBe(404);
        expect(res.body).toMatchObject({ code: 'not_found', details: [] });
      }
      const found = await app.tenant.http.get(`/org/api_keys/${key.id}?include_deleted=true`);
      expect(found.status).toBe(200);
      expect(found.body).toMatchObject({ id: key.id, deleted_at: clock.now().toISOString() });
    });

    it('answers 404 for an unknown id and 400 for a bad include_deleted', async () => {
      expect((await app.tenant.http.get('/org/api_keys/key_nosuchkey')).status).toBe(404);
      expect((await app.tenant.http.get('/org/api_keys/key%00nul')).status).toBe(400);
      const key = await createKey(app.tenant, { name: 'flagged' });
      const res = await app.tenant.http.get(`/org/api_keys/${key.id}?include_deleted=maybe`);
      expect(res.status).toBe(400);
      expect(res.body.details[0].field).toBe('query.include_deleted');
    });

    it('shows an expired key that was not deleted', async () => {
      const key = await createKey(app.tenant, { name: 'brief', days_to_expire: 1 });
      clock.advance(2 * DAY);
      const res = await app.tenant.http.get(`/org/api_keys/${key.id}`);
      expect(res.status).toBe(200);
      expect(res.body.deleted_at).toBeNull();
    });
  });

  describe('rename', () => {
    it('renames a key and returns it, trimmed', async () => {
      const key = await createKey(app.tenant, { name: 'old name' });
      const res = await app.tenant.http.patch(`/org/api_keys/${key.id}`, { name: ' new name ' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...withoutPlaintext(key), name: 'new name' });
      expect((await app.tenant.http.get(`/org/api_keys/${key.id}`)).body.name).toBe('new name');
      expect((await app.client(key.key).get('/org/api_keys')).status).toBe(200);
    });

    it.each([
      ['no body', undefined, 'body.name'],
      ['an empty object', {}, 'body.name'],
      ['an empty name', { name: '' }, 'body.name'],
      ['a control character', { name: 'tab\there' }, 'body.name'],
      ['an unknown field', { name: 'ok', days_to_expire: 3 }, 'body'],
    ])('refuses %s with 400 and leaves the key as it was', async (_case, body, field) => {
      const key = await createKey(app.tenant, { name: 'steady' });
      const res = await app.tenant.http.patch(`/org/api_keys/${key.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(errorFields(res)).toContain(field);
      expect((await app.tenant.http.get(`/org/api_keys/${key.id}`)).body.name).toBe('steady');
    });

    it('answers 404 for a deleted or unknown key', async () => {
      const key = await createKey(app.tenant, { name: 'deleted' });
      await app.tenant.http.delete(`/org/api_keys/${key.id}`);
      expect((await app.tenant.http.patch(`/org/api_keys/${key.id}`, { name: 'revived' })).status).toBe(404);
      const after = await app.tenant.http.get(`/org/api_keys/${key.id}?include_deleted=true`);
      expect(after.body.name).toBe('deleted');
      expect((await app.tenant.http.patch('/org/api_keys/key_unknown', { name: 'x' })).status).toBe(404);
    });
  });

  describe('delete', () => {
    it('answers 204 with no body, and a second delete is a 404', async () => {
      const key = await createKey(app.tenant, { name: 'twice' });
      const first = await app.tenant.http.delete(`/org/api_keys/${key.id}`);
      expect(first.status).toBe(204);
      expect(first.text).toBe('');
      const second = await app.tenant.http.delete(`/org/api_keys/${key.id}`);
      expect(second.status).toBe(404);
      expect(second.body.code).toBe('not_found');
      const shown = await app.tenant.http.get(`/org/api_keys/${key.id}?include_deleted=true`);
      expect(shown.body.deleted_at).toBe(clock.now().toISOString());
    });

    it('refuses a key deleting itself with a 409 the SDK will not retry, and the key keeps working', async () => {
      const key = await createKey(app.tenant, { name: 'self' });
      const own = app.client(key.key);
      const res = await own.delete(`/org/api_keys/${key.id}`);
      expect(res.status).toBe(409);
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(res.body).toMatchObject({ code: 'cannot_delete_own_key', message: expect.any(String), details: [] });
      const still = await own.get(`/org/api_keys/${key.id}`);
      expect(still.status).toBe(200);
      expect(still.body.deleted_at).toBeNull();
    });

    it('lets a key delete another key but leaves other keys alone', async () => {
      const tenant = await app.newTenant();
      const a = await createKey(tenant, { name: 'a' });
      const b = await createKey(tenant, { name: 'b' });
      expect((await app.client(a.key).delete(`/org/api_keys/${b.id}`)).status).toBe(204);
      const active = await tenant.http.get<ApiKey[]>('/org/api_keys');
      expect(idsOf(active.body)).toEqual([a.id, tenant.adminKeyId].sort());
    });
  });
});
