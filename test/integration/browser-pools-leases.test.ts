import type Kernel from '@onkernel/sdk';
import { ConflictError, NotFoundError } from '@onkernel/sdk';
import type { BrowserPool } from '@onkernel/sdk/resources/browser-pools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { unique } from '../e2e/support/sdk.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  acquire,
  agentBrowserDir,
  agentBrowserPid,
  CdpSocket,
  closesWithin,
  leaseFrom,
  poolAt,
  PoolRows,
  refusal,
  sdkFor,
  sleep,
  type Lease,
} from './browser-pools-leases.fixtures.js';

/**
 * Pool leases with real Chromium: the app in-process with its reaper and pool reconciler
 * running on short intervals, driven through the SDK, each lease checked in the database
 * and over CDP at the browser itself.
 */

let app: TestApp;
let kernel: Kernel;
let rows: PoolRows;

beforeAll(async () => {
  app = await startTestApp({
    clock: systemClock,
    settings: { orgMaxConcurrentSessions: 50 },
    background: { reaperIntervalMs: 250, poolIntervalMs: 250 },
  });
  kernel = sdkFor(app);
  rows = new PoolRows(app.database.url);
});
afterAll(async () => {
  await rows?.close();
  await app?.close();
});

/** A headless pool that fills at once, full before the test goes on; deleted (force) after `use`. */
async function withPool(size: number, use: (pool: BrowserPool) => Promise<void>, extra: { timeout_seconds?: number } = {}) {
  const pool = await kernel.browserPools.create({ name: unique('leases'), size, headless: true, fill_rate_per_minute: 6000, ...extra });
  try {
    await poolAt(kernel, pool.id, { available: size, acquired: 0 });
    await use(pool);
  } finally {
    await kernel.browserPools.delete(pool.id, { force: true }).catch(() => undefined);
  }
}

/** Acquires, retrying on 204, until `deadline`. */
async function acquireBefore(pool: string, deadline: number, onEmpty: () => void): Promise<Lease> {
  for (;;) {
    const lease = await acquire(kernel, pool, { acquire_timeout_seconds: 20 });
    if (lease) return lease;
    onEmpty();
    if (Date.now() > deadline) throw new Error('no browser within the deadline');
  }
}

describe('pool leases with real browsers', () => {
  it('gives 200 concurrent acquirers of a pool of 5 a distinct live browser each time, in the database and over CDP', async () => {
    await withPool(5, async (pool) => {
      const warm = (await rows.live(pool.id)).map((r) => r.id);
      expect(warm).toHaveLength(5);
      const held = new Map<string, number>();
      const heldPids = new Map<string, number>();
      const pidOf = new Map<string, string>();
      const seen = new Set<string>();
      const waits: number[] = [];
      let empty = 0;
      const started = Date.now();
      const deadline = started + 150_000;

      const acquirer = async (n: number) => {
        const asked = Date.now();
        const lease = await acquireBefore(pool.id, deadline, () => empty++);
        waits.push(Date.now() - asked);
        const id = lease.session_id;
        expect(held.get(id), `acquirer ${n} got ${id} while acquirer ${held.get(id)} holds it`).toBeUndefined();
        held.set(id, n);
        seen.add(id);
        try {
          expect(lease.pool).toEqual({ id: pool.id, name: pool.name });
          const row = await rows.session(id);
          expect(row, `row of ${id}`).toMatchObject({ pool_id: pool.id, deleted_at: null, phase: 'running' });
          expect(row!.leased_at, `${id} is leased in the database`).not.toBeNull();
          const live = await rows.live(pool.id);
          expect(live.length, 'live browsers of the pool').toBeLessThanOrEqual(5);

          // The browser at the end of cdp_ws_url is the one the database names, and no
          // other current holder is talking to it.
          if (!pidOf.has(id)) pidOf.set(id, await agentBrowserDir(app, row!));
          const cdp = await CdpSocket.open(lease.cdp_ws_url);
          try {
            const pid = await cdp.browserDir();
            expect(pid, `${id}: CDP reached Chromium ${pid}, its agent runs ${pidOf.get(id)}`).toBe(pidOf.get(id));
            expect(heldPids.get(pid), `acquirer ${n} reached Chromium ${pid}, which acquirer ${heldPids.get(pid)} holds`).toBeUndefined();
            heldPids.set(pid, n);
            await sleep(Math.random() * 30);
            heldPids.delete(pid);
          } finally {
            await cdp.close();
          }
        } finally {
          // Forgotten before the release: from then on another acquirer may rightly get it.
          held.delete(id);
          await kernel.browserPools.release(pool.id, { session_id: id, reuse: true });
        }
      };

      const results = await Promise.allSettled(Array.from({ length: 200 }, (_, n) => acquirer(n)));
      const failures = results.flatMap((r, n) => (r.status === 'rejected' ? [`acquirer ${n}: ${String(r.reason)}`] : []));
      expect(failures).toEqual([]);
      expect(waits).toHaveLength(200);
      // reuse keeps the browsers (a failed reset would have replaced one): the same five served every lease.
      expect((await rows.ofPool(pool.id)).filter((r) => r.deleted_at !== null)).toEqual([]);
      expect([...seen].sort()).toEqual([...warm].sort());
      expect(new Set(pidOf.values()).size).toBe(5);

      const after = await poolAt(kernel, pool.id, { available: 5, acquired: 0 }, 30_000);
      expect(after).toMatchObject({ available_count: 5, acquired_count: 0 });
      const live = await rows.live(pool.id);
      expect(live.map((r) => r.id).sort()).toEqual([...warm].sort());
      expect(live.every((r) => r.leased_at === null)).toBe(true);
      const sorted = [...waits].sort((a, b) => a - b);
      console.info(
        `200 leases of a pool of 5 in ${Date.now() - started} ms; acquire wait p50 ${sorted[100]} ms, p99 ${sorted[197]} ms, max ${sorted[199]} ms; ${empty} answers 204`,
      );
    });
  }, 240_000);

  it('hands the browser a client releases to the acquirer waiting for it; the old lease’s URL is refused', async () => {
    await withPool(1, async (pool) => {
      const a = await leaseFrom(kernel, pool.id);
      const aCdp = await CdpSocket.open(a.cdp_ws_url);
      const aPid = await aCdp.browserDir();
      let settled = false;
      const waiting = acquire(kernel, pool.id, { acquire_timeout_seconds: 30 }).finally(() => (settled = true));
      await sleep(1_000);
      expect(settled, 'the second acquire waits while the only browser is leased').toBe(false);

      // The release answers once the browser is reset and idle again; the waiter gets it then.
      await kernel.browserPools.release(pool.id, { session_id: a.session_id });
      const released = Date.now();
      const b = await waiting;
      expect(Date.now() - released, 'the waiter is served within a few seconds of the release').toBeLessThan(5_000);
      expect(b?.session_id).toBe(a.session_id);

      // The release closed A's connection; A's URL is bound to its lease and refused now.
      await closesWithin(aCdp, 10_000);
      expect(await refusal(a.cdp_ws_url)).toBeGreaterThanOrEqual(400);
      const bCdp = await CdpSocket.open(b!.cdp_ws_url);
      try {
        expect(await bCdp.browserDir()).toBe(aPid);
      } finally {
        await bCdp.close();
      }
      await kernel.browserPools.release(pool.id, { session_id: b!.session_id });
    });
  }, 120_000);

  it('answers 204 (null through the SDK) once acquire_timeout_seconds passes with no browser free', async () => {
    await withPool(1, async (pool) => {
      const a = await leaseFrom(kernel, pool.id);
      const asked = Date.now();
      const none = await acquire(kernel, pool.id, { acquire_timeout_seconds: 2 });
      const waited = Date.now() - asked;
      expect(none).toBeNull();
      expect(waited).toBeGreaterThanOrEqual(1_900);
      expect(waited).toBeLessThan(10_000);
      // The waiter that gave up is gone: the next release leaves the browser idle.
      await kernel.browserPools.release(pool.id, { session_id: a.session_id });
      await poolAt(kernel, pool.id, { available: 1, acquired: 0 }, 10_000);
    });
  }, 120_000);

  it('refuses to delete a pool with a lease (409 pool_has_leases, nothing changed); force ends the lease and closes its CDP socket', async () => {
    await withPool(2, async (pool) => {
      const lease = await leaseFrom(kernel, pool.id);
      const cdp = await CdpSocket.open(lease.cdp_ws_url);
      const refused = await kernel.browserPools.delete(pool.id).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(ConflictError);
      expect((refused as ConflictError).error).toMatchObject({ code: 'pool_has_leases', message: expect.any(String) });
      expect(await kernel.browserPools.retrieve(pool.id)).toMatchObject({ available_count: 1, acquired_count: 1 });
      expect(await rows.session(lease.session_id)).toMatchObject({ deleted_at: null, leased_at: expect.any(Date) });
      expect(await rows.live(pool.id)).toHaveLength(2);
      expect(cdp.isOpen).toBe(true);
      expect((await cdp.send<{ product: string }>('Browser.getVersion')).product).toMatch(/Chrome/);

      await kernel.browserPools.delete(pool.id, { force: true });
      await closesWithin(cdp, 15_000);
      await expect(kernel.browserPools.retrieve(pool.id)).rejects.toBeInstanceOf(NotFoundError);
      const ended = await eventually(
        async () => {
          const all = await rows.ofPool(pool.id);
          return all.every((r) => r.deleted_at !== null) ? all : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: 'every browser of the deleted pool ended', retryErrors: true },
      );
      expect(ended.map((r) => r.deleted_reason)).toEqual(['pool_deleted', 'pool_deleted']);
      await eventually(
        async () => {
          const observed = await app.runtime.observe(lease.session_id);
          return observed === undefined || observed.phase === 'Gone' || observed.phase === 'Failed' ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: 'the leased browser gone from the runtime', retryErrors: true },
      );
    });
  }, 120_000);

  it('flush ends the idle browsers only and refills the pool with new ones', async () => {
    await withPool(3, async (pool) => {
      const lease = await leaseFrom(kernel, pool.id);
      const cdp = await CdpSocket.open(lease.cdp_ws_url);
      const idleBefore = (await rows.idle(pool.id)).map((r) => r.id);
      expect(idleBefore).toHaveLength(2);

      await kernel.browserPools.flush(pool.id);
      for (const id of idleBefore) {
        const row = await eventually(
          async () => {
            const found = await rows.session(id);
            return found?.deleted_at ? found : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 100, what: `${id} ended by the flush`, retryErrors: true },
        );
        expect(row.deleted_reason).toBe('pool_flushed');
      }
      await poolAt(kernel, pool.id, { available: 2, acquired: 1 });
      const idleAfter = (await rows.idle(pool.id)).map((r) => r.id);
      expect(idleAfter).toHaveLength(2);
      expect(idleAfter.filter((id) => idleBefore.includes(id))).toEqual([]);

      // The leased browser went through the flush untouched.
      expect(cdp.isOpen).toBe(true);
      expect((await cdp.send<{ product: string }>('Browser.getVersion')).product).toMatch(/Chrome/);
      expect(await rows.session(lease.session_id)).toMatchObject({ deleted_at: null, leased_at: expect.any(Date) });
      await cdp.close();
      await kernel.browserPools.release(pool.id, { session_id: lease.session_id });
      await poolAt(kernel, pool.id, { available: 3, acquired: 0 }, 30_000);
    });
  }, 180_000);

  it('replaces an idle browser whose Chromium was killed', async () => {
    await withPool(2, async (pool) => {
      const [victim, survivor] = await rows.idle(pool.id);
      const victimDir = await agentBrowserDir(app, victim!);
      process.kill(await agentBrowserPid(app, victim!), 'SIGKILL');

      const ended = await eventually(
        async () => {
          const row = await rows.session(victim!.id);
          return row?.deleted_at ? row : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: `${victim!.id} ended after its Chromium was killed`, retryErrors: true },
      );
      expect(['browser_crashed', 'browser_gone']).toContain(ended.deleted_reason);
      await poolAt(kernel, pool.id, { available: 2, acquired: 0 });
      const idle = (await rows.idle(pool.id)).map((r) => r.id);
      expect(idle).toContain(survivor!.id);
      expect(idle).not.toContain(victim!.id);

      // The replacement is a working browser.
      const lease = await leaseFrom(kernel, pool.id);
      const cdp = await CdpSocket.open(lease.cdp_ws_url);
      try {
        expect(await cdp.browserDir()).not.toBe(victimDir);
      } finally {
        await cdp.close();
      }
      await kernel.browserPools.release(pool.id, { session_id: lease.session_id });
    });
  }, 180_000);

  it('release with reuse false ends the browser and warms a fresh one', async () => {
    await withPool(1, async (pool) => {
      const lease = await leaseFrom(kernel, pool.id);
      await kernel.browserPools.release(pool.id, { session_id: lease.session_id, reuse: false });
      const ended = await eventually(
        async () => {
          const row = await rows.session(lease.session_id);
          return row?.deleted_at ? row : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: `${lease.session_id} ended`, retryErrors: true },
      );
      expect(ended.deleted_reason).toBe('pool_released');
      await poolAt(kernel, pool.id, { available: 1, acquired: 0 });
      const next = await leaseFrom(kernel, pool.id);
      expect(next.session_id).not.toBe(lease.session_id);
      await kernel.browserPools.release(pool.id, { session_id: next.session_id });
    });
  }, 120_000);

  it('release with reuse gives the next holder a clean browser: no tabs, contexts or cookies of the last lease', async () => {
    await withPool(1, async (pool) => {
      const first = await leaseFrom(kernel, pool.id);
      const cdp = await CdpSocket.open(first.cdp_ws_url);
      await cdp.send('Target.createTarget', { url: 'about:blank#left-by-the-last-lease' });
      const { browserContextId } = await cdp.send<{ browserContextId: string }>('Target.createBrowserContext');
      await cdp.send('Storage.setCookies', { cookies: [{ name: 'left', value: '1', domain: 'lease.test', path: '/' }] });
      await kernel.browserPools.release(pool.id, { session_id: first.session_id });
      await closesWithin(cdp, 10_000);

      const second = await leaseFrom(kernel, pool.id, { acquire_timeout_seconds: 20 });
      expect(second.session_id).toBe(first.session_id);
      const again = await CdpSocket.open(second.cdp_ws_url);
      try {
        const { targetInfos } = await again.send<{ targetInfos: Array<{ url: string }> }>('Target.getTargets');
        expect(targetInfos.map((t) => t.url)).not.toContain('about:blank#left-by-the-last-lease');
        const { browserContextIds } = await again.send<{ browserContextIds: string[] }>('Target.getBrowserContexts');
        expect(browserContextIds).not.toContain(browserContextId);
        const { cookies } = await again.send<{ cookies: Array<{ name: string }> }>('Storage.getCookies');
        expect(cookies.map((c) => c.name)).not.toContain('left');
      } finally {
        await again.close();
      }
      await kernel.browserPools.release(pool.id, { session_id: second.session_id });
    });
  }, 120_000);

  it('keeps idle pool browsers out of GET /browsers; a leased one shows there with its pool and the pool’s timeout', async () => {
    await withPool(
      2,
      async (pool) => {
        const idle = (await rows.idle(pool.id)).map((r) => r.id);
        const listed = async () => {
          const ids: string[] = [];
          for await (const b of kernel.browsers.list()) ids.push(b.session_id);
          return ids;
        };
        expect((await listed()).filter((id) => idle.includes(id))).toEqual([]);
        await expect(kernel.browsers.retrieve(idle[0]!)).rejects.toBeInstanceOf(NotFoundError);

        const lease = await leaseFrom(kernel, pool.id);
        expect(lease).toMatchObject({ pool: { id: pool.id, name: pool.name }, timeout_seconds: 77 });
        const shown = await kernel.browsers.retrieve(lease.session_id);
        expect(shown).toMatchObject({ session_id: lease.session_id, pool: { id: pool.id, name: pool.name }, timeout_seconds: 77 });
        const now = await listed();
        expect(now).toContain(lease.session_id);
        expect(now.filter((id) => idle.includes(id) && id !== lease.session_id)).toEqual([]);

        await kernel.browserPools.release(pool.id, { session_id: lease.session_id });
        await expect(kernel.browsers.retrieve(lease.session_id)).rejects.toBeInstanceOf(NotFoundError);
        expect(await listed()).not.toContain(lease.session_id);
      },
      { timeout_seconds: 77 },
    );
  }, 120_000);
});
