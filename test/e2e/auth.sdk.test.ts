import type Kernel from '@onkernel/sdk';
import { AuthenticationError, BadRequestError, PermissionDeniedError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, recordingFetch, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
});
afterAll(cleanupServices);

/** One call per kind of /org route the SDK has. */
const orgCalls: Array<[string, (client: Kernel) => Promise<unknown>]> = [
  ['apiKeys.list', (c) => collect(c.apiKeys.list())],
  ['apiKeys.create', (c) => c.apiKeys.create({ name: 'never made' })],
  ['projects.list', (c) => collect(c.projects.list())],
  ['projects.create', (c) => c.projects.create({ name: 'never made' })],
  ['projects.retrieve', (c) => c.projects.retrieve('default')],
  ['projects.limits.retrieve', (c) => c.projects.limits.retrieve('default')],
  ['organization.limits.retrieve', (c) => c.organization.limits.retrieve()],
  ['organization.limits.update', (c) => c.organization.limits.update({ default_project_max_concurrent_sessions: 1 })],
];

describe('authentication', () => {
  it.each(orgCalls)('%s with an unknown key fails with AuthenticationError', async (_name, call) => {
    const error = await rejection(call(service.client(`bp_${'0'.repeat(43)}`)), AuthenticationError);
    expect(error.status).toBe(401);
    expect(error.error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  });

  it('refuses a key that was deleted, and an empty bearer', async () => {
    const key = await admin.apiKeys.create({ name: unique('revoked') });
    await admin.apiKeys.delete(key.id);

    await rejection(service.client(key.key).projects.retrieve('default'), AuthenticationError);
    await rejection(service.client('').projects.retrieve('default'), AuthenticationError);
  });
});

describe('project-scoped keys on /org routes', () => {
  // There is one org per service: isolation between orgs is the integration tier's; here
  // the boundary is that a project's key cannot reach the org-wide routes.
  it.each(orgCalls)('%s with a project-scoped key fails with PermissionDeniedError', async (_name, call) => {
    const project = await admin.projects.create({ name: unique('scoped') });
    const scoped = await admin.apiKeys.create({ name: unique('scoped-key'), project_id: project.id });

    const error = await rejection(call(service.client(scoped.key)), PermissionDeniedError);

    expect(error.status).toBe(403);
  });

  it('stays refused when the key names its own project in X-Kernel-Project-Id', async () => {
    const project = await admin.projects.create({ name: unique('own-header') });
    const scoped = await admin.apiKeys.create({ name: unique('scoped-key'), project_id: project.id });

    await rejection(service.client(scoped.key, { projectID: project.id }).projects.list(), PermissionDeniedError);
  });

  it('leaves nothing changed after a refused write', async () => {
    const project = await admin.projects.create({ name: unique('untouched') });
    const scoped = await admin.apiKeys.create({ name: unique('scoped-key'), project_id: project.id });
    const name = unique('not-created');

    await rejection(service.client(scoped.key).projects.create({ name }), PermissionDeniedError);
    await rejection(service.client(scoped.key).projects.update(project.id, { status: 'archived' }), PermissionDeniedError);

    expect(await collect(admin.projects.list({ name }))).toEqual([]);
    await expect(admin.projects.retrieve(project.id)).resolves.toMatchObject({ status: 'active' });
  });
});

describe('X-Kernel-Project-Id on /org routes', () => {
  it('is sent by the SDK and ignored, whether it names a project or nothing that exists', async () => {
    const project = await admin.projects.create({ name: unique('header') });
    const key = await admin.apiKeys.create({ name: unique('header-key') });

    for (const projectID of [project.id, project.name, unique('no-such-project')]) {
      const wire = recordingFetch();
      const client = service.client(undefined, { projectID, fetch: wire.fetch });

      await expect(client.apiKeys.retrieve(key.id)).resolves.toMatchObject({ id: key.id, project_id: null });
      const listed = await collect(client.projects.list({ name: project.name }));
      expect(listed.map((p) => p.id)).toEqual([project.id]);
      await expect(client.organization.limits.retrieve()).resolves.toBeDefined();
      expect(wire.calls.map((c) => c.status)).toEqual([200, 200, 200]);
    }
  });
});

describe('validation errors', () => {
  it('are BadRequestErrors whose details name every invalid field across query and body', async () => {
    const error = await rejection(
      admin.apiKeys.create({ name: 'n'.repeat(256), days_to_expire: 0, project_id: '', unexpected: true } as never),
      BadRequestError,
    );

    expect(error.status).toBe(400);
    expect(detailFields(error)).toEqual(expect.arrayContaining(['body.days_to_expire', 'body.name', 'body.project_id']));
    expect(detailFields(error).length).toBeGreaterThanOrEqual(4); // the unknown key too
    expect(error.error).toMatchObject({
      code: expect.any(String),
      message: expect.any(String),
      details: expect.arrayContaining([expect.objectContaining({ code: expect.any(String), message: expect.any(String) })]),
    });
    expect(error.message).toMatch(/^400 /);

    const listError = await rejection(collect(admin.projects.list({ limit: 0, offset: -1 })), BadRequestError);
    expect(detailFields(listError)).toEqual(['query.limit', 'query.offset']);
  });
});
