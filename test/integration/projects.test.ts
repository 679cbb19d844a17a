import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const fields = errorFields;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('projects', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const create = async (http: HttpClient, name: string) => {
    const res = await http.post('/org/projects', { name });
    expect(res.status, res.text).toBe(200);
    return res.body as { id: string; name: string; status: string; created_at: string; updated_at: string };
  };

  describe('create', () => {
    it('returns the project with every field, active, stamped with the clock', async () => {
      const res = await app.tenant.http.post('/org/projects', { name: 'Create Shape' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'name', 'status', 'updated_at']);
      expect(res.body).toMatchObject({ id: expect.stringMatching(/^proj_/), name: 'Create Shape', status: 'active' });
      expect(res.body.created_at).toMatch(ISO);
      expect(res.body.created_at).toBe(clock.now().toISOString());
      expect(res.body.updated_at).toBe(res.body.created_at);
    });

    it('trims the name and accepts 255 code points, emoji included', async () => {
      expect((await create(app.tenant.http, '  padded name \t')).name).toBe('padded name');
      const emoji = '😀'.repeat(255);
      const created = await create(app.tenant.http, emoji);
      expect(created.name).toBe(emoji);
      const fetched = await app.tenant.http.get(`/org/projects/${encodeURIComponent(emoji)}`);
      expect(fetched.status).toBe(200);
      expect(fetched.body.id).toBe(created.id);
    });

    it.each([
      ['an empty name', { name: '' }],
      ['a blank name', { name: '   ' }],
      ['256 code points', { name: 'x'.repeat(256) }],
      ['a control character', { name: 'line\nbreak' }],
      ['a non-string name', { name: 42 }],
      ['no name', {}],
    ])('refuses %s with 400 naming body.name', async (_case, body) => {
      const res = await app.tenant.http.post('/org/projects', body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(fields(res)).toContain('body.name');
    });

    it('refuses an unknown field since the body is strict, and creates nothing', async () => {
      const res = await app.tenant.http.post('/org/projects', { name: 'strict-body', status: 'archived' });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect((await app.tenant.http.get('/org/projects/strict-body')).status).toBe(404);
    });

    it('refuses a duplicate name case- and accent-insensitively with a 409 that must not be retried', async () => {
      await create(app.tenant.http, 'Équipe Rouge');
      for (const name of ['Équipe Rouge', 'equipe rouge', 'EQUIPE ROUGE', ' équipe rouge ']) {
        const res = await app.tenant.http.post('/org/projects', { name });
        expect(res.status, name).toBe(409);
        expect(res.body.code).toBe('project_name_taken');
        expect(res.headers.get('x-should-retry')).toBe('false');
      }
      const listed = await app.tenant.http.get('/org/projects?name=equipe%20rouge');
      expect(listed.body).toHaveLength(1);
    });

    it('allows the same name in another org', async () => {
      const other = await app.newTenant('create-other');
      const mine = await create(app.tenant.http, 'Shared Name');
      const theirs = await create(other.http, 'shared name');
      expect(theirs.id).not.toBe(mine.id);
    });
  });

  describe('retrieve', () => {
    it('finds a project by id and by name, case- and accent-insensitively', async () => {
      const project = await create(app.tenant.http, 'Café Ops');
      for (const ref of [project.id, 'Café Ops', 'cafe ops', 'CAFÉ OPS']) {
        const res = await app.tenant.http.get(`/org/projects/${encodeURIComponent(ref)}`);
        expect(res.status, ref).toBe(200);
        expect(res.body).toEqual(project);
      }
    });

    it('decodes a name holding a slash', async () => {
      const project = await create(app.tenant.http, 'team/alpha');
      const res = await app.tenant.http.get('/org/projects/team%2Falpha');
      expect(res.status).toBe(200);
      expect(res.body.id).toBe(project.id);
    });

    it('answers 404 not_found for an unknown id or name', async () => {
      for (const ref of ['proj_doesnotexist', 'no such project']) {
        const res = await app.tenant.http.get(`/org/projects/${encodeURIComponent(ref)}`);
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ code: 'not_found', details: [] });
      }
    });

    it('refuses a control character in the id or name with 400, on every project route', async () => {
      const path = '/org/projects/a%00b';
      const calls = [
        app.tenant.http.get(path),
        app.tenant.http.patch(path, { name: 'x' }),
        app.tenant.http.delete(path),
        app.tenant.http.get(`${path}/limits`),
        app.tenant.http.patch(`${path}/limits`, { max_concurrent_sessions: 1 }),
        app.tenant.http.get('/org/projects/tab%09name'),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(400);
        expect(fields(res)).toContain('params.id');
      }
    });
  });

  describe('update', () => {
    it('renames a project and archives it, moving updated_at only', async () => {
      const project = await create(app.tenant.http, 'before-rename');
      clock.advance(60_000);
      const renamed = await app.tenant.http.patch(`/org/projects/${project.id}`, { name: '  after-rename ' });
      expect(renamed.status).toBe(200);
      expect(renamed.body).toMatchObject({ id: project.id, name: 'after-rename', status: 'active' });
      expect(renamed.body.created_at).toBe(project.created_at);
      expect(renamed.body.updated_at).toBe(clock.now().toISOString());

      const archived = await app.tenant.http.patch('/org/projects/after-rename', { status: 'archived' });
      expect(archived.status).toBe(200);
      expect(archived.body).toMatchObject({ name: 'after-rename', status: 'archived' });
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body.status).toBe('archived');
      expect((await app.tenant.http.get('/org/projects/before-rename')).status).toBe(404);

      const active = await app.tenant.http.patch(`/org/projects/${project.id}`, { status: 'active' });
      expect(active.body.status).toBe('active');
    });

    it('allows changing only the case of its own name', async () => {
      const project = await create(app.tenant.http, 'case-change');
      const res = await app.tenant.http.patch(`/org/projects/${project.id}`, { name: 'Case-Change' });
      expect(res.status).toBe(200);
      expect(res.body.name).toBe('Case-Change');
    });

    it('refuses a rename onto another project’s name with 409 and changes nothing', async () => {
      await create(app.tenant.http, 'Rename Target');
      const project = await create(app.tenant.http, 'rename-source');
      const res = await app.tenant.http.patch(`/org/projects/${project.id}`, { name: 'rename target' });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('project_name_taken');
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body.name).toBe('rename-source');
    });

    it.each([
      ['an unknown status', { status: 'deleted' }, 'body.status'],
      ['an empty name', { name: '' }, 'body.name'],
      ['an unknown field', { name: 'x', colour: 'red' }, 'body'],
    ])('refuses %s with 400 and changes nothing', async (_case, body, field) => {
      const project = await create(app.tenant.http, `bad-patch-${field}-${Object.keys(body).join()}`);
      const res = await app.tenant.http.patch(`/org/projects/${project.id}`, body);
      expect(res.status).toBe(400);
      expect(fields(res)).toContain(field);
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body).toEqual(project);
    });

    it('answers 404 for an unknown project', async () => {
      const res = await app.tenant.http.patch('/org/projects/proj_unknown', { name: 'x' });
      expect(res.status).toBe(404);
    });
  });

  describe('delete', () => {
    it('soft-deletes: 204, then 404, gone from lists, and the name is free again', async () => {
      const project = await create(app.tenant.http, 'Doomed');
      const res = await app.tenant.http.delete(`/org/projects/${project.id}`);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).status).toBe(404);
      expect((await app.tenant.http.get('/org/projects/doomed')).status).toBe(404);
      expect((await app.tenant.http.patch(`/org/projects/${project.id}`, { name: 'x' })).status).toBe(404);
      expect((await app.tenant.http.get(`/org/projects/${project.id}/limits`)).status).toBe(404);
      const listed = await app.tenant.http.get(`/org/projects?query=${project.id}`);
      expect(listed.body).toEqual([]);

      const again = await create(app.tenant.http, 'doomed');
      expect(again.id).not.toBe(project.id);
      expect((await app.tenant.http.delete(`/org/projects/${project.id}`)).status).toBe(404);
    });

    it('deletes by name', async () => {
      const project = await create(app.tenant.http, 'Délété By Name');
      expect((await app.tenant.http.delete('/org/projects/delete%20by%20name')).status).toBe(204);
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).status).toBe(404);
    });

    it('refuses to delete the default project with 409 default_project', async () => {
      const res = await app.tenant.http.delete(`/org/projects/${app.tenant.defaultProjectId}`);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('default_project');
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect((await app.tenant.http.get(`/org/projects/${app.tenant.defaultProjectId}`)).status).toBe(200);
    });

    it('refuses a project with a live project key, naming api_keys, until the key is deleted', async () => {
      const project = await create(app.tenant.http, 'has-a-key');
      const key = await app.tenant.http.post('/org/api_keys', { name: 'k', project_id: project.id });
      expect(key.status).toBe(200);

      const refused = await app.tenant.http.delete(`/org/projects/${project.id}`);
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('project_not_empty');
      expect(refused.headers.get('x-should-retry')).toBe('false');
      expect(refused.body.details).toEqual([expect.objectContaining({ field: 'api_keys', code: expect.any(String) })]);
      expect(refused.body.details[0].message).toMatch(/api_keys/);
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).status).toBe(200);

      expect((await app.tenant.http.delete(`/org/api_keys/${key.body.id}`)).status).toBe(204);
      expect((await app.tenant.http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    });
  });

  describe('concurrency', () => {
    it('creates exactly one of several simultaneous same-name projects', async () => {
      const results = await Promise.all(
        ['Race', 'race', 'RACE', 'Rāce', 'race '].map((name) => app.tenant.http.post('/org/projects', { name })),
      );
      expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409]);
      expect((await app.tenant.http.get('/org/projects?name=race')).body).toHaveLength(1);
    });

    it('deletes a project once when several deletes race: one 204, the rest 404', async () => {
      const project = await create(app.tenant.http, 'delete-race');
      const results = await Promise.all(
        Array.from({ length: 4 }, () => app.tenant.http.delete(`/org/projects/${project.id}`)),
      );
      expect(results.map((r) => r.status).sort()).toEqual([204, 404, 404, 404]);
    });
  });

  it('refuses a project-scoped key on every project route with 403', async () => {
    const project = await create(app.tenant.http, 'scoped-403');
    const key = await app.tenant.http.post('/org/api_keys', { name: 'scoped', project_id: project.id });
    const scoped = app.client(key.body.key);
    const calls = [
      scoped.get('/org/projects'),
      scoped.post('/org/projects', { name: 'by-scoped-key' }),
      scoped.get(`/org/projects/${project.id}`),
      scoped.patch(`/org/projects/${project.id}`, { name: 'renamed-by-scoped' }),
      scoped.delete(`/org/projects/${project.id}`),
      scoped.get(`/org/projects/${project.id}/limits`),
      scoped.patch(`/org/projects/${project.id}/limits`, { max_concurrent_sessions: 1 }),
      scoped.get('/org/limits'),
      scoped.patch('/org/limits', { default_project_max_concurrent_sessions: 1 }),
    ];
    for (const res of await Promise.all(calls)) {
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('org_key_required');
    }
    expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body.name).toBe('scoped-403');
    expect((await app.tenant.http.get('/org/projects/by-scoped-key')).status).toBe(404);
  });
});
