import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import type { Project } from '@onkernel/sdk/resources/projects/projects';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, recordingFetch, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

const ORG_SESSION_LIMIT = 50;

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService({ env: { BROWSERPLANE_ORG_MAX_CONCURRENT_SESSIONS: String(ORG_SESSION_LIMIT) } });
  admin = service.client();
});
afterAll(cleanupServices);

describe('projects.create', () => {
  it('creates an active project', async () => {
    const name = unique('Équipe');

    const project = await admin.projects.create({ name });

    expect(project).toEqual({
      id: expect.any(String),
      name,
      status: 'active',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(Math.abs(Date.now() - Date.parse(project.created_at))).toBeLessThan(60_000);
  });

  it('refuses a name already taken, ignoring case and accents, with ConflictError and no retry', async () => {
    const name = unique('Équipe');
    await admin.projects.create({ name });
    const wire = recordingFetch();
    const retrying = service.client(undefined, { maxRetries: 2, fetch: wire.fetch });

    const error = await rejection(retrying.projects.create({ name: name.replace('É', 'e').toUpperCase() }), ConflictError);

    expect(error.headers.get('x-should-retry')).toBe('false');
    expect(wire.calls).toHaveLength(1);
  });

  it('refuses an empty or over-long name with BadRequestError naming body.name', async () => {
    for (const name of ['', '   ', 'x'.repeat(256)]) {
      expect(detailFields(await rejection(admin.projects.create({ name }), BadRequestError)), JSON.stringify(name)).toEqual([
        'body.name',
      ]);
    }
  });
});

describe('projects.retrieve', () => {
  it('finds a project by id and by name', async () => {
    const project = await admin.projects.create({ name: unique('findable') });

    await expect(admin.projects.retrieve(project.id)).resolves.toEqual(project);
    await expect(admin.projects.retrieve(project.name)).resolves.toEqual(project);
    await expect(admin.projects.retrieve(project.name.toUpperCase())).resolves.toEqual(project);
  });

  it('finds a project whose name has URL-special characters', async () => {
    const project = await admin.projects.create({ name: unique('a/b c?d#e%20&f+g') });

    await expect(admin.projects.retrieve(project.name)).resolves.toEqual(project);
    await expect(admin.projects.limits.retrieve(project.name)).resolves.toMatchObject({ max_concurrent_sessions: null });
    await expect(admin.apiKeys.create({ name: unique('special'), project_id: project.name })).resolves.toMatchObject({
      project_id: project.id,
    });
  });

  it('answers an unknown id or name with NotFoundError', async () => {
    await rejection(admin.projects.retrieve(unique('nowhere')), NotFoundError);
  });
});

describe('projects.update', () => {
  it('renames a project and archives it', async () => {
    const project = await admin.projects.create({ name: unique('renamed') });
    const name = unique('new-name');

    const renamed = await admin.projects.update(project.id, { name });
    const archived = await admin.projects.update(name, { status: 'archived' });

    expect(renamed).toMatchObject({ id: project.id, name, status: 'active' });
    expect(archived).toMatchObject({ id: project.id, name, status: 'archived' });
    expect(Date.parse(archived.updated_at)).toBeGreaterThanOrEqual(Date.parse(project.updated_at));
    await expect(admin.projects.retrieve(project.id)).resolves.toEqual(archived);
    await rejection(admin.projects.retrieve(project.name), NotFoundError);
  });

  it('refuses a taken name with ConflictError, a bad status with BadRequestError, an unknown project with NotFoundError', async () => {
    const taken = await admin.projects.create({ name: unique('taken') });
    const project = await admin.projects.create({ name: unique('renaming') });

    await rejection(admin.projects.update(project.id, { name: taken.name }), ConflictError);
    const error = await rejection(admin.projects.update(project.id, { status: 'deleted' as never }), BadRequestError);
    expect(detailFields(error)).toEqual(['body.status']);
    await rejection(admin.projects.update(unique('nowhere'), { name: unique('x') }), NotFoundError);
    await expect(admin.projects.retrieve(project.id)).resolves.toEqual(project);
  });
});

describe('projects.list', () => {
  async function projectsNamed(prefix: string, count: number): Promise<Project[]> {
    const made: Project[] = [];
    for (let i = 0; i < count; i++) made.push(await admin.projects.create({ name: `${prefix}-${i}` }));
    return made;
  }

  it('pages through more than one page with for await, newest first', async () => {
    const prefix = unique('paged');
    const made = await projectsNamed(prefix, 5);
    const wire = recordingFetch();

    const seen = await collect(service.client(undefined, { fetch: wire.fetch }).projects.list({ query: prefix, limit: 2 }));

    expect(seen.map((p) => p.id)).toEqual(made.map((p) => p.id).reverse());
    expect(wire.calls.map((c) => c.url.searchParams.get('offset'))).toEqual([null, '2', '4']);
    expect(wire.calls.at(-1)?.headers.get('x-has-more')).toBe('false');
  });

  it('filters by exact name (case- and accent-insensitive) and by query', async () => {
    const base = unique('Café');
    const exact = await admin.projects.create({ name: base });
    const longer = await admin.projects.create({ name: `${base}-annex` });
    const ids = async (params: { name?: string; query?: string }) => (await collect(admin.projects.list(params))).map((p) => p.id);

    expect(await ids({ name: base.replace('é', 'e').toUpperCase() })).toEqual([exact.id]);
    expect(await ids({ query: base.slice(2) })).toEqual([longer.id, exact.id]);
    expect(await ids({ query: exact.id })).toEqual([exact.id]);
    expect(await ids({ name: unique('nothing') })).toEqual([]);
  });

  it('does not list deleted projects', async () => {
    const project = await admin.projects.create({ name: unique('listed-then-deleted') });
    await admin.projects.delete(project.id);

    expect(await collect(admin.projects.list({ name: project.name }))).toEqual([]);
  });
});

describe('projects.delete', () => {
  it('deletes an empty project, whose name can then be used again', async () => {
    const project = await admin.projects.create({ name: unique('empty') });

    await expect(admin.projects.delete(project.id)).resolves.toBeNull(); // the SDK yields null for a 204

    await rejection(admin.projects.retrieve(project.id), NotFoundError);
    await rejection(admin.projects.delete(project.id), NotFoundError);
    const again = await admin.projects.create({ name: project.name });
    expect(again.id).not.toBe(project.id);
  });

  it('refuses a project that still has an API key with ConflictError until the key is deleted', async () => {
    const project = await admin.projects.create({ name: unique('in-use') });
    const key = await admin.apiKeys.create({ name: unique('holder'), project_id: project.id });

    const error = await rejection(admin.projects.delete(project.name), ConflictError);

    expect(error.headers.get('x-should-retry')).toBe('false');
    expect(detailFields(error)).toEqual(['api_keys']);
    await expect(admin.projects.retrieve(project.id)).resolves.toMatchObject({ id: project.id });
    await admin.apiKeys.delete(key.id);
    await expect(admin.projects.delete(project.id)).resolves.toBeNull(); // the SDK yields null for a 204
  });

  it('refuses the default project with ConflictError', async () => {
    await rejection(admin.projects.delete('default'), ConflictError);
    await expect(admin.projects.retrieve('default')).resolves.toMatchObject({ name: 'default', status: 'active' });
  });
});

describe('projects.limits', () => {
  it('starts with no caps, sets the ones given, keeps the others, and 0 removes a cap', async () => {
    const project = await admin.projects.create({ name: unique('limited') });
    const none = { max_concurrent_sessions: null, max_concurrent_invocations: null, max_pooled_sessions: null };

    await expect(admin.projects.limits.retrieve(project.id)).resolves.toEqual(none);
    const set = await admin.projects.limits.update(project.id, { max_concurrent_sessions: 5, max_concurrent_invocations: 3 });
    expect(set).toEqual({ ...none, max_concurrent_sessions: 5, max_concurrent_invocations: 3 });
    const partly = await admin.projects.limits.update(project.name, { max_concurrent_invocations: 0 });
    expect(partly).toEqual({ ...none, max_concurrent_sessions: 5 });
    const cleared = await admin.projects.limits.update(project.id, { max_concurrent_sessions: null });
    expect(cleared).toEqual(none);
    await expect(admin.projects.limits.retrieve(project.id)).resolves.toEqual(none);
  });

  it('refuses a session cap above the organisation limit and a negative cap with BadRequestError', async () => {
    const project = await admin.projects.create({ name: unique('over-limit') });

    const above = await rejection(
      admin.projects.limits.update(project.id, { max_concurrent_sessions: ORG_SESSION_LIMIT + 1 }),
      BadRequestError,
    );
    expect(detailFields(above)).toEqual(['body.max_concurrent_sessions']);
    const negative = await rejection(admin.projects.limits.update(project.id, { max_concurrent_invocations: -1 }), BadRequestError);
    expect(detailFields(negative)).toEqual(['body.max_concurrent_invocations']);
    await expect(admin.projects.limits.update(project.id, { max_concurrent_sessions: ORG_SESSION_LIMIT })).resolves.toMatchObject({
      max_concurrent_sessions: ORG_SESSION_LIMIT,
    });
  });

  it('answers limits of an unknown project with NotFoundError', async () => {
    await rejection(admin.projects.limits.retrieve(unique('nowhere')), NotFoundError);
    await rejection(admin.projects.limits.update(unique('nowhere'), { max_concurrent_sessions: 1 }), NotFoundError);
  });
});

describe('organization.limits', () => {
  // The SDK's method for GET/PATCH /org/limits is kernel.organization.limits.
  it('reports the configured organisation limit and sets, keeps and removes the default project cap', async () => {
    const set = await admin.organization.limits.update({ default_project_max_concurrent_sessions: 12 });
    expect(set).toMatchObject({ max_concurrent_sessions: ORG_SESSION_LIMIT, default_project_max_concurrent_sessions: 12 });
    await expect(admin.organization.limits.retrieve()).resolves.toEqual(set);
    await expect(admin.organization.limits.update({})).resolves.toEqual(set);

    const removed = await admin.organization.limits.update({ default_project_max_concurrent_sessions: 0 });
    expect(removed).toMatchObject({ max_concurrent_sessions: ORG_SESSION_LIMIT, default_project_max_concurrent_sessions: null });
    await expect(admin.organization.limits.retrieve()).resolves.toEqual(removed);
  });

  it('refuses a default cap above the organisation limit with BadRequestError', async () => {
    const error = await rejection(
      admin.organization.limits.update({ default_project_max_concurrent_sessions: ORG_SESSION_LIMIT + 1 }),
      BadRequestError,
    );
    expect(detailFields(error)).toEqual(['body.default_project_max_concurrent_sessions']);
    await rejection(admin.organization.limits.update({ max_concurrent_sessions: 10 } as never), BadRequestError);
  });
});
