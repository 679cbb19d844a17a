import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const SUNSET = new Date('2026-11-24T00:00:00Z');
const BEFORE_SUNSET = new Date('2026-06-01T00:00:00Z');

/** The deprecated /projects routes, each with its /org successor. */
const LEGACY = [
  { method: 'GET', legacy: '/projects/{id}', successor: '/org/projects/{id}', body: undefined },
  { method: 'PATCH', legacy: '/projects/{id}', successor: '/org/projects/{id}', body: { name: 'renamed-by-legacy' } },
  { method: 'DELETE', legacy: '/projects/{id}', successor: '/org/projects/{id}', body: undefined },
  {
    method: 'PATCH',
    legacy: '/projects/{id}/limits',
    successor: '/org/projects/{id}/limits',
    body: { max_concurrent_sessions: 3 },
  },
] as const;

const fill = (template: string, id: string) => template.replace('{id}', encodeURIComponent(id));

function expectDeprecated(res: HttpResponse, successorPath: string): void {
  expect(res.headers.get('deprecation')).toMatch(/^@\d+$/);
  const deprecatedAt = Number(res.headers.get('deprecation')!.slice(1)) * 1000;
  expect(deprecatedAt).toBe(Date.parse('2026-08-26T00:00:00Z'));
  expect(res.headers.get('sunset')).toBe('Tue, 24 Nov 2026 00:00:00 GMT');
  expect(res.headers.get('link')).toBe(`<${successorPath}>; rel="successor-version"`);
}

describe('deprecated /projects routes', () => {
  let app: TestApp;
  const clock = new FixedClock(BEFORE_SUNSET);
  let seq = 0;

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const newProject = async (name = `legacy-${++seq}`) => {
    const res = await app.tenant.http.post('/org/projects', { name });
    expect(res.status).toBe(200);
    return res.body as { id: string; name: string; status: string; created_at: string; updated_at: string };
  };

  describe('before the sunset', () => {
    beforeEach(() => clock.set(BEFORE_SUNSET));

    it.each(LEGACY)('$method $legacy answers like its successor, with Deprecation, Sunset and Link', async (route) => {
      const project = await newProject();
      const res = await app.tenant.http.request(route.method, fill(route.legacy, project.id), route.body);
      expect(res.status).toBeLessThan(300);
      expectDeprecated(res, fill(route.successor, project.id));
    });

    it('GET /projects/{id} returns the same project as /org/projects/{id}, by id or name', async () => {
      const project = await newProject('Légacy Get');
      for (const ref of [project.id, 'legacy get']) {
        const res = await app.tenant.http.get(`/projects/${encodeURIComponent(ref)}`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(res.body).toEqual(project);
        expectDeprecated(res, `/org/projects/${encodeURIComponent(ref)}`);
      }
    });

    it('PATCH /projects/{id} renames and archives like its successor', async () => {
      const project = await newProject();
      clock.advance(1000);
      const res = await app.tenant.http.patch(`/projects/${project.id}`, { name: 'legacy-renamed', status: 'archived' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        ...project,
        name: 'legacy-renamed',
        status: 'archived',
        updated_at: clock.now().toISOString(),
      });
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body).toEqual(res.body);
    });

    it('PATCH /projects/{id} refuses what its successor refuses, with the same errors', async () => {
      await newProject('taken-by-other');
      const project = await newProject();
      for (const body of [{ name: 'TAKEN-by-other' }, { status: 'gone' }, { name: '' }, { nope: 1 }]) {
        const legacy = await app.tenant.http.patch(`/projects/${project.id}`, body);
        const current = await app.tenant.http.patch(`/org/projects/${project.id}`, body);
        expect(legacy.status, JSON.stringify(body)).toBe(current.status);
        expect(legacy.status).toBeGreaterThanOrEqual(400);
        expect(legacy.body).toEqual(current.body);
        expect(legacy.headers.get('x-should-retry')).toBe(current.headers.get('x-should-retry'));
        expectDeprecated(legacy, `/org/projects/${project.id}`);
      }
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).body).toEqual(project);
    });

    it('DELETE /projects/{id} soft-deletes, and refuses the default project and a project with keys', async () => {
      const project = await newProject();
      const res = await app.tenant.http.delete(`/projects/${project.id}`);
      expect(res.status).toBe(204);
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).status).toBe(404);

      const gone = await app.tenant.http.get(`/projects/${project.id}`);
      expect(gone.status).toBe(404);
      expect(gone.body.code).toBe('not_found');
      expectDeprecated(gone, `/org/projects/${project.id}`);

      const def = await app.tenant.http.delete(`/projects/${app.tenant.defaultProjectId}`);
      expect(def.status).toBe(409);
      expect(def.body.code).toBe('default_project');

      const busy = await newProject();
      const key = await app.tenant.http.post('/org/api_keys', { name: 'k', project_id: busy.id });
      const refused = await app.tenant.http.delete(`/projects/${busy.id}`);
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('project_not_empty');
      expect(refused.body.details[0].field).toBe('api_keys');
      expect((await app.tenant.http.delete(`/org/api_keys/${key.body.id}`)).status).toBe(204);
      expect((await app.tenant.http.delete(`/projects/${busy.id}`)).status).toBe(204);
    });

    it('PATCH /projects/{id}/limits changes only the present fields, like its successor', async () => {
      const project = await newProject();
      await app.tenant.http.patch(`/org/projects/${project.id}/limits`, {
        max_concurrent_sessions: 5,
        max_concurrent_invocations: 6,
      });
      const res = await app.tenant.http.patch(`/projects/${project.id}/limits`, {
        max_concurrent_sessions: 0,
        max_pooled_sessions: 2,
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ max_concurrent_sessions: null, max_concurrent_invocations: 6, max_pooled_sessions: 2 });
      expect((await app.tenant.http.get(`/org/projects/${project.id}/limits`)).body).toEqual(res.body);

      for (const body of [{ max_concurrent_sessions: 51 }, { max_concurrent_sessions: -1 }, { max_pooled_sessions: 'x' }]) {
        const legacy = await app.tenant.http.patch(`/projects/${project.id}/limits`, body);
        const current = await app.tenant.http.patch(`/org/projects/${project.id}/limits`, body);
        expect(legacy.status).toBe(400);
        expect(legacy.body).toEqual(current.body);
        expectDeprecated(legacy, `/org/projects/${project.id}/limits`);
      }
      expect((await app.tenant.http.get(`/org/projects/${project.id}/limits`)).body).toEqual(res.body);
    });

    it('still needs an org-wide key', async () => {
      const project = await newProject();
      const anonymous = await app.client().get(`/projects/${project.id}`);
      expect(anonymous.status).toBe(401);
      expectDeprecated(anonymous, `/org/projects/${project.id}`);
      const key = await app.tenant.http.post('/org/api_keys', { name: 'scoped', project_id: project.id });
      const scoped = await app.client(key.body.key).get(`/projects/${project.id}`);
      expect(scoped.status).toBe(403);
    });

    it('serves only the deprecated methods: GET /projects/{id}/limits and GET /projects are not routes', async () => {
      const project = await newProject();
      const limits = await app.tenant.http.get(`/projects/${project.id}/limits`);
      expect(limits.status).toBe(405);
      expect(limits.body.code).toBe('method_not_allowed');
      expect(limits.headers.get('allow')).toBe('PATCH');
      const list = await app.tenant.http.get('/projects');
      expect(list.status).toBe(404);
      expect(list.body.code).toBe('route_not_found');
    });

    it('answers the last millisecond before the sunset normally', async () => {
      const project = await newProject();
      clock.set(new Date(SUNSET.getTime() - 1));
      const res = await app.tenant.http.get(`/projects/${project.id}`);
      expect(res.status).toBe(200);
      expectDeprecated(res, `/org/projects/${project.id}`);
    });

    it('puts no deprecation headers on the /org routes', async () => {
      const project = await newProject();
      const res = await app.tenant.http.get(`/org/projects/${project.id}`);
      expect(res.headers.get('deprecation')).toBeNull();
      expect(res.headers.get('sunset')).toBeNull();
      expect(res.headers.get('link')).toBeNull();
    });
  });

  describe.each([
    ['exactly at the sunset', SUNSET],
    ['after the sunset', new Date(SUNSET.getTime() + 30 * 86_400_000)],
  ])('%s', (_when, at) => {
    beforeEach(() => clock.set(BEFORE_SUNSET));

    it.each(LEGACY)('$method $legacy answers 410 gone naming its successor, and changes nothing', async (route) => {
      const project = await newProject();
      clock.set(at);
      const res = await app.tenant.http.request(route.method, fill(route.legacy, project.id), route.body);
      expect(res.status).toBe(410);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(res.body.code).toBe('gone');
      expect(res.body.message).toContain(`${route.method} ${route.successor}`);
      expect((res.body as { details: Array<{ message: string }> }).details.map((d) => d.message)).toContain(
        `${route.method} ${fill(route.successor, project.id)}`,
      );
      expect(res.headers.get('link')).toBe(`<${fill(route.successor, project.id)}>; rel="successor-version"`);

      const after = await app.tenant.http.get(`/org/projects/${project.id}`);
      expect(after.status).toBe(200);
      expect(after.body).toEqual(project);
      const limits = await app.tenant.http.get(`/org/projects/${project.id}/limits`);
      expect(limits.body.max_concurrent_sessions).toBeNull();
    });

    it('leaves the /org successors working', async () => {
      const project = await newProject();
      clock.set(at);
      expect((await app.tenant.http.get(`/org/projects/${project.id}`)).status).toBe(200);
      expect((await app.tenant.http.patch(`/org/projects/${project.id}/limits`, { max_concurrent_sessions: 2 })).status).toBe(200);
      expect((await app.tenant.http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    });
  });
});

describe('tenant isolation on the deprecated /projects routes', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({ clock: new FixedClock(BEFORE_SUNSET) });
  });
  afterAll(async () => app?.close());

  it('answers 404 for another org’s project by id or name on every route, and changes nothing', async () => {
    const other = await app.newTenant('legacy-other');
    const theirs = (await other.http.post('/org/projects', { name: 'Hidden Project' })).body;
    for (const ref of [theirs.id, 'hidden project', other.defaultProjectId]) {
      for (const route of LEGACY) {
        const res = await app.tenant.http.request(route.method, fill(route.legacy, ref), route.body);
        expect(res.status, `${route.method} ${route.legacy} ${ref}`).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
    }
    expect((await other.http.get(`/org/projects/${theirs.id}`)).body).toEqual(theirs);
    expect((await other.http.get(`/org/projects/${theirs.id}/limits`)).body.max_concurrent_sessions).toBeNull();
  });
});
