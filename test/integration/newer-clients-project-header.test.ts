import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createKey, createProject } from './api-keys.fixtures.js';

/**
 * X-Kernel-Project, as the Python SDK's Kernel(project=…), the CLI's --project and
 * KERNEL_PROJECT send it, through the real routes: credentials are the resource made,
 * as the cheapest one that lives in a project.
 */
describe('X-Kernel-Project', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-09-01T10:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  let seq = 0;
  const credential = () => ({ name: `cred-${++seq}`, domain: 'example.com', values: { username: 'u' } });
  const namesIn = async (http: HttpClient, projectId: string) =>
    ((await http.get('/credentials', { 'X-Kernel-Project-Id': projectId })).body as Array<{ name: string }>).map((c) => c.name);
  const rowsIn = async (projectId: string) =>
    (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM credentials WHERE project_id = $1', [projectId])).rows[0]!.n;

  const arrange = async () => {
    const tenant = await app.newTenant();
    const project = await createProject(tenant, 'Équipe Verte');
    const other = await createProject(tenant, 'other');
    return { tenant, project, other };
  };

  it.each(['Équipe Verte', 'equipe verte'])('puts what is created in the project named %j, not the default one', async (header) => {
    const { tenant, project } = await arrange();
    const body = credential();
    const res = await tenant.http.post('/credentials', body, { 'X-Kernel-Project': header });
    expect(res.status, res.text).toBe(200);
    expect(await namesIn(tenant.http, project.id)).toEqual([body.name]);
    expect(await namesIn(tenant.http, tenant.defaultProjectId)).toEqual([]);
  });

  it('takes a project id as well', async () => {
    const { tenant, project } = await arrange();
    const body = credential();
    expect((await tenant.http.post('/credentials', body, { 'X-Kernel-Project': project.id })).status).toBe(200);
    expect(await namesIn(tenant.http, project.id)).toEqual([body.name]);
  });

  it('refuses an unknown project, or one of another org, with 404 project_not_found and creates nothing', async () => {
    const { tenant } = await arrange();
    const stranger = await app.newTenant('stranger');
    const theirs = await createProject(stranger, 'theirs');
    for (const header of ['nothing by that name', 'proj_nothere', theirs.name, theirs.id]) {
      const res = await tenant.http.post('/credentials', credential(), { 'X-Kernel-Project': header });
      expect(res.status, header).toBe(404);
      expect(res.body).toMatchObject({ code: 'project_not_found', message: expect.stringContaining('X-Kernel-Project') });
    }
    expect(await rowsIn(tenant.defaultProjectId)).toBe(0);
    expect(await rowsIn(theirs.id)).toBe(0);
  });

  it('accepts both headers when they name the same project (an id and its name)', async () => {
    const { tenant, project } = await arrange();
    const body = credential();
    const res = await tenant.http.post('/credentials', body, { 'X-Kernel-Project-Id': project.id, 'X-Kernel-Project': 'équipe verte' });
    expect(res.status, res.text).toBe(200);
    expect(await namesIn(tenant.http, project.id)).toEqual([body.name]);
  });

  it('refuses two headers naming different projects with 400 and creates nothing', async () => {
    const { tenant, project, other } = await arrange();
    for (const [byId, byName] of [
      [project.id, 'other'],
      [other.id, 'Équipe Verte'],
      [project.id, 'no such project'],
    ]) {
      const res = await tenant.http.post('/credentials', credential(), { 'X-Kernel-Project-Id': byId!, 'X-Kernel-Project': byName! });
      expect(res.status, `${byId} / ${byName}`).toBe(400);
      expect(res.body).toMatchObject({ code: 'project_header_conflict', details: [{ field: 'headers.x-kernel-project' }] });
    }
    for (const id of [project.id, other.id, tenant.defaultProjectId]) expect(await rowsIn(id)).toBe(0);
  });

  it('does not let a project-scoped key name another project of its org (403, nothing created)', async () => {
    const { tenant, project, other } = await arrange();
    const scoped = await createKey(tenant, { name: 'scoped', project_id: project.id });
    const client = app.client(scoped.key);
    for (const header of ['other', other.id, 'default', tenant.defaultProjectId]) {
      const res = await client.post('/credentials', credential(), { 'X-Kernel-Project': header });
      expect(res.status, header).toBe(403);
      expect(res.body).toMatchObject({ code: 'project_forbidden', message: expect.stringContaining('X-Kernel-Project') });
    }
    expect(await rowsIn(other.id)).toBe(0);
    expect(await rowsIn(tenant.defaultProjectId)).toBe(0);
    // Its own project, by name, is fine.
    expect((await client.post('/credentials', credential(), { 'X-Kernel-Project': 'Équipe Verte' })).status).toBe(200);
    expect(await rowsIn(project.id)).toBe(1);
  });
});
