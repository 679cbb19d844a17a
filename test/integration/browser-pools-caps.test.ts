import { describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { capPooledSessions, createPool, expectError, livePoolIds, startPoolApp, ORG_CAP } from './browser-pools.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/*
 * The size caps of pools (CONTRACT §3, §8): a project's max_pooled_sessions caps the sum
 * of its live pools' sizes, and the organisation's session cap that of all its pools.
 * A refused create or PATCH changes nothing.
 */

const ctx = startPoolApp({ clock: new FixedClock(new Date('2026-08-01T09:00:00.000Z')) });

describe('max_pooled_sessions', () => {
  it('caps the sum of the live pools’ sizes: beyond it 409 pool_size_limit_exceeded with details, nothing created', async () => {
    const project = await newProject(ctx.http);
    await capPooledSessions(ctx.http, project.id, 5);
    const a = await createPool(project.http, { size: 3 });
    const over = await project.http.post('/browser_pools', { size: 3, name: 'too-big' });
    expectError(over, 409, 'pool_size_limit_exceeded');
    expect(over.body.details).toEqual([expect.objectContaining({ code: 'max_pooled_sessions', field: 'body.size' })]);
    expect(over.headers.get('x-should-retry')).toBe('false');
    expect(await livePoolIds(project.http)).toEqual([a.id]);
    // The name of the refused pool was not taken either.
    const b = await createPool(project.http, { size: 2, name: 'too-big' });
    expect(await livePoolIds(project.http)).toEqual([b.id, a.id]);
    expectError(await project.http.post('/browser_pools', { size: 1 }), 409, 'pool_size_limit_exceeded');
    // A deleted pool gives its size back.
    expect((await project.http.delete(`/browser_pools/${a.id}`, {})).status).toBe(204);
    await createPool(project.http, { size: 3 });
  });

  it('refuses a PATCH that would pass the cap and leaves the pool as it was', async () => {
    const project = await newProject(ctx.http);
    await capPooledSessions(ctx.http, project.id, 5);
    const a = await createPool(project.http, { size: 2, name: 'grow' });
    await createPool(project.http, { size: 2 });
    const over = await project.http.patch('/browser_pools/grow', { size: 4, headless: true });
    expectError(over, 409, 'pool_size_limit_exceeded');
    expect((await project.http.get(`/browser_pools/${a.id}`)).body).toEqual(a);
    const grown = await project.http.patch('/browser_pools/grow', { size: 3 });
    expect(grown.status, grown.text).toBe(200);
    expect(grown.body.browser_pool_config.size).toBe(3);
  });

  it('admits exactly the cap out of 12 parallel creates', async () => {
    const project = await newProject(ctx.http);
    await capPooledSessions(ctx.http, project.id, 5);
    const results = await Promise.all(Array.from({ length: 12 }, () => project.http.post('/browser_pools', { size: 1 })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(5);
    const refused = results.filter((r) => r.status !== 200);
    expect(refused).toHaveLength(7);
    for (const r of refused) expectError(r, 409, 'pool_size_limit_exceeded');
    expect(await livePoolIds(project.http)).toHaveLength(5);
  });

  it('counts only the project’s own pools', async () => {
    const capped = await newProject(ctx.http);
    await capPooledSessions(ctx.http, capped.id, 2);
    const free = await newProject(ctx.http);
    await createPool(free.http, { size: 50 });
    await createPool(capped.http, { size: 2 });
  });

  it('caps the sum of all pool sizes of the organisation at its session cap (CONTRACT §3), across projects', async () => {
    const tenant = await ctx.app.newTenant('pool-org-cap');
    const a = await newProject(tenant.http);
    const b = await newProject(tenant.http);
    const big = await createPool(a.http, { size: ORG_CAP - 400 });
    const over = await b.http.post('/browser_pools', { size: 401 });
    expectError(over, 409, 'pool_size_limit_exceeded');
    expect(over.body.details).toEqual([expect.objectContaining({ code: 'org_max_concurrent_sessions', field: 'body.size' })]);
    expect(await livePoolIds(b.http)).toEqual([]);
    await createPool(b.http, { size: 400 });
    expectError(await a.http.patch(`/browser_pools/${big.id}`, { size: ORG_CAP - 399 }), 409, 'pool_size_limit_exceeded');
    // Another organisation has a cap of its own.
    await createPool((await newProject(ctx.http)).http, { size: 400 });
  });
});
