import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

describe('authentication', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  it.each([
    ['no header', {}],
    ['a non-bearer scheme', { authorization: 'Basic Zm9vOmJhcg==' }],
    ['an empty bearer', { authorization: 'Bearer ' }],
    ['an unknown key', { authorization: 'Bearer bp_not-a-real-key-at-all-000000000000' }],
  ])('refuses %s with 401 and the error body', async (_name, headers) => {
    const res = await app.client(undefined, headers).get('/org/projects');
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(res.body).toMatchObject({ code: 'unauthorized', message: expect.any(String), details: [] });
  });

  it('leaves /healthz, /readyz, /metrics and /openapi.json open', async () => {
    const anonymous = app.client();
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      expect((await anonymous.get(path)).status, path).toBe(200);
    }
  });

  it('refuses a deleted key', async () => {
    const created = await app.tenant.http.post('/org/api_keys', { name: 'to delete' });
    expect(created.status).toBe(200);
    const other = app.client(created.body.key);
    expect((await other.get('/org/projects')).status).toBe(200);
    expect((await app.tenant.http.delete(`/org/api_keys/${created.body.id}`)).status).toBe(204);
    const res = await other.get('/org/projects');
    expect(res.status).toBe(401);
  });

  it('refuses a key once its expiry passes', async () => {
    const created = await app.tenant.http.post('/org/api_keys', { name: 'short', days_to_expire: 1 });
    const short = app.client(created.body.key);
    expect((await short.get('/org/limits')).status).toBe(200);
    clock.advance(86_400_000 + 1);
    const res = await short.get('/org/limits');
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/expired/);
  });

  it('accepts the Bearer scheme in any case', async () => {
    const res = await app.client(undefined, { authorization: `bearer ${app.tenant.adminKey}` }).get('/org/api_keys');
    expect(res.status).toBe(200);
  });

  it.each([
    ['with text appended', (key: string) => `Bearer ${key}x`],
    ['truncated', (key: string) => `Bearer ${key.slice(0, -1)}`],
    ['without the scheme', (key: string) => key],
    ['as two tokens', (key: string) => `Bearer ${key} ${key}`],
  ])('refuses a valid key %s', async (_case, header) => {
    const res = await app.client(undefined, { authorization: header(app.tenant.adminKey) }).get('/org/api_keys');
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthorized');
  });

  const apiKeyCalls = (id: string) =>
    [
      ['GET', '/org/api_keys', undefined],
      ['POST', '/org/api_keys', { name: 'new' }],
      ['GET', `/org/api_keys/${id}`, undefined],
      ['PATCH', `/org/api_keys/${id}`, { name: 'renamed' }],
      ['DELETE', `/org/api_keys/${id}`, undefined],
      ['POST', `/org/api_keys/${id}/rotate`, {}],
    ] as const;

  it('requires a key on every API key route, before looking at the request', async () => {
    const created = await app.tenant.http.post('/org/api_keys', { name: 'guarded' });
    const anonymous = app.client();
    for (const [method, path, body] of apiKeyCalls(created.body.id)) {
      const res = await anonymous.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body.code).toBe('unauthorized');
    }
    const invalid = await anonymous.post('/org/api_keys', { name: '', bogus: true });
    expect(invalid.status).toBe(401);
    const shown = await app.tenant.http.get(`/org/api_keys/${created.body.id}`);
    expect(shown.body).toMatchObject({ name: 'guarded', deleted_at: null, expires_at: null });
  });

  describe('project resolution', () => {
    it('a project-scoped key is refused on every API key route with 403 and changes nothing', async () => {
      const project = await app.tenant.http.post('/org/projects', { name: 'scoped-b' });
      const key = await app.tenant.http.post('/org/api_keys', { name: 'scoped', project_id: project.body.id });
      const scoped = app.client(key.body.key);
      const before = (await app.tenant.http.get('/org/api_keys?status=all&limit=100')).body;
      for (const [method, path, body] of apiKeyCalls(key.body.id)) {
        const res = await scoped.request(method, path, body);
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(res.body).toMatchObject({ code: 'org_key_required', message: expect.any(String), details: [] });
      }
      expect((await app.tenant.http.get('/org/api_keys?status=all&limit=100')).body).toEqual(before);
    });

    it('a project-scoped key is refused on org routes with 403', async () => {
      const project = await app.tenant.http.post('/org/projects', { name: 'scoped-a' });
      const key = await app.tenant.http.post('/org/api_keys', { name: 'scoped', project_id: project.body.id });
      expect(key.body.project_id).toBe(project.body.id);
      expect(key.body.project_name).toBe('scoped-a');
      const res = await app.client(key.body.key).get('/org/projects');
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('org_key_required');
    });
  });
});
