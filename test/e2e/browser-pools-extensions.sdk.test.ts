import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError, toFile } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markerOf as markerOfPage, startMarkerPage, type MarkerPage } from './support/marker-page.js';
import { eventually } from '../support/eventually.js';
import { markerZip } from '../support/extension-zip.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { rejection, unique } from './support/sdk.js';

/**
 * Extensions in browser pools through @onkernel/sdk against the built service, with real
 * pool browsers (agents, Chromium) and an MV3 extension whose content script marks every
 * page of an http page this test serves (data-ext on <html>). Nothing is faked.
 */

let service: RunningService;
let kernel: Kernel;
let page: MarkerPage;

beforeAll(async () => {
  service = await startService();
  kernel = service.client();
  page = await startMarkerPage('127.0.0.34', 'pool extensions e2e');
});
afterAll(async () => {
  await cleanupServices();
  await page?.close();
});

const markerOf = (cdpWsUrl: string) => markerOfPage(cdpWsUrl, page.url);

const warm = (poolId: string) =>
  eventually(() => kernel.browserPools.retrieve(poolId), { timeoutMs: 90_000, intervalMs: 200, what: `pool ${poolId} warm`, accept: (p) => p.available_count === 1 });

async function leaseFrom(poolId: string) {
  const lease = await kernel.browserPools.acquire(poolId, { acquire_timeout_seconds: 30 });
  if (!lease) throw new Error(`acquire from pool ${poolId} answered 204`);
  return lease;
}

describe('browser pools with extensions through the SDK', () => {
  it('create loads them, delete of the extension is refused while the pool has it, update [] clears', async () => {
    const name = unique('pool-ext');
    const stored = await kernel.extensions.upload({ file: await toFile(await markerZip({ value: 'pool' }), 'm.zip'), name });
    const pool = await kernel.browserPools.create({ size: 1, headless: true, fill_rate_per_minute: 6000, extensions: [{ name }] });
    try {
      expect(pool.extension_ids).toEqual([stored.id]);
      expect(pool.browser_pool_config.extensions).toEqual([{ name }]);
      await warm(pool.id);
      const lease = await leaseFrom(pool.id);
      expect(await markerOf(lease.cdp_ws_url)).toBe('pool');

      const refused = await rejection(kernel.extensions.delete(stored.id), ConflictError);
      expect(refused.message).toContain(pool.id);

      const cleared = await kernel.browserPools.update(pool.id, { size: 1, extensions: [], discard_all_idle: true });
      expect(cleared.extension_ids).toEqual([]);
      await kernel.browserPools.release(pool.id, { session_id: lease.session_id });
      await warm(pool.id);
      const plain = await leaseFrom(pool.id);
      expect(plain.session_id).not.toBe(lease.session_id);
      expect(await markerOf(plain.cdp_ws_url)).toBeNull();
      await kernel.extensions.delete(stored.id);
    } finally {
      await kernel.browserPools.delete(pool.id, { force: true }).catch(() => undefined);
    }
  }, 240_000);

  it('refuses another project’s extension (404) and a selector with both id and name (400)', async () => {
    const stored = await kernel.extensions.upload({ file: await toFile(await markerZip(), 'm.zip'), name: unique('theirs') });
    const project = await kernel.projects.create({ name: unique('elsewhere') });
    const other = service.client(undefined, { defaultHeaders: { 'X-Kernel-Project-Id': project.id } });
    await rejection(other.browserPools.create({ size: 1, extensions: [{ id: stored.id }] }), NotFoundError);
    await rejection(other.browserPools.create({ size: 1, extensions: [{ id: stored.id, name: 'x' }] }), BadRequestError);
    const pools: string[] = [];
    for await (const p of other.browserPools.list()) pools.push(p.id);
    expect(pools).toEqual([]);
  });
});
