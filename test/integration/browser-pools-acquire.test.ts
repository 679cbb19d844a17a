import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import { eventually } from '../support/eventually.js';
import { rawTar } from '../support/raw-tar.js';
import { archiveRequest } from './browsers-profile.fixtures.js';
import type { HttpClient, HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { leaseIdleBrowser, leaseIdleBrowsers } from '../../api/src/modules/browser-pools/browsers-store.js';
import { createPool, expectError, ORG_CAP, type Pool } from './browser-pools.fixtures.js';
import { FakeAgent, FakeRuntime, newProject, useRuntime } from './browsers.fixtures.js';

/*
 * Acquire, release, flush and delete over HTTP, with the pool's fill running, against a
 * real Postgres. The browsers are the stand-in runtime's (no Chromium here: these tests
 * are about who holds which row, the queue and the answers); pool tests with real
 * Chromium and CDP are in browser-pools-leases.test.ts.
 */

let app: TestApp;
let agent: FakeAgent;
let runtime: FakeRuntime;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, settings: { orgMaxConcurrentSessions: ORG_CAP } });
  agent = new FakeAgent();
  runtime = new FakeRuntime(await agent.listen());
  useRuntime(app, runtime);
  await app.services.pools.start({ intervalMs: 100 });
});
afterAll(async () => {
  await app.services.pools.stop();
  await app?.close();
  await agent?.close();
});

interface Lease {
  session_id: string;
  cdp_ws_url: string;
  name?: string;
  tags: Record<string, string>;
  timeout_seconds: number;
  start_url?: string;
  pool?: { id: string; name?: string };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A pool of the given size (filled at once) in a fresh project, once it is full. */
async function warmPool(size: number, extra: Record<string, unknown> = {}): Promise<{ client: HttpClient; pool: Pool }> {
  const { http: client } = await newProject(app.tenant.http);
  const pool = await createPool(client, { size, headless: true, fill_rate_per_minute: 6000, ...extra });
  await eventually(async () => (await client.get<Pool>(`/browser_pools/${pool.id}`)).body, { timeoutMs: 10_000, intervalMs: 25, what: 'pool fill', accept: (p) => p.available_count === size });
  return { client, pool };
}

const acquire = (client: HttpClient, pool: string, body: Record<string, unknown> = {}) =>
  client.post<Lease>(`/browser_pools/${encodeURIComponent(pool)}/acquire`, body);

async function liveRows(poolId: string) {
  const { rows } = await app.deps.db.query<{ id: string; leased_at: Date | null; name: string | null; deleted_reason: string | null }>(
    'SELECT id, leased_at, name, deleted_reason FROM browser_sessions WHERE pool_id = $1 AND deleted_at IS NULL ORDER BY id',
    [poolId],
  );
  return rows;
}

async function endedRows(poolId: string) {
  const { rows } = await app.deps.db.query<{ id: string; deleted_reason: string }>(
    'SELECT id, deleted_reason FROM browser_sessions WHERE pool_id = $1 AND deleted_at IS NOT NULL ORDER BY id',
    [poolId],
  );
  return rows;
}

/** How the CDP proxy answers an upgrade with this URL: 101 or the refusal's status. */
function upgradeStatus(cdpUrl: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(cdpUrl.replace(/^ws:\/\/[^/]+/, app.url.replace(/^http/, 'ws')));
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

describe('warm fill', () => {
  it('fills a new pool to its size with idle browsers nobody sees as sessions', async () => {
    const launchedBefore = runtime.launched.length;
    const { client, pool } = await warmPool(3, { name: 'filled', start_url: 'https://example.test/warm' });
    const live = await liveRows(pool.id);
    expect(live).toHaveLength(3);
    expect(live.every((r) => r.leased_at === null)).toBe(true);
    const specs = runtime.launched.slice(launchedBefore).filter((s) => s.labels['browserplane.dev/pool'] === pool.id);
    expect(specs).toHaveLength(3);
    expect(specs[0]).toMatchObject({ headless: true, startUrl: 'https://example.test/warm' });
    // Idle pool browsers are nobody's session yet.
    expect((await client.get<unknown[]>('/browsers')).body).toEqual([]);
    expectError(await client.get(`/browsers/${live[0]!.id}`), 404, 'not_found');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 3, acquired_count: 0 });
  });

  it('replaces a browser that ends, and shrinks to a smaller size', async () => {
    const { client, pool } = await warmPool(3);
    const [first] = await liveRows(pool.id);
    await app.deps.db.query(`UPDATE browser_sessions SET deleted_at = now(), deleted_reason = 'browser_crashed' WHERE id = $1`, [first!.id]);
    const refilled = await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'replacement', accept: (rows) => rows.length === 3 && !rows.some((r) => r.id === first!.id) });
    expect(refilled).toHaveLength(3);
    expect((await client.patch(`/browser_pools/${pool.id}`, { size: 1 })).status).toBe(200);
    await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'shrink', accept: (rows) => rows.length === 1 });
    expect((await endedRows(pool.id)).filter((r) => r.deleted_reason === 'pool_shrunk')).toHaveLength(2);
  });

  it('stays within the project’s concurrent session cap', async () => {
    const { http: client } = await newProject(app.tenant.http, { max_concurrent_sessions: 2 });
    const pool = await createPool(client, { size: 4, headless: true, fill_rate_per_minute: 6000 });
    await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'fill to the cap', accept: (rows) => rows.length === 2 });
    await sleep(400);
    expect(await liveRows(pool.id)).toHaveLength(2);
  });
});

describe('POST /browser_pools/{id_or_name}/acquire', () => {
  it('leases a distinct browser to each of many concurrent acquirers, and 204s the rest', async () => {
    const { client, pool } = await warmPool(5);
    const answers = await Promise.all(Array.from({ length: 25 }, () => acquire(client, pool.id, { acquire_timeout_seconds: 0 })));
    const leased = answers.filter((a) => a.status === 200);
    expect(leased).toHaveLength(5);
    expect(answers.filter((a) => a.status === 204)).toHaveLength(20);
    expect(answers.filter((a) => a.status === 204).every((a) => a.text === '')).toBe(true);
    const ids = leased.map((a) => a.body.session_id);
    expect(new Set(ids).size).toBe(5);
    expect((await liveRows(pool.id)).every((r) => r.leased_at !== null)).toBe(true);
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 0, acquired_count: 5 });
    // Leased browsers are sessions now, with their pool.
    const listed = (await client.get<Lease[]>('/browsers')).body;
    expect(listed.map((s) => s.session_id).sort()).toEqual([...ids].sort());
    expect(listed[0]!.pool).toEqual({ id: pool.id });
    // /metrics counts pool browsers by state from the same rows.
    const metrics = (await app.client().get('/metrics')).text;
    expect(metrics).toMatch(new RegExp(`^browserplane_pool_browsers\\{pool="${pool.id}",state="leased"\\} 5$`, 'm'));
    expect(metrics).toMatch(new RegExp(`^browserplane_pool_browsers\\{pool="${pool.id}",state="idle"\\} 0$`, 'm'));
  });

  it('answers concurrent acquires that share a statement each with its own browser, tags and start_url', async () => {
    const { client, pool } = await warmPool(8);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => acquire(client, pool.id, { tags: { n: String(i) }, ...(i % 2 ? { start_url: `https://example.test/${i}` } : {}) })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(new Set(answers.map((a) => a.body.session_id)).size).toBe(8);
    const { rows } = await app.deps.db.query<{ id: string; tags: Record<string, string>; start_url: string | null }>(
      'SELECT id, tags, start_url FROM browser_sessions WHERE pool_id = $1 AND leased_at IS NOT NULL',
      [pool.id],
    );
    const stored = new Map(rows.map((r) => [r.id, r]));
    answers.forEach((a, i) => {
      expect(a.body.tags).toEqual({ n: String(i) });
      expect(stored.get(a.body.session_id)).toMatchObject({ tags: { n: String(i) }, start_url: i % 2 ? `https://example.test/${i}` : null });
      expect(a.body.start_url).toBe(i % 2 ? `https://example.test/${i}` : undefined);
    });
  });

  it('applies the lease’s name, tags, start_url and the pool’s timeout to this lease only', async () => {
    const { client, pool } = await warmPool(1, { name: 'leasing', timeout_seconds: 120 });
    const res = await acquire(client, 'leasing', { name: 'worker-1', tags: { team: 'a' }, start_url: 'https://example.test/lease' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ name: 'worker-1', tags: { team: 'a' }, timeout_seconds: 120, start_url: 'https://example.test/lease', pool: { id: pool.id, name: 'leasing' } });
    expect(runtime.resets.at(-1)).toEqual({ browserId: res.body.session_id, startUrl: 'https://example.test/lease' });
    expect((await client.get<Lease>('/browsers/worker-1')).body.session_id).toBe(res.body.session_id);

    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: res.body.session_id })).status).toBe(204);
    const again = await acquire(client, pool.id, {});
    expect(again.status).toBe(200);
    expect(again.body.session_id).toBe(res.body.session_id);
    expect(again.body.name).toBeUndefined();
    expect(again.body.tags).toEqual({});
    expect(again.body.start_url).toBeUndefined();
  });

  it('refuses a lease name an active session has (409) and leases nothing', async () => {
    const { client, pool } = await warmPool(2);
    expect((await acquire(client, pool.id, { name: 'taken' })).status).toBe(200);
    expectError(await acquire(client, pool.id, { name: 'TAKEN' }), 409, 'browser_name_taken');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 1, acquired_count: 1 });
  });

  it('answers 204 when the wait ends without a browser, after acquire_timeout_seconds', async () => {
    const { client, pool } = await warmPool(1);
    expect((await acquire(client, pool.id)).status).toBe(200);
    const t0 = Date.now();
    const res = await acquire(client, pool.id, { acquire_timeout_seconds: 1 });
    expect(res.status).toBe(204);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('serves waiters first come, first served', async () => {
    const { client, pool } = await warmPool(1);
    const holder = await acquire(client, pool.id);
    const order: number[] = [];
    const waiters: Promise<HttpResponse<Lease>>[] = [];
    for (let i = 0; i < 3; i++) {
      waiters.push(
        acquire(client, pool.id, { acquire_timeout_seconds: 20 }).then((res) => {
          order.push(i);
          return res;
        }),
      );
      await sleep(150); // arrival order is the order the service saw them in
    }
    let current = holder.body.session_id;
    for (let i = 0; i < 3; i++) {
      expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: current })).status).toBe(204);
      const served = await waiters[i]!;
      expect(served.status).toBe(200);
      current = served.body.session_id;
    }
    expect(order).toEqual([0, 1, 2]);
  });

  it('rejects bad input with 400 and unknown or foreign pools with 404, leasing nothing', async () => {
    const { client, pool } = await warmPool(1, { name: 'guarded' });
    for (const body of [
      { acquire_timeout_seconds: -1 },
      { acquire_timeout_seconds: 'soon' },
      { tags: { 'bad key!': 'x'.repeat(300) } },
      { name: 'x'.repeat(300) },
      { start_url: 'not a url' },
      { surprise: true },
    ]) {
      expectError(await acquire(client, pool.id, body), 400, 'invalid_request');
    }
    expectError(await acquire(client, 'no-such-pool'), 404, 'not_found');
    const other = await app.newTenant('acquire-other');
    expectError(await acquire(other.http, pool.id), 404, 'not_found');
    expectError(await acquire(other.http, 'guarded'), 404, 'not_found');
    expectError(await other.http.post(`/browser_pools/${pool.id}/flush`), 404, 'not_found');
    expectError(await other.http.post(`/browser_pools/${pool.id}/release`, { session_id: (await liveRows(pool.id))[0]!.id }), 404, 'not_found');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 1, acquired_count: 0 });
  });
});

describe('POST /browser_pools/{id_or_name}/release', () => {
  it('with reuse resets the browser, revokes the old lease’s URL and returns it to the pool', async () => {
    const { client, pool } = await warmPool(1, { start_url: 'https://example.test/home' });
    const lease = (await acquire(client, pool.id)).body;
    expect(await upgradeStatus(lease.cdp_ws_url)).toBe(101);
    const resetsBefore = runtime.resets.length;
    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: lease.session_id })).status).toBe(204);
    expect(runtime.resets.slice(resetsBefore)).toEqual([{ browserId: lease.session_id, startUrl: 'https://example.test/home' }]);
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 1, acquired_count: 0 });
    expect(await upgradeStatus(lease.cdp_ws_url)).toBe(403);
    expectError(await client.get(`/browsers/${lease.session_id}`), 404, 'not_found');
    // The next lease has its own URL; the first one stays refused.
    const next = (await acquire(client, pool.id)).body;
    expect(next.session_id).toBe(lease.session_id);
    expect(await upgradeStatus(next.cdp_ws_url)).toBe(101);
    expect(await upgradeStatus(lease.cdp_ws_url)).toBe(403);
  });

  it('with reuse false, or when the reset fails, ends the browser and warms a new one', async () => {
    const { client, pool } = await warmPool(1);
    const first = (await acquire(client, pool.id)).body;
    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: first.session_id, reuse: false })).status).toBe(204);
    expect(runtime.terminated).toContain(first.session_id);
    const [second] = await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'replacement', accept: (rows) => rows.length === 1 && rows[0]!.id !== first.session_id });
    expect(await endedRows(pool.id)).toEqual([{ id: first.session_id, deleted_reason: 'pool_released' }]);

    await eventually(async () => (await client.get<Pool>(`/browser_pools/${pool.id}`)).body, { timeoutMs: 10_000, intervalMs: 25, what: 'warm', accept: (p) => p.available_count === 1 });
    expect((await acquire(client, pool.id)).body.session_id).toBe(second!.id);
    runtime.failResetWith = new Error('reset refused');
    try {
      expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: second!.id })).status).toBe(204);
    } finally {
      delete runtime.failResetWith;
    }
    expect((await endedRows(pool.id)).find((r) => r.id === second!.id)?.deleted_reason).toBe('pool_reset_failed');
    await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'replacement', accept: (rows) => rows.length === 1 && rows[0]!.id !== second!.id });
  });

  it('404s a session that is not leased from this pool, 400s a bad body, and changes nothing', async () => {
    const { client, pool } = await warmPool(1);
    const { pool: otherPool } = await warmPool(1);
    const idle = (await liveRows(pool.id))[0]!.id;
    expectError(await client.post(`/browser_pools/${pool.id}/release`, { session_id: idle }), 404, 'not_found');
    expectError(await client.post(`/browser_pools/${pool.id}/release`, { session_id: 'bs_nope' }), 404, 'not_found');
    const lease = (await acquire(client, pool.id)).body;
    expectError(await client.post(`/browser_pools/${otherPool.id}/release`, { session_id: lease.session_id }), 404, 'not_found');
    expectError(await client.post(`/browser_pools/${pool.id}/release`, {}), 400, 'invalid_request');
    expectError(await client.post(`/browser_pools/${pool.id}/release`, { session_id: lease.session_id, reuse: 'yes' }), 400, 'invalid_request');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 0, acquired_count: 1 });
  });
});

describe('flush, PATCH discard_all_idle and DELETE', () => {
  it('flush ends idle browsers only and the pool refills', async () => {
    const { client, pool } = await warmPool(3);
    const lease = (await acquire(client, pool.id)).body;
    const idle = (await liveRows(pool.id)).filter((r) => r.leased_at === null).map((r) => r.id);
    expect((await client.post(`/browser_pools/${pool.id}/flush`)).status).toBe(204);
    const ended = await endedRows(pool.id);
    expect(ended.map((r) => r.id).sort()).toEqual([...idle].sort());
    expect(ended.every((r) => r.deleted_reason === 'pool_flushed')).toBe(true);
    const refilled = await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'refill', accept: (rows) => rows.length === 3 && rows.filter((r) => r.leased_at === null).length === 2 });
    expect(refilled.map((r) => r.id)).toContain(lease.session_id);
    expect(refilled.some((r) => idle.includes(r.id))).toBe(false);
  });

  it('PATCH with discard_all_idle replaces the idle browsers with the new configuration', async () => {
    const { client, pool } = await warmPool(2);
    const before = (await liveRows(pool.id)).map((r) => r.id);
    expect((await client.patch(`/browser_pools/${pool.id}`, { stealth: true, discard_all_idle: true })).status).toBe(200);
    const after = await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'rebuild', accept: (rows) => rows.length === 2 && rows.every((r) => !before.includes(r.id)) });
    const newest = runtime.launched.filter((s) => after.some((r) => r.id === s.browserId));
    expect(newest.every((s) => s.stealth)).toBe(true);
  });

  it('DELETE refuses while a browser is leased; force ends every browser and turns waiters away', async () => {
    const { client, pool } = await warmPool(1);
    const lease = (await acquire(client, pool.id)).body;
    const conflict = await client.delete(`/browser_pools/${pool.id}`, {});
    expectError(conflict, 409, 'pool_has_leases');
    expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ acquired_count: 1 });
    const waiting = acquire(client, pool.id, { acquire_timeout_seconds: 20 });
    await sleep(200);
    expect((await client.delete(`/browser_pools/${pool.id}`, { force: true })).status).toBe(204);
    expectError(await waiting, 404, 'not_found');
    expect(runtime.terminated).toContain(lease.session_id);
    expect(await liveRows(pool.id)).toEqual([]);
    expect((await endedRows(pool.id)).every((r) => r.deleted_reason === 'pool_deleted')).toBe(true);
    expectError(await client.get(`/browser_pools/${pool.id}`), 404, 'not_found');
  });
});

describe('lease idle timeout and refresh_on_profile_update', () => {
  it('ends a lease idle for the pool’s timeout_seconds and warms a replacement, but never times out a browser waiting in the pool', async () => {
    const { client, pool } = await warmPool(2, { timeout_seconds: 30 });
    const lease = (await acquire(client, pool.id)).body;
    const idle = (await liveRows(pool.id)).find((r) => r.leased_at === null)!.id;
    agent.idleSince = new Date(Date.now() - 3_600_000); // the agent has had no client for an hour
    // The reaper looks 31 s ahead: past the lease's 30 s, long past any idle pool browser's start.
    const later = { now: () => new Date(Date.now() + 31_000) };
    await new IdleReaper({ ...app.deps, clock: later }).tick();
    expect((await endedRows(pool.id)).find((r) => r.id === lease.session_id)?.deleted_reason).toBe('idle_timeout');
    expect((await liveRows(pool.id)).map((r) => r.id)).toContain(idle);
    await eventually(() => liveRows(pool.id), { timeoutMs: 10_000, intervalMs: 25, what: 'replacement', accept: (rows) => rows.length === 2 && rows.every((r) => r.id !== lease.session_id) });
  });

  it('rebuilds the idle browsers of pools that refresh on a profile when a session saves it', async () => {
    const { http: client } = await newProject(app.tenant.http);
    expect((await client.post('/profiles', { name: 'shared-login' })).status).toBe(200);
    const refreshing = await createPool(client, { size: 2, headless: true, fill_rate_per_minute: 6000, profile: { name: 'shared-login' } });
    const fixed = await createPool(client, { size: 1, headless: true, fill_rate_per_minute: 6000, profile: { name: 'shared-login' }, refresh_on_profile_update: false });
    expect(refreshing.browser_pool_config.refresh_on_profile_update).toBe(true);
    for (const [p, size] of [[refreshing, 2], [fixed, 1]] as const) {
      await eventually(async () => (await client.get<Pool>(`/browser_pools/${p.id}`)).body, { timeoutMs: 10_000, intervalMs: 25, what: 'fill', accept: (b) => b.available_count === size });
    }
    const before = (await liveRows(refreshing.id)).map((r) => r.id);
    const fixedBefore = (await liveRows(fixed.id)).map((r) => r.id);
    const leased = (await acquire(client, refreshing.id)).body.session_id;

    // A session writes the profile back, as its agent does when it ends.
    const writer = (await client.post<Lease>('/browsers', { headless: true, profile: { name: 'shared-login', save_changes: true } })).body;
    const token = (await createCdpTokens(app.deps).issue(writer.session_id, 'profile')).token;
    const saved = await archiveRequest(app.url, writer.session_id, token, {
      method: 'PUT',
      body: rawTar([{ path: 'Default/', type: 'Directory' }, { path: 'Default/Preferences', body: '{"saved":2}' }]),
    });
    expect(saved.status).toBe(200);

    const after = await eventually(() => liveRows(refreshing.id), { timeoutMs: 10_000, intervalMs: 25, what: 'rebuild', accept: (rows) => rows.length === 2 && rows.filter((r) => before.includes(r.id)).length === 1 });
    // The leased browser is left to its holder; the idle one was rebuilt.
    expect(after.map((r) => r.id)).toContain(leased);
    expect((await endedRows(refreshing.id)).map((r) => r.deleted_reason)).toEqual(['pool_refreshed']);
    expect((await liveRows(fixed.id)).map((r) => r.id)).toEqual(fixedBefore);
  });
});

describe('lease commits (BROWSERPLANE_POOL_LEASE_COMMIT)', () => {
  const commitModeAfterLease = async (poolId: string, fastCommit: boolean) => {
    const tx = await app.database.db.connect();
    try {
      await tx.query('BEGIN');
      const row = await leaseIdleBrowser(tx, { id: poolId }, { name: null, tags: {}, startUrl: null, fastCommit }, new Date());
      const inside = (await tx.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
      await tx.query('ROLLBACK');
      const after = (await tx.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
      return { leased: row?.id, inside, after };
    } finally {
      tx.release();
    }
  };

  it('one statement leases a browser per lease, in order, each with its own values, and none past the idle ones', async () => {
    const { pool } = await warmPool(3, { telemetry: { enabled: true } });
    const lease = (n: number, telemetry?: null) => ({ name: null, tags: { n: String(n) }, startUrl: n === 1 ? 'https://example.test/one' : null, ...(telemetry === null ? { telemetry } : {}) });
    const rows = await leaseIdleBrowsers(app.deps.db, { id: pool.id }, [lease(0), lease(1, null), lease(2), lease(3)], new Date());
    expect(rows).toHaveLength(4);
    expect(rows[3]).toBeUndefined();
    expect(rows.slice(0, 3).map((r) => r?.tags)).toEqual([{ n: '0' }, { n: '1' }, { n: '2' }]);
    expect(rows.map((r) => r?.start_url ?? null)).toEqual([null, 'https://example.test/one', null, null]);
    expect(rows[1]!.telemetry).toBeNull();
    expect(rows[0]!.telemetry).not.toBeNull();
    expect(new Set(rows.slice(0, 3).map((r) => r!.id)).size).toBe(3);
    expect(rows.slice(0, 3).every((r) => r!.leased_at !== null && r!.lease_seq === 1)).toBe(true);
    expect(await leaseIdleBrowsers(app.deps.db, { id: pool.id }, [lease(4)], new Date())).toEqual([undefined]);
  });

  it('fast: the lease does not wait for its commit to reach disk, for its own transaction only', async () => {
    const { pool } = await warmPool(1);
    const fast = await commitModeAfterLease(pool.id, true);
    expect(fast.leased).toEqual(expect.any(String));
    expect(fast).toMatchObject({ inside: 'off', after: 'on' });
    const durable = await commitModeAfterLease(pool.id, false);
    expect(durable).toMatchObject({ leased: fast.leased, inside: 'on', after: 'on' });
  });

  it('fast: an acquire over HTTP leases as a durable one does', async () => {
    const { client, pool } = await warmPool(1);
    app.deps.settings.poolLeaseCommit = 'fast';
    try {
      const lease = await acquire(client, pool.id, { tags: { mode: 'fast' } });
      expect(lease.status).toBe(200);
      expect(lease.body.tags).toEqual({ mode: 'fast' });
      expect((await client.get<Pool>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 0, acquired_count: 1 });
    } finally {
      app.deps.settings.poolLeaseCommit = 'durable';
    }
  });
});
