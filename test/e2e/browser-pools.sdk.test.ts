import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { detailFields, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

/**
 * Browser pools through the official SDK against the built service (CONTRACT §3, §12.6):
 * what the SDK sends (the JSON body on DELETE, percent-encoded names, paging headers),
 * how it reads our answers and errors, and a lease driven over CDP with Playwright.
 * The concurrency and failure tests of leases are in test/integration/browser-pools-leases.test.ts.
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
      // Browserplane's extra field, passed through by the SDK: the fill has not started yet.
      starting_count: 0,
      created_at: expect.any(String),
      extension_ids: [],
      region: 'us-east',
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
    // The pool starts filling at once: its counts move between two reads, the rest must not.
    const settled = (pool: object) => Object.fromEntries(Object.entries(pool).filter(([key]) => !key.endsWith('_count')));
    expect(settled(await kernel.browserPools.retrieve(created.id))).toEqual(settled(created));
    expect(settled(await kernel.browserPools.retrieve(name.toUpperCase()))).toEqual(settled(created));

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

describe('browser pool leases through the SDK and Playwright', () => {
  let pages: TestPageServer;
  beforeAll(async () => {
    pages = await startTestPageServer({ '/pool': '<title>Hello from a pool</title>' });
  });
  afterAll(async () => {
    await pages?.close();
  });

  it('acquires a warm browser, drives it over cdp_ws_url, releases it and gets it back clean', async () => {
    const pool = await kernel.browserPools.create({ name: unique('lease-pool'), size: 1, headless: true, fill_rate_per_minute: 6000 });
    try {
      await expect
        .poll(async () => (await kernel.browserPools.retrieve(pool.id)).available_count, { timeout: 90_000, interval: 250, message: 'the pool to warm its browser' })
        .toBeGreaterThanOrEqual(1);
      const lease = await kernel.browserPools.acquire(pool.id, { acquire_timeout_seconds: 30 });
      expect(lease).toMatchObject({ pool: { id: pool.id, name: pool.name }, timeout_seconds: 600, headless: true });
      expect(await kernel.browserPools.retrieve(pool.id)).toMatchObject({ available_count: 0, acquired_count: 1 });

      const browser = await chromium.connectOverCDP(lease.cdp_ws_url);
      try {
        const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
        await page.goto(`${pages.url}/pool`);
        expect(await page.title()).toBe('Hello from a pool');
      } finally {
        await browser.close();
      }
      await kernel.browserPools.release(pool.id, { session_id: lease.session_id });

      const again = await kernel.browserPools.acquire(pool.id, { acquire_timeout_seconds: 30 });
      expect(again?.session_id).toBe(lease.session_id);
      const reused = await chromium.connectOverCDP(again.cdp_ws_url);
      try {
        const urls = reused.contexts().flatMap((context) => context.pages().map((p) => p.url()));
        expect(urls).not.toContain(`${pages.url}/pool`);
      } finally {
        await reused.close();
      }
      await kernel.browserPools.release(pool.id, { session_id: again.session_id });
      expect(await kernel.browserPools.retrieve(pool.id)).toMatchObject({ acquired_count: 0 });
    } finally {
      await kernel.browserPools.delete(pool.id, { force: true }).catch(() => undefined);
    }
  }, 120_000);
});
