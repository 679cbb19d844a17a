import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type Tenant, type TestApp } from '../support/test-app.js';

interface Profile {
  id: string;
  name: string | null;
  created_at: string;
  updated_at: string;
  last_used_at?: string;
}

describe('profiles', () => {
  let app: TestApp;
  let http: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));
  let seq = 0;
  const uniqueName = (prefix = 'p') => `${prefix}-${++seq}`;

  beforeAll(async () => {
    app = await startTestApp({ clock });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const create = async (client: HttpClient, name?: string | null): Promise<Profile> => {
    const res = await client.post('/profiles', name === undefined ? {} : { name });
    expect(res.status, res.text).toBe(200);
    return res.body as Profile;
  };
  const allNames = async (client: HttpClient = http) =>
    ((await client.get('/profiles?limit=100')).body as Profile[]).map((p) => p.name);
  const newProject = async () => {
    const res = await http.post('/org/projects', { name: uniqueName('project') });
    expect(res.status).toBe(200);
    return res.body as { id: string; name: string };
  };

  describe('create', () => {
    it('returns the profile shape with name null and no last_used_at, stamped with the clock', async () => {
      const res = await http.post('/profiles', {});
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'name', 'updated_at']);
      expect(res.body).toMatchObject({
        id: expect.stringMatching(/^prof_[a-z2-7]+$/),
        name: null,
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
      });
    });

    it('accepts what the SDK sends for profiles.create(): an empty body with a JSON content type, no body, or null', async () => {
      const empty = await http.request('POST', '/profiles', '', { 'content-type': 'application/json' });
      expect(empty.status, empty.text).toBe(200);
      expect((await http.request('POST', '/profiles')).status).toBe(200);
      expect((await http.post('/profiles', null)).status).toBe(200);
    });

    it('stores a name, and accepts an explicit null and 255 characters of every allowed kind', async () => {
      const name = uniqueName('Named_Profile.v1');
      expect((await create(http, name)).name).toBe(name);
      expect((await create(http, null)).name).toBeNull();
      const long = `A.b_C-9${'x'.repeat(248)}`;
      expect((await create(http, long)).name).toBe(long);
    });

    it.each([
      ['an empty name', { name: '' }],
      ['256 characters', { name: 'x'.repeat(256) }],
      ['a space', { name: 'two words' }],
      ['a slash', { name: 'a/b' }],
      ['an accented letter', { name: 'équipe' }],
      ['a control character', { name: 'a\nb' }],
      ['"."', { name: '.' }],
      ['".."', { name: '..' }],
      ['a number', { name: 42 }],
    ])('refuses %s with 400 naming body.name and creates nothing', async (_case, body) => {
      const before = await allNames();
      const res = await http.post('/profiles', body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(errorFields(res)).toEqual(['body.name']);
      expect(await allNames()).toEqual(before);
    });

    it('refuses unknown fields and non-JSON bodies', async () => {
      const unknown = await http.post('/profiles', { name: uniqueName(), save_changes: true });
      expect(unknown.status).toBe(400);
      expect(errorFields(unknown)).toContain('body');
      const text = await http.request('POST', '/profiles', 'name=x', { 'content-type': 'text/plain' });
      expect(text.status).toBe(415);
    });

    it('refuses a name taken in the project, case- and accent-insensitively, with 409 and x-should-retry false', async () => {
      const name = uniqueName('Taken');
      await create(http, name);
      for (const variant of [name, name.toUpperCase(), name.toLowerCase()]) {
        const res = await http.post('/profiles', { name: variant });
        expect(res.status).toBe(409);
        expect(res.body.code).toBe('profile_name_taken');
        expect(res.headers.get('x-should-retry')).toBe('false');
      }
      expect((await allNames()).filter((n) => n?.toLowerCase() === name.toLowerCase())).toHaveLength(1);
    });

    it('lets many profiles have no name, and one of two concurrent creates of a name win', async () => {
      await create(http);
      await create(http);
      const name = uniqueName('race');
      const results = await Promise.all([1, 2, 3].map(() => http.post('/profiles', { name })));
      expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    });

    it('frees the name of a deleted profile', async () => {
      const name = uniqueName('reused');
      const first = await create(http, name);
      expect((await http.delete(`/profiles/${first.id}`)).status).toBe(204);
      const second = await create(http, name);
      expect(second.id).not.toBe(first.id);
    });
  });

  describe('retrieve', () => {
    it('finds a profile by id and by name, case-insensitively', async () => {
      const name = uniqueName('Lookup');
      const created = await create(http, name);
      for (const key of [created.id, name, name.toUpperCase()]) {
        const res = await http.get(`/profiles/${encodeURIComponent(key)}`);
        expect(res.status).toBe(200);
        expect(res.body).toEqual(created);
      }
    });

    it('resolves by id before name', async () => {
      const target = await create(http);
      const impostor = await create(http, target.id);
      expect((await http.get(`/profiles/${target.id}`)).body.id).toBe(target.id);
      expect(impostor.name).toBe(target.id);
    });

    it('answers 404 not_found for an unknown id or name, and 400 for a control character', async () => {
      const res = await http.get('/profiles/prof_missing');
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
      expect((await http.get('/profiles/a%01b')).status).toBe(400);
    });
  });

  describe('update', () => {
    it('renames, bumps updated_at, and the old name stops resolving', async () => {
      const oldName = uniqueName('old');
      const created = await create(http, oldName);
      clock.advance(60_000);
      const newName = uniqueName('new');
      const res = await http.patch(`/profiles/${oldName}`, { name: newName });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...created, name: newName, updated_at: clock.now().toISOString() });
      expect((await http.get(`/profiles/${newName}`)).body.id).toBe(created.id);
      expect((await http.get(`/profiles/${oldName}`)).status).toBe(404);
    });

    it('allows changing only the case of its own name', async () => {
      const name = uniqueName('case');
      const created = await create(http, name);
      const res = await http.patch(`/profiles/${created.id}`, { name: name.toUpperCase() });
      expect(res.status).toBe(200);
      expect(res.body.name).toBe(name.toUpperCase());
    });

    it('refuses a name another profile has with 409 and leaves both unchanged', async () => {
      const a = await create(http, uniqueName('a'));
      const b = await create(http, uniqueName('b'));
      const res = await http.patch(`/profiles/${b.id}`, { name: a.name!.toUpperCase() });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('profile_name_taken');
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect((await http.get(`/profiles/${b.id}`)).body).toEqual(b);
    });

    it.each([
      ['no name', {}],
      ['a null name', { name: null }],
      ['an invalid name', { name: 'bad name' }],
      ['an unknown field', { name: 'ok', extra: 1 }],
    ])('refuses %s with 400 and changes nothing', async (_case, body) => {
      const created = await create(http, uniqueName('keep'));
      const res = await http.patch(`/profiles/${created.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect((await http.get(`/profiles/${created.id}`)).body).toEqual(created);
    });

    it('answers 404 for an unknown profile', async () => {
      expect((await http.patch('/profiles/prof_missing', { name: 'x' })).status).toBe(404);
    });
  });

  describe('list', () => {
    let project: { id: string };
    let scoped: HttpClient;
    let made: Profile[];

    beforeAll(async () => {
      project = await newProject();
      scoped = http.withHeaders({ 'X-Kernel-Project-Id': project.id });
      made = [];
      for (const name of ['Alpha-One', 'alpha-two', 'Beta', null]) {
        made.push(await create(scoped, name));
        clock.advance(1000);
      }
    });

    it('lists newest first with the offset pager headers', async () => {
      const res = await scoped.get('/profiles');
      expect(res.status).toBe(200);
      expect(res.body).toEqual([...made].reverse());
      expect(res.headers.get('x-has-more')).toBe('false');
      expect(res.headers.get('x-next-offset')).toBe('0');
    });

    it('pages with limit and offset', async () => {
      const first = await scoped.get('/profiles?limit=3');
      expect((first.body as Profile[]).map((p) => p.id)).toEqual(made.slice(1).reverse().map((p) => p.id));
      expect(first.headers.get('x-has-more')).toBe('true');
      expect(first.headers.get('x-next-offset')).toBe('3');
      const second = await scoped.get('/profiles?limit=3&offset=3');
      expect((second.body as Profile[]).map((p) => p.id)).toEqual([made[0]!.id]);
      expect(second.headers.get('x-has-more')).toBe('false');
    });

    it('filters by exact name, case-insensitively', async () => {
      expect((await scoped.get('/profiles?name=ALPHA-ONE')).body).toEqual([made[0]]);
      expect((await scoped.get('/profiles?name=alpha')).body).toEqual([]);
    });

    it('filters by a substring of the name or the id, case-insensitively', async () => {
      const byName = (await scoped.get('/profiles?query=LPHA')).body as Profile[];
      expect(byName.map((p) => p.name)).toEqual(['alpha-two', 'Alpha-One']);
      const unnamed = made[3]!;
      const byId = (await scoped.get(`/profiles?query=${unnamed.id.slice(3, 12).toUpperCase()}`)).body as Profile[];
      expect(byId.map((p) => p.id)).toEqual([unnamed.id]);
      expect((await scoped.get('/profiles?query=%25')).body).toEqual([]);
    });

    it.each(['limit=0', 'limit=101', 'offset=-1', 'limit=x'])('refuses %s with 400', async (query) => {
      const res = await scoped.get(`/profiles?${query}`);
      expect(res.status).toBe(400);
      expect(errorFields(res)[0]).toMatch(/^query\./);
    });
  });

  describe('delete', () => {
    it('removes the profile from every route and the list, and removes its stored files', async () => {
      const created = await create(http, uniqueName('doomed'));
      const ref = { orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId, profileId: created.id };
      const dir = await mkdtemp(path.join(os.tmpdir(), 'profiles-delete-'));
      await app.deps.profileStore.saveFrom(ref, dir);
      await rm(dir, { recursive: true });
      expect(await app.deps.profileStore.exportTar(ref)).toBeDefined();

      const res = await http.delete(`/profiles/${created.name}`);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect(await app.deps.profileStore.exportTar(ref)).toBeUndefined();
      expect((await http.get(`/profiles/${created.id}`)).status).toBe(404);
      expect((await http.patch(`/profiles/${created.id}`, { name: 'x' })).status).toBe(404);
      expect((await http.get(`/profiles/${created.id}/download`)).status).toBe(404);
      expect((await http.delete(`/profiles/${created.id}`)).status).toBe(404);
      expect(await allNames()).not.toContain(created.name);
    });
  });

  describe('projects', () => {
    it('a project with live profiles cannot be deleted; once they are deleted it can', async () => {
      const project = await newProject();
      const scoped = http.withHeaders({ 'X-Kernel-Project-Id': project.name });
      const profile = await create(scoped, 'blocks');
      const refused = await http.delete(`/org/projects/${project.id}`);
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('project_not_empty');
      expect(refused.body.details).toEqual([expect.objectContaining({ field: 'profiles' })]);
      expect((await scoped.delete(`/profiles/${profile.id}`)).status).toBe(204);
      expect((await http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    });
  });

  describe('isolation', () => {
    let other: Tenant;
    let mine: Profile;

    beforeAll(async () => {
      other = await app.newTenant('other');
      mine = await create(http, uniqueName('mine'));
    });

    const everyRoute = async (client: HttpClient, key: string) => [
      (await client.get(`/profiles/${key}`)).status,
      (await client.patch(`/profiles/${key}`, { name: uniqueName('steal') })).status,
      (await client.get(`/profiles/${key}/download`)).status,
      (await client.get(`/profiles/${key}/download?format=tar`)).status,
      (await client.delete(`/profiles/${key}`)).status,
    ];

    it('another org gets 404 on every route, by id and by name, and never sees it listed', async () => {
      expect(await everyRoute(other.http, mine.id)).toEqual([404, 404, 404, 404, 404]);
      expect(await everyRoute(other.http, mine.name!)).toEqual([404, 404, 404, 404, 404]);
      expect(await allNames(other.http)).not.toContain(mine.name);
      expect((await other.http.get(`/profiles?query=${mine.id}`)).body).toEqual([]);
      expect((await http.get(`/profiles/${mine.id}`)).body).toEqual(mine);
    });

    it('another project of the same org gets 404 on every route and never sees it listed', async () => {
      const project = await newProject();
      const scoped = http.withHeaders({ 'X-Kernel-Project-Id': project.id });
      expect(await everyRoute(scoped, mine.id)).toEqual([404, 404, 404, 404, 404]);
      expect(await allNames(scoped)).not.toContain(mine.name);

      const key = await http.post('/org/api_keys', { name: 'scoped', project_id: project.id });
      const keyed = app.client(key.body.key as string);
      expect(await everyRoute(keyed, mine.name!)).toEqual([404, 404, 404, 404, 404]);
      expect((await http.get(`/profiles/${mine.id}`)).body).toEqual(mine);
    });

    it('names are unique per project: another project or org may use the same name', async () => {
      const project = await newProject();
      const scoped = http.withHeaders({ 'X-Kernel-Project-Id': project.id });
      expect((await create(scoped, mine.name)).name).toBe(mine.name);
      expect((await create(other.http, mine.name)).name).toBe(mine.name);
    });
  });
});
