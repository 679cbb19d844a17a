import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import type { Profile } from '@onkernel/sdk/resources/browsers/browsers';
import { decompress } from 'fzstd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, recordingFetch, rejection, unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
});
afterAll(cleanupServices);

/** Two zero blocks: a tar with no entries. */
const EMPTY_TAR = Buffer.alloc(1024);

describe('profiles.create', () => {
  it('creates an unnamed profile from profiles.create() with no arguments', async () => {
    // The SDK types demand a body; calling it bare sends an empty JSON body, as real callers do.
    const profile = await (admin.profiles.create as unknown as () => Promise<Profile>)();
    expect(profile).toEqual({
      id: expect.stringMatching(/^prof_/),
      name: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(Math.abs(Date.now() - Date.parse(profile.created_at))).toBeLessThan(60_000);
  });

  it('creates a named profile and refuses the name again, ignoring case, with ConflictError and no retry', async () => {
    const name = unique('Work');
    expect((await admin.profiles.create({ name })).name).toBe(name);
    const wire = recordingFetch();
    const retrying = service.client(undefined, { maxRetries: 2, fetch: wire.fetch });
    const error = await rejection(retrying.profiles.create({ name: name.toUpperCase() }), ConflictError);
    expect(error.error).toMatchObject({ code: 'profile_name_taken' });
    expect(wire.calls).toHaveLength(1);
  });

  it('refuses an invalid name with BadRequestError naming body.name', async () => {
    const error = await rejection(admin.profiles.create({ name: 'has spaces' }), BadRequestError);
    expect(detailFields(error)).toEqual(['body.name']);
  });
});

describe('profiles.retrieve, update, list, delete', () => {
  it('retrieves by id and by name, renames, lists with filters and deletes', async () => {
    const name = unique('Shop');
    const created = await admin.profiles.create({ name });
    expect(await admin.profiles.retrieve(created.id)).toEqual(created);
    expect(await admin.profiles.retrieve(name.toLowerCase())).toEqual(created);

    const renamed = unique('Renamed');
    const updated = await admin.profiles.update(name, { name: renamed });
    expect(updated).toMatchObject({ id: created.id, name: renamed });
    await rejection(admin.profiles.retrieve(name), NotFoundError);

    expect((await admin.profiles.list({ name: renamed.toUpperCase() })).getPaginatedItems()).toEqual([updated]);
    const query = (await admin.profiles.list({ query: renamed.slice(-6) })).getPaginatedItems();
    expect(query.map((p) => p.id)).toEqual([created.id]);

    await admin.profiles.delete(renamed);
    await rejection(admin.profiles.retrieve(created.id), NotFoundError);
    await rejection(admin.profiles.delete(created.id), NotFoundError);
  });

  it('pages through every profile with the SDK pager', async () => {
    const prefix = unique('page');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await admin.profiles.create({ name: `${prefix}-${i}` })).id);
    const seen: string[] = [];
    for await (const profile of admin.profiles.list({ query: prefix, limit: 2 })) seen.push(profile.id);
    expect(seen).toEqual([...ids].reverse());
  });

  it('refuses a rename onto a taken name with ConflictError and an invalid one with BadRequestError', async () => {
    const a = await admin.profiles.create({ name: unique('a') });
    const b = await admin.profiles.create({ name: unique('b') });
    await rejection(admin.profiles.update(b.id, { name: a.name! }), ConflictError);
    const bad = await rejection(admin.profiles.update(b.id, { name: '..' }), BadRequestError);
    expect(detailFields(bad)).toEqual(['body.name']);
    await rejection(admin.profiles.update('prof_missing', { name: unique('x') }), NotFoundError);
  });

  it('answers NotFoundError for a profile of another project', async () => {
    const project = await admin.projects.create({ name: unique('elsewhere') });
    const profile = await admin.profiles.create({ name: unique('hidden') });
    const scoped = service.client(undefined, { defaultHeaders: { 'X-Kernel-Project-Id': project.id } });
    await rejection(scoped.profiles.retrieve(profile.id), NotFoundError);
    await rejection(scoped.profiles.download(profile.id), NotFoundError);
    await rejection(scoped.profiles.delete(profile.id), NotFoundError);
  });
});

describe('profiles.download', () => {
  it('downloads a never-saved profile as an empty tar.zst by default and an empty tar with format=tar', async () => {
    const profile = await admin.profiles.create({ name: unique('fresh') });

    const zst = await admin.profiles.download(profile.id);
    expect(zst.headers.get('content-type')).toBe('application/zstd');
    expect(zst.headers.get('content-disposition')).toBe(`attachment; filename="${profile.name}.tar.zst"`);
    expect(Buffer.from(decompress(new Uint8Array(await zst.arrayBuffer()))).equals(EMPTY_TAR)).toBe(true);

    const tar = await admin.profiles.download(profile.name!, { format: 'tar' });
    expect(tar.headers.get('content-type')).toBe('application/x-tar');
    expect(Buffer.from(await tar.arrayBuffer()).equals(EMPTY_TAR)).toBe(true);
  });

  it('refuses an unknown format with BadRequestError and an unknown profile with NotFoundError', async () => {
    const profile = await admin.profiles.create({});
    const bad = await rejection(admin.profiles.download(profile.id, { format: 'zip' as 'tar' }), BadRequestError);
    expect(detailFields(bad)).toEqual(['query.format']);
    await rejection(admin.profiles.download('prof_missing'), NotFoundError);
  });
});
