import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createPool, ORG_CAP, type Pool } from './browser-pools.fixtures.js';
import { FakeAgent, FakeRuntime, newProject, useRuntime } from './browsers.fixtures.js';

/*
 * The pool metrics at /metrics, each read by value after a real action over HTTP (fill,
 * acquire, wait, release, launch failure, delete) against a real Postgres. The browsers
 * are the stand-in runtime's: what is counted here is the pool's bookkeeping, and the
 * stand-in can fail a launch on demand, which a real Chromium cannot be made to do.
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

const scrape = async (): Promise<string> => (await app.client().get('/metrics')).text;

/** The value of one series (labels in any order), undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const got = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.keys(got).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(match[3]);
  }
  return undefined;
}

async function warmPool(client: HttpClient, size: number): Promise<Pool> {
  const pool = await createPool(client, { size, headless: true, fill_rate_per_minute: 6000 });
  await eventually(async () => (await client.get<Pool>(`/browser_pools/${pool.id}`)).body, { timeoutMs: 10_000, intervalMs: 25, what: 'pool fill', accept: (p) => p.available_count === size });
  return pool;
}

describe('pool metrics', () => {
  it('counts the fill’s launches and their durations per pool', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const pool = await warmPool(client, 3);
    // The fill's progress is in the pool: nothing starting once all are warm.
    expect((await client.get<Pool & { starting_count: number }>(`/browser_pools/${pool.id}`)).body).toMatchObject({ available_count: 3, acquired_count: 0, starting_count: 0 });
    const text = await scrape();
    expect(sample(text, 'browserplane_pool_launches_total', { pool: pool.id })).toBe(3);
    expect(sample(text, 'browserplane_pool_launch_duration_seconds_count', { pool: pool.id })).toBe(3);
    expect(sample(text, 'browserplane_pool_launch_duration_seconds_bucket', { pool: pool.id, le: '+Inf' })).toBe(3);
    expect(sample(text, 'browserplane_pool_launch_failures_total', { pool: pool.id, reason: 'browser_launch_failed' })).toBeUndefined();
  });

  it('shows a waiting acquirer, then its wait and the leases, and the release’s outcome', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const pool = await warmPool(client, 1);
    const first = await client.post<{ session_id: string }>(`/browser_pools/${pool.id}/acquire`, {});
    expect(first.status).toBe(200);
    expect(sample(await scrape(), 'browserplane_pool_leases_total', { pool: pool.id })).toBe(1);

    const second = client.post<{ session_id: string }>(`/browser_pools/${pool.id}/acquire`, { acquire_timeout_seconds: 30 });
    await eventually(scrape, { timeoutMs: 10_000, intervalMs: 25, what: 'a waiter', accept: (t) => sample(t, 'browserplane_pool_acquire_waiters', { pool: pool.id }) === 1 });
    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: first.body.session_id })).status).toBe(204);
    expect((await second).status).toBe(200);

    const text = await scrape();
    expect(sample(text, 'browserplane_pool_acquire_waiters', { pool: pool.id }) ?? 0).toBe(0);
    expect(sample(text, 'browserplane_pool_acquire_wait_seconds_count', { pool: pool.id, outcome: 'leased' })).toBe(1);
    expect(sample(text, 'browserplane_pool_acquire_wait_seconds_sum', { pool: pool.id, outcome: 'leased' })).toBeGreaterThan(0);
    expect(sample(text, 'browserplane_pool_leases_total', { pool: pool.id })).toBe(2);
    expect(sample(text, 'browserplane_pool_releases_total', { pool: pool.id, outcome: 'reused' })).toBe(1);
  });

  it('counts an acquire that waited in vain, and a release that closes the browser', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const pool = await warmPool(client, 1);
    const leased = await client.post<{ session_id: string }>(`/browser_pools/${pool.id}/acquire`, {});
    const releasedBefore = sample(await scrape(), 'browserplane_browser_sessions_ended_total', { reason: 'pool_released' }) ?? 0;
    expect((await client.post(`/browser_pools/${pool.id}/acquire`, { acquire_timeout_seconds: 1 })).status).toBe(204);
    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: leased.body.session_id, reuse: false })).status).toBe(204);
    const text = await scrape();
    expect(sample(text, 'browserplane_pool_acquire_wait_seconds_count', { pool: pool.id, outcome: 'none' })).toBe(1);
    expect(sample(text, 'browserplane_pool_acquire_wait_seconds_sum', { pool: pool.id, outcome: 'none' })).toBeGreaterThanOrEqual(0.9);
    expect(sample(text, 'browserplane_pool_releases_total', { pool: pool.id, outcome: 'closed' })).toBe(1);
    expect(sample(text, 'browserplane_pool_releases_total', { pool: pool.id, outcome: 'reused' })).toBeUndefined();
    // Counted once, by this replica, where the session ended.
    expect(sample(text, 'browserplane_browser_sessions_ended_total', { reason: 'pool_released' })).toBe(releasedBefore + 1);
  });

  it('counts a failed launch by reason, and drops a deleted pool’s series', async () => {
    const { http: client } = await newProject(app.tenant.http);
    runtime.mode = 'fail';
    let pool: Pool;
    try {
      pool = await createPool(client, { size: 1, headless: true, fill_rate_per_minute: 6000 });
      await eventually(scrape, {
        timeoutMs: 10_000,
        intervalMs: 25,
        what: 'a launch failure',
        accept: (t) => (sample(t, 'browserplane_pool_launch_failures_total', { pool: pool.id, reason: 'browser_launch_failed' }) ?? 0) >= 1,
      });
    } finally {
      runtime.mode = 'ready';
    }
    const text = await scrape();
    const failures = sample(text, 'browserplane_pool_launch_failures_total', { pool: pool.id, reason: 'browser_launch_failed' })!;
    expect(sample(text, 'browserplane_pool_launches_total', { pool: pool.id })).toBeGreaterThanOrEqual(failures);
    expect(sample(text, 'browserplane_browser_sessions_ended_total', { reason: 'launch_failed' })).toBeGreaterThanOrEqual(1);

    expect((await client.delete(`/browser_pools/${pool.id}`)).status).toBe(204);
    const after = await scrape();
    expect(after).not.toContain(`pool="${pool.id}"`);
  });

  it('counts the sessions the reaper ends by reason, once, where it ends them', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = await client.post<{ session_id: string }>('/browsers', { headless: true, timeout_seconds: 600 });
    expect(created.status, created.text).toBe(200);
    const ended = async (reason: string) => sample(await scrape(), 'browserplane_browser_sessions_ended_total', { reason }) ?? 0;
    const goneBefore = await ended('browser_gone');
    const deletedBefore = await ended('deleted');
    agent.healthy = false;
    runtime.browsers.delete(created.body.session_id);
    try {
      await new IdleReaper(app.deps).tick();
    } finally {
      agent.healthy = true;
    }
    expect(await ended('browser_gone')).toBe(goneBefore + 1);
    // A second pass finds nothing left to end: the counter does not move again.
    await new IdleReaper(app.deps).tick();
    expect(await ended('browser_gone')).toBe(goneBefore + 1);

    const other = await client.post<{ session_id: string }>('/browsers', { headless: true, timeout_seconds: 600 });
    expect((await client.delete(`/browsers/${other.body.session_id}`)).status).toBe(204);
    expect(await ended('deleted')).toBe(deletedBefore + 1);
  });
});
