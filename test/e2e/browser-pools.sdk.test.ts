import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from './support/service.js';

/**
 * Browser pool CRUD through the official SDK against the built service (CONTRACT §3):
 * what the SDK sends (the JSON body on DELETE, percent-encoded names, paging headers)
 * and how it reads our answers and errors. Acquire, release and flush come later.
 */

let service: RunningService;
let kernel: Kernel;

beforeAll(async () => {
  service = await startService();
  kernel = service.client();
});
afterAll(async () => {
  await cleanupServices();
});

describe('browser pools through the SDK', () => {
  it('creates, retrieves by id and by name, updates, lists and deletes a pool', async () => {
    const name = unique('pool');
    const profile = await kernel.profiles.create({ name: unique('pool-profile') });
    const proxy = await kernel.proxies.create({ type: 'custom', config: { host: '127.0.0.1', port: 9 } });
    const created = await kernel.browserPools.create({
      name,
      size: 2,
      headless: true,
      timeout_seconds: 120,
      profile: { id: profile.id },
      proxy_id: proxy.id!,
      viewport: { width: 1280, height: 800 },
    });
    expect(created).toEqual({
      id: expect.stringMatching(/^bpool_/),
      acquired_count: 0,
      available_count: 0,
      created_at: expect.any(String),
      extension_ids: [],
      name,
      profile_id: profile.id,
      browser_pool_config: {
        name,
        size: 2,
        headless: true,
        timeout_seconds: 120,
        profile: { id: profile.id },
        refresh_on_profile_update: true,
        proxy_id: proxy.id,
        viewport: { width: 1280, height: 800 },
      },
    });
    expect(Date.parse(created.created_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(await kernel.browserPools.retrieve(created.id)).toEqual(created);
    expect(await kernel.browserPools.retrieve(name.toUpperCase())).toEqual(created);

    const updated = await kernel.browserPools.update(name, {
      size: 3,
      name: `${name}/eu`,
      proxy_id: '',
      profile: { id: '' },
      discard_all_idle: true,
    });
    expect(updated.id).toBe(created.id);
    expect(updated.name).toBe(`${name}/eu`);
    expect(updated.profile_id).toBeUndefined();
    expect(updated.browser_pool_config).toMatchObject({ size: 3, headless: true, timeout_seconds: 120 });
    expect(updated.browser_pool_config.proxy_id).toBeUndefined();
    expect(updated.browser_pool_config.profile).toBeUndefined();
    // The SDK percent-encodes the slash; the service decodes it.
    expect(await kernel.browserPools.retrieve(`${name}/eu`)).toEqual(updated);

    expect(await collect(kernel.browserPools.list({ name: `${name}/EU` }))).toEqual([updated]);
    expect((await collect(kernel.browserPools.list({ query: created.id }))).map((p) => p.id)).toEqual([created.id]);

    await kernel.browserPools.delete(`${name}/eu`);
    await rejection(kernel.browserPools.retrieve(created.id), NotFoundError);
    expect((await collect(kernel.browserPools.list({ query: name }))).map((p) => p.id)).toEqual([]);
  });

  it('pages through the list with the SDK’s offset pager, newest first', async () => {
    const prefix = unique('paged');
    const made = [];
    for (let i = 0; i < 5; i++) made.unshift((await kernel.browserPools.create({ size: 1, name: `${prefix}-${i}` })).id);
    const firstPage = await kernel.browserPools.list({ query: prefix, limit: 2 });
    expect(firstPage.getPaginatedItems().map((p) => p.id)).toEqual(made.slice(0, 2));
    expect(firstPage.hasNextPage()).toBe(true);
    expect((await collect(kernel.browserPools.list({ query: prefix, limit: 2 }))).map((p) => p.id)).toEqual(made);
    for (const id of made) await kernel.browserPools.delete(id, { force: true });
  });

  it('raises BadRequestError naming each bad field, ConflictError for a taken name, NotFoundError for unknown pools', async () => {
    const bad = await rejection(kernel.browserPools.create({ size: 0, timeout_seconds: 5 }), BadRequestError);
    expect(detailFields(bad)).toEqual(['body.size', 'body.timeout_seconds']);
    expect(bad.error).toMatchObject({ code: 'invalid_request', message: expect.any(String) });

    const name = unique('taken');
    const pool = await kernel.browserPools.create({ size: 1, name });
    const clash = await rejection(kernel.browserPools.create({ size: 1, name: name.toUpperCase() }), ConflictError);
    expect(clash.error).toMatchObject({ code: 'pool_name_taken' });
    await rejection(kernel.browserPools.update(pool.id, { size: 1, refresh_on_profile_update: true }), BadRequestError);
    await rejection(kernel.browserPools.create({ size: 1, profile: { name: unique('no-such-profile') } }), NotFoundError);

    await kernel.browserPools.delete(pool.id);
    await rejection(kernel.browserPools.retrieve(pool.id), NotFoundError);
    await rejection(kernel.browserPools.update(pool.id, { size: 2 }), NotFoundError);
    await rejection(kernel.browserPools.delete(pool.id), NotFoundError);
    await rejection(kernel.browserPools.retrieve('bpool_nope'), NotFoundError);
  });
});
