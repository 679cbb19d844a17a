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

  describe('project resolution', () => {
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
