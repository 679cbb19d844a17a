import type Kernel from '@onkernel/sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { unique } from '../e2e/support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { leaseFrom, poolAt, sdkFor } from './browser-pools-leases.fixtures.js';
import { openLogs, readLogs } from './browser-logs.fixtures.js';

/**
 * Log streams across a pool release with reuse (agent/src/reset.ts): the previous holder's
 * streams end and the lines kept of the browser's own processes are forgotten, with a real
 * pool browser (agent, Chromium, Postgres). Nothing is faked.
 */

let app: TestApp;
let kernel: Kernel;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, background: { reaperIntervalMs: 250, poolIntervalMs: 250 } });
  kernel = sdkFor(app);
}, 120_000);
afterAll(async () => {
  await app?.close();
});

it("ends the previous holder's log streams at a release and forgets the lines it could have read", async () => {
  const pool = await kernel.browserPools.create({ name: unique('logs'), size: 1, headless: true, fill_rate_per_minute: 6000 });
  try {
    await poolAt(kernel, pool.id, { available: 1, acquired: 0 });
    const lease = await leaseFrom(kernel, pool.id);
    const http = app.tenant.http;
    const before = await readLogs(http, lease.session_id, { source: 'supervisor', supervisor_process: 'agent' });
    expect(before.some((line) => line.includes('"msg":"browser ready"'))).toBe(true);
    const held = await openLogs(http, lease.session_id, { source: 'supervisor', follow: 'true' });
    expect(held.res.status).toBe(200);
    await held.frame(1);

    await kernel.browserPools.release(pool.id, { session_id: lease.session_id, reuse: true });
    await held.ended;
    const next = await leaseFrom(kernel, pool.id);
    expect(next.session_id).toBe(lease.session_id);
    const after = await readLogs(http, next.session_id, { source: 'supervisor' });
    expect(after.some((line) => line.includes('"msg":"browser ready"'))).toBe(false);
    expect(after.some((line) => line.includes('spawned:'))).toBe(false);
  } finally {
    await kernel.browserPools.delete(pool.id, { force: true }).catch(() => undefined);
  }
}, 120_000);
