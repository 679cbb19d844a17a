import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { authenticate } from '../../api/src/http/authenticate.js';
import { AppError } from '../../api/src/http/errors.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createKey, createProject, DAY } from './api-keys.fixtures.js';

/**
 * No route with scope 'project' exists yet, so these call authenticate() directly,
 * against keys and projects made through the API.
 */
describe('project resolution', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-08-15T10:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const resolve = (key: string, projectHeader?: string, scope: 'project' | 'org' = 'project') =>
    authenticate(app.database.db, app.clock, { authorization: `Bearer ${key}`, projectHeader }, scope);

  /** The AppError a call fails with, as {status, code}. */
  const failure = async (call: Promise<unknown>) => {
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    const { status, code } = error as AppError;
    return { status, code };
  };

  /** An org with the default project, one more project, and a key scoped to it. */
  const arrange = async () => {
    const tenant = await app.newTenant();
    const project = await createProject(tenant, 'Équipe Verte');
    const other = await createProject(tenant, 'other');
    const scoped = await createKey(tenant, { name: 'scoped', project_id: project.id });
    return { tenant, project, other, scoped };
  };

  describe('with an org-wide key', () => {
    it('acts in the default project when no project is named', async () => {
      const { tenant } = await arrange();
      const auth = await resolve(tenant.adminKey);
      expect(auth).toEqual({
        orgId: tenant.orgId,
        apiKey: { id: tenant.adminKeyId, name: 'admin', projectId: null, invocationId: null },
        project: { id: tenant.defaultProjectId, name: 'default' },
      });
    });

    it('treats a blank header as no header', async () => {
      const { tenant } = await arrange();
      expect((await resolve(tenant.adminKey, '   ')).project?.id).toBe(tenant.defaultProjectId);
    });

    it('acts in the project named by id', async () => {
      const { tenant, project } = await arrange();
      expect((await resolve(tenant.adminKey, project.id)).project).toEqual(project);
    });

    it.each(['Équipe Verte', 'équipe verte', 'EQUIPE VERTE', ' equipe verte '])(
      'acts in the project named %j, ignoring case and accents',
      async (header) => {
        const { tenant, project } = await arrange();
        expect((await resolve(tenant.adminKey, header)).project).toEqual(project);
      },
    );

    it('answers 404 project_not_found for an unknown or deleted project', async () => {
      const { tenant, other } = await arrange();
      expect((await tenant.http.delete(`/org/projects/${other.id}`)).status).toBe(204);
      for (const header of ['proj_nothere', 'nothing by that name', other.id, 'other']) {
        expect(await failure(resolve(tenant.adminKey, header)), header).toEqual({ status: 404, code: 'project_not_found' });
      }
    });

    it('answers 404 for a project of another org, by id or by name', async () => {
      const { tenant } = await arrange();
      const stranger = await app.newTenant('stranger');
      const theirs = await createProject(stranger, 'theirs only');
      for (const header of [theirs.id, theirs.name, stranger.defaultProjectId]) {
        expect(await failure(resolve(tenant.adminKey, header)), header).toEqual({ status: 404, code: 'project_not_found' });
      }
    });

    it('is accepted on org scope without a project', async () => {
      const { tenant, project } = await arrange();
      expect((await resolve(tenant.adminKey, project.id, 'org')).project).toBeNull();
    });
  });

  describe('with a project-scoped key', () => {
    it('acts in its own project when none is named', async () => {
      const { tenant, project, scoped } = await arrange();
      expect(await resolve(scoped.key)).toEqual({
        orgId: tenant.orgId,
        apiKey: { id: scoped.id, name: 'scoped', projectId: project.id, invocationId: null },
        project,
      });
    });

    it.each([
      ['its id', (p: { id: string }) => p.id],
      ['its name', () => 'Équipe Verte'],
      ['its name folded', () => 'equipe verte'],
    ])('accepts its own project named by %s', async (_case, header) => {
      const { project, scoped } = await arrange();
      expect((await resolve(scoped.key, header(project))).project).toEqual(project);
    });

    it('answers 403 project_forbidden for another project of its org, by id or by name', async () => {
      const { tenant, other, scoped } = await arrange();
      for (const header of [other.id, other.name, tenant.defaultProjectId, 'default']) {
        expect(await failure(resolve(scoped.key, header)), header).toEqual({ status: 403, code: 'project_forbidden' });
      }
    });

    it('answers 403 project_forbidden for an unknown project or one of another org', async () => {
      const { scoped } = await arrange();
      const stranger = await app.newTenant('stranger');
      const theirs = await createProject(stranger, 'Équipe Verte');
      for (const header of ['proj_nothere', theirs.id, stranger.defaultProjectId]) {
        expect(await failure(resolve(scoped.key, header)), header).toEqual({ status: 403, code: 'project_forbidden' });
      }
    });

    it('is refused on org scope with 403 org_key_required', async () => {
      const { scoped } = await arrange();
      expect(await failure(resolve(scoped.key, undefined, 'org'))).toEqual({ status: 403, code: 'org_key_required' });
    });
  });

  describe('before any project is resolved', () => {
    it('refuses a missing, malformed or unknown key with 401', async () => {
      const { project } = await arrange();
      const calls = [
        authenticate(app.database.db, app.clock, { projectHeader: project.id }, 'project'),
        authenticate(app.database.db, app.clock, { authorization: 'Token abc' }, 'project'),
        resolve('bp_unknown', project.id),
      ];
      for (const call of calls) expect(await failure(call)).toEqual({ status: 401, code: 'unauthorized' });
    });

    it('refuses an expired key with 401 even when it names its own project', async () => {
      const { tenant, project } = await arrange();
      const brief = await createKey(tenant, { name: 'brief', project_id: project.id, days_to_expire: 1 });
      expect((await resolve(brief.key, project.id)).project?.id).toBe(project.id);
      clock.advance(DAY);
      expect(await failure(resolve(brief.key, project.id))).toEqual({ status: 401, code: 'unauthorized' });
    });

    it('refuses a deleted key with 401', async () => {
      const { tenant, scoped } = await arrange();
      expect((await tenant.http.delete(`/org/api_keys/${scoped.id}`)).status).toBe(204);
      expect(await failure(resolve(scoped.key))).toEqual({ status: 401, code: 'unauthorized' });
      expect(await failure(resolve(scoped.key, undefined, 'org'))).toEqual({ status: 401, code: 'unauthorized' });
    });
  });
});
