import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const fields = errorFields;

const ORG_LIMIT = 50;
const NO_CAPS = { max_concurrent_sessions: null, max_concurrent_invocations: null, max_pooled_sessions: null };

describe('project limits', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({
      clock: new FixedClock(new Date('2026-06-01T00:00:00Z')),
      settings: { orgMaxConcurrentSessions: ORG_LIMIT },
    });
  });
  afterAll(async () => app?.close());

  let seq = 0;
  const newProject = async () => {
    const res = await app.tenant.http.post('/org/projects', { name: `limits-${++seq}` });
    expect(res.status).toBe(200);
    return res.body as { id: string; name: string };
  };
  const limitsOf = async (id: string): Promise<unknown> => {
    const res = await app.tenant.http.get<unknown>(`/org/projects/${id}/limits`);
    expect(res.status).toBe(200);
    return res.body;
  };
  const patch = (id: string, body: unknown) => app.tenant.http.patch(`/org/projects/${id}/limits`, body);

  it('starts with no caps, every field present and null', async () => {
    const project = await newProject();
    const res = await app.tenant.http.get(`/org/projects/${project.id}/limits`);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual(NO_CAPS);
  });

  it('sets every cap and reads them back', async () => {
    const project = await newProject();
    const body = { max_concurrent_sessions: ORG_LIMIT, max_concurrent_invocations: 100000, max_pooled_sessions: 1 };
    const res = await patch(project.id, body);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(body);
    expect(await limitsOf(project.id)).toEqual(body);
  });

  it('changes only the fields present; absent fields stay', async () => {
    const project = await newProject();
    await patch(project.id, { max_concurrent_sessions: 5, max_concurrent_invocations: 6, max_pooled_sessions: 7 });
    const res = await patch(project.id, { max_concurrent_invocations: 9 });
    expect(res.body).toEqual({ max_concurrent_sessions: 5, max_concurrent_invocations: 9, max_pooled_sessions: 7 });
    const empty = await patch(project.id, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ max_concurrent_sessions: 5, max_concurrent_invocations: 9, max_pooled_sessions: 7 });
    expect(await limitsOf(project.id)).toEqual(empty.body);
  });

  it('removes a cap with 0 or null, leaving the others', async () => {
    const project = await newProject();
    await patch(project.id, { max_concurrent_sessions: 5, max_concurrent_invocations: 6, max_pooled_sessions: 7 });
    const zero = await patch(project.id, { max_concurrent_sessions: 0 });
    expect(zero.status).toBe(200);
    expect(zero.body).toEqual({ max_concurrent_sessions: null, max_concurrent_invocations: 6, max_pooled_sessions: 7 });
    const nulls = await patch(project.id, { max_concurrent_invocations: null, max_pooled_sessions: 0 });
    expect(nulls.body).toEqual(NO_CAPS);
    expect(await limitsOf(project.id)).toEqual(NO_CAPS);
  });

  it('accepts 0 and null on a project that never had limits', async () => {
    const project = await newProject();
    const res = await patch(project.id, { max_concurrent_sessions: 0, max_concurrent_invocations: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(NO_CAPS);
  });

  it('addresses the project by name as well as by id', async () => {
    const project = await newProject();
    const res = await patch(project.name.toUpperCase(), { max_concurrent_invocations: 3 });
    expect(res.status).toBe(200);
    expect((await app.tenant.http.get(`/org/projects/${project.name}/limits`)).body.max_concurrent_invocations).toBe(3);
  });

  it('refuses max_concurrent_sessions above the org limit with exceeds_org_limit and changes nothing', async () => {
    const project = await newProject();
    await patch(project.id, { max_concurrent_sessions: 10, max_concurrent_invocations: 2 });
    const res = await patch(project.id, { max_concurrent_sessions: ORG_LIMIT + 1, max_concurrent_invocations: 3 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('exceeds_org_limit');
    expect(res.body.message).toContain(String(ORG_LIMIT));
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'body.max_concurrent_sessions' })]);
    expect(await limitsOf(project.id)).toEqual({
      max_concurrent_sessions: 10,
      max_concurrent_invocations: 2,
      max_pooled_sessions: null,
    });
  });

  it('is not bound by the org limit for the other caps', async () => {
    const project = await newProject();
    const res = await patch(project.id, { max_concurrent_invocations: ORG_LIMIT + 1, max_pooled_sessions: ORG_LIMIT + 1 });
    expect(res.status).toBe(200);
  });

  it.each([
    ['a negative number', { max_concurrent_sessions: -1 }, 'body.max_concurrent_sessions'],
    ['a fraction', { max_concurrent_invocations: 1.5 }, 'body.max_concurrent_invocations'],
    ['a numeric string', { max_pooled_sessions: '5' }, 'body.max_pooled_sessions'],
    ['a boolean', { max_concurrent_invocations: true }, 'body.max_concurrent_invocations'],
    ['more than 100000', { max_concurrent_invocations: 100001 }, 'body.max_concurrent_invocations'],
    ['an unknown field', { max_browsers: 3 }, 'body'],
  ])('refuses %s with 400 naming the field and changes nothing', async (_case, body, field) => {
    const project = await newProject();
    const before = { max_concurrent_sessions: 4, max_concurrent_invocations: 4, max_pooled_sessions: 4 };
    await patch(project.id, before);
    const res = await patch(project.id, { max_concurrent_sessions: 8, ...body });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(fields(res)).toEqual([field]);
    expect(await limitsOf(project.id)).toEqual(before);
  });

  it('lists every invalid field at once', async () => {
    const project = await newProject();
    const res = await patch(project.id, { max_concurrent_sessions: -1, max_concurrent_invocations: 'x', max_pooled_sessions: 0.5 });
    expect(res.status).toBe(400);
    expect(fields(res).sort()).toEqual([
      'body.max_concurrent_invocations',
      'body.max_concurrent_sessions',
      'body.max_pooled_sessions',
    ]);
    for (const detail of res.body.details) {
      expect(detail).toEqual({ code: expect.any(String), field: expect.any(String), message: expect.any(String) });
    }
  });

  it('answers 404 for an unknown or deleted project', async () => {
    const project = await newProject();
    expect((await app.tenant.http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    for (const id of [project.id, 'proj_unknown']) {
      expect((await app.tenant.http.get(`/org/projects/${id}/limits`)).status).toBe(404);
      expect((await patch(id, { max_concurrent_sessions: 1 })).status).toBe(404);
    }
  });

  it('keeps each project’s limits to itself', async () => {
    const a = await newProject();
    const b = await newProject();
    await patch(a.id, { max_concurrent_sessions: 3 });
    expect(await limitsOf(b.id)).toEqual(NO_CAPS);
  });
});

describe('org limits', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({
      clock: new FixedClock(new Date('2026-06-01T00:00:00Z')),
      settings: { orgMaxConcurrentSessions: ORG_LIMIT },
    });
  });
  afterAll(async () => app?.close());

  it('reports the org limit from the settings and no default project cap at first', async () => {
    const tenant = await app.newTenant('org-limits-fresh');
    const res = await tenant.http.get('/org/limits');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({ max_concurrent_sessions: ORG_LIMIT, default_project_max_concurrent_sessions: null });
  });

  it('sets the default project cap, up to the org limit, and reads it back', async () => {
    const tenant = await app.newTenant('org-limits-set');
    const res = await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: ORG_LIMIT });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ max_concurrent_sessions: ORG_LIMIT, default_project_max_concurrent_sessions: ORG_LIMIT });
    expect((await tenant.http.get('/org/limits')).body).toEqual(res.body);
  });

  it.each([0, null])('removes the default project cap with %s', async (value) => {
    const tenant = await app.newTenant('org-limits-remove');
    await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 12 });
    const res = await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: value });
    expect(res.status).toBe(200);
    expect(res.body.default_project_max_concurrent_sessions).toBeNull();
    expect((await tenant.http.get('/org/limits')).body.default_project_max_concurrent_sessions).toBeNull();
  });

  it('leaves the cap as it is when the field is absent', async () => {
    const tenant = await app.newTenant('org-limits-absent');
    await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 12 });
    const res = await tenant.http.patch('/org/limits', {});
    expect(res.status).toBe(200);
    expect(res.body.default_project_max_concurrent_sessions).toBe(12);
  });

  it('refuses a default cap above the org limit with exceeds_org_limit and changes nothing', async () => {
    const tenant = await app.newTenant('org-limits-above');
    await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 12 });
    const res = await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: ORG_LIMIT + 1 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('exceeds_org_limit');
    expect(res.body.details).toEqual([
      expect.objectContaining({ field: 'body.default_project_max_concurrent_sessions' }),
    ]);
    expect((await tenant.http.get('/org/limits')).body.default_project_max_concurrent_sessions).toBe(12);
  });

  it.each([
    ['the read-only max_concurrent_sessions', { max_concurrent_sessions: 10 }, 'body'],
    ['a negative cap', { default_project_max_concurrent_sessions: -3 }, 'body.default_project_max_concurrent_sessions'],
    ['a fractional cap', { default_project_max_concurrent_sessions: 2.5 }, 'body.default_project_max_concurrent_sessions'],
    ['a string cap', { default_project_max_concurrent_sessions: '5' }, 'body.default_project_max_concurrent_sessions'],
  ])('refuses %s with 400 and changes nothing', async (_case, body, field) => {
    const tenant = await app.newTenant('org-limits-invalid');
    await tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 12 });
    const res = await tenant.http.patch('/org/limits', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(fields(res)).toEqual([field]);
    if (field === 'body') expect(res.body.message).toContain('max_concurrent_sessions');
    expect((await tenant.http.get('/org/limits')).body).toMatchObject({
      max_concurrent_sessions: ORG_LIMIT,
      default_project_max_concurrent_sessions: 12,
    });
  });

  it('reflects a different org limit setting', async () => {
    const other = await startTestApp({ settings: { orgMaxConcurrentSessions: 7 } });
    try {
      expect((await other.tenant.http.get('/org/limits')).body.max_concurrent_sessions).toBe(7);
      const res = await other.tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 8 });
      expect(res.body.code).toBe('exceeds_org_limit');
      const project = await other.tenant.http.post('/org/projects', { name: 'p' });
      const limits = await other.tenant.http.patch(`/org/projects/${project.body.id}/limits`, { max_concurrent_sessions: 8 });
      expect(limits.body.code).toBe('exceeds_org_limit');
    } finally {
      await other.close();
    }
  });
});
