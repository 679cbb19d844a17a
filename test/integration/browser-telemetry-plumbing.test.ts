import { chromium } from 'playwright-core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { eventuallyEvents, ofType, type Envelope } from './browser-telemetry.fixtures.js';

/**
 * How telemetry reaches agents the API does not create one by one: pool browsers (their
 * pool's telemetry at launch, a lease's override while leased, the pool's again after the
 * release), a browser PATCHed while it starts, and the retention sweep as a timer. Real
 * agents, real Chromium, real Postgres; the runtime is watched (spied), never replaced,
 * and its launch held back where a test needs a browser that is still starting.
 */

const PAGE = (marker: string) => `<!doctype html><title>${marker}</title><script>
  console.log('${marker}');
  fetch('/data-${marker}').then((r) => r.text()).then(() => console.log('fetched-${marker}'));
</script>`;

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;
let projectId: string;
let db: pg.Pool;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, background: { reaperIntervalMs: 250, poolIntervalMs: 250, telemetrySweepIntervalMs: 200 } });
  pages = await startTestPageServer(Object.fromEntries(['pool-one', 'pool-two', 'patched'].map((m) => [`/${m}`, PAGE(m)])));
  ({ id: projectId, http: client } = await newProject(app.tenant.http));
  db = new pg.Pool({ connectionString: app.database.url, max: 2 });
}, 60_000);
afterAll(async () => {
  vi.restoreAllMocks();
  await db?.end();
  await app?.close();
  await pages?.close();
});

/** Opens `path` of the page server in a new tab of the browser at `cdpUrl` and waits for its fetch. */
async function visit(cdpUrl: string, path: string): Promise<void> {
  const browser = await chromium.connectOverCDP(cdpUrl);
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    await page.goto(`${pages.url}${path}`);
    await page.waitForFunction((p) => performance.getEntriesByType('resource').some((e) => e.name.endsWith(`/data-${p}`)), path.slice(1));
  } finally {
    await browser.close().catch(() => undefined);
  }
}

const logged = (events: Envelope[], text: string) => ofType(events, 'console_log').some((e) => e.event.data?.text === text);
const fetchedData = (events: Envelope[], marker: string) =>
  ofType(events, 'network_request').some((e) => String(e.event.data?.url).endsWith(`/data-${marker}`));

async function poolAvailable(poolId: string, available: number): Promise<void> {
  await eventually(
    async () => {
      const res = await client.get(`/browser_pools/${poolId}`);
      return res.status === 200 && res.body.available_count === available && res.body.acquired_count === 0;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: `pool ${poolId} with ${available} idle browser(s)` },
  );
}

describe('pool browsers', () => {
  it('capture the pool’s telemetry, a lease’s override while leased, and the pool’s again after the release', async () => {
    const created = await client.post('/browser_pools', {
      name: `telemetry-${Date.now()}`,
      size: 1,
      headless: true,
      fill_rate_per_minute: 6000,
      telemetry: { browser: { console: { enabled: true } } },
    });
    expect(created.status, created.text).toBe(200);
    const poolId = created.body.id as string;
    const applied = vi.spyOn(app.deps.runtime, 'applySettings');
    try {
      await poolAvailable(poolId, 1);
      // The lease adds network, which the pool's baseline lacks.
      const first = await client.post(`/browser_pools/${poolId}/acquire`, { telemetry: { browser: { network: { enabled: true } } } });
      expect(first.status, first.text).toBe(200);
      const sessionId = first.body.session_id as string;
      await visit(first.body.cdp_ws_url, '/pool-one');
      const leased = await eventuallyEvents(client, sessionId, (events) => {
        expect(logged(events, 'fetched-pool-one')).toBe(true);
        expect(fetchedData(events, 'pool-one')).toBe(true);
      });
      expect(new Set(leased.map((e) => e.event.category))).toEqual(new Set(['console', 'network']));

      // Another project's key does not see the pool browser or its events.
      const { http: stranger } = await newProject(app.tenant.http);
      expect((await stranger.get(`/browsers/${sessionId}/telemetry/events?offset=0`)).status).toBe(404);

      applied.mockClear();
      const released = await client.post(`/browser_pools/${poolId}/release`, { session_id: sessionId });
      expect(released.status, released.text).toBe(204);
      // The agent was told the pool's categories again, not only the row.
      const baseline = applied.mock.calls.find(([id, s]) => id === sessionId && s.telemetry !== undefined);
      expect(baseline?.[1].telemetry?.categories).toEqual(['console']);
      await poolAvailable(poolId, 1);

      // The same browser, leased again without an override: the pool's console only.
      const second = await client.post(`/browser_pools/${poolId}/acquire`, {});
      expect(second.status, second.text).toBe(200);
      expect(second.body.session_id).toBe(sessionId);
      await visit(second.body.cdp_ws_url, '/pool-two');
      const again = await eventuallyEvents(client, sessionId, (events) => expect(logged(events, 'fetched-pool-two')).toBe(true));
      expect(fetchedData(again, 'pool-two')).toBe(false);
      // The first lease's events are the session's, listed to its project (docs/telemetry.md).
      expect(fetchedData(again, 'pool-one')).toBe(true);
      expect((await client.post(`/browser_pools/${poolId}/release`, { session_id: sessionId, reuse: false })).status).toBe(204);
    } finally {
      applied.mockRestore();
      await client.delete(`/browser_pools/${poolId}?force=true`).catch(() => undefined);
    }
  }, 120_000);
});

describe('a pool browser that cannot take its pool’s telemetry back', () => {
  it('is replaced at its release, not leased again with the lease’s categories', async () => {
    const created = await client.post('/browser_pools', { name: `telemetry-fail-${Date.now()}`, size: 1, headless: true, fill_rate_per_minute: 6000, telemetry: { enabled: true } });
    expect(created.status, created.text).toBe(200);
    const poolId = created.body.id as string;
    try {
      await poolAvailable(poolId, 1);
      const lease = await client.post(`/browser_pools/${poolId}/acquire`, { telemetry: { browser: { console: { enabled: true } } } });
      expect(lease.status, lease.text).toBe(200);
      const sessionId = lease.body.session_id as string;
      // The agent refuses the pool's categories at the release (the reset itself succeeds).
      const refused = vi.spyOn(app.deps.runtime, 'applySettings').mockRejectedValueOnce(new Error('the agent refused the settings'));
      try {
        expect((await client.post(`/browser_pools/${poolId}/release`, { session_id: sessionId })).status).toBe(204);
        expect(refused).toHaveBeenCalledWith(sessionId, { telemetry: expect.objectContaining({ categories: ['captcha', 'connection', 'system'] }) });
      } finally {
        refused.mockRestore();
      }
      const row = (await db.query('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [sessionId])).rows[0];
      expect(row.deleted_reason).toBe('pool_reset_failed');
      await poolAvailable(poolId, 1);
    } finally {
      await client.delete(`/browser_pools/${poolId}?force=true`).catch(() => undefined);
    }
  }, 120_000);
});

describe('a telemetry PATCH while the browser starts', () => {
  it('reaches the agent once it is up', async () => {
    // The launch waits for the test: the row is 'starting' until the gate opens.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const launch = app.deps.runtime.launch.bind(app.deps.runtime);
    const held = vi.spyOn(app.deps.runtime, 'launch').mockImplementation(async (...args) => {
      await gate;
      return launch(...args);
    });
    try {
      const creating = client.post('/browsers', { headless: true, name: `starting-${Date.now()}` });
      const id = await eventually(
        async () => (await db.query<{ id: string }>("SELECT id FROM browser_sessions WHERE project_id = $1 AND phase = 'starting' AND pool_id IS NULL", [projectId])).rows[0]?.id,
        { timeoutMs: 20_000, intervalMs: 50, what: 'the browser row, starting' },
      );
      const patched = await client.patch(`/browsers/${id}`, { telemetry: { browser: { console: { enabled: true } } } });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.telemetry?.browser?.console?.enabled).toBe(true);
      // Nothing was sent to an agent that is not up.
      expect((await db.query('SELECT phase FROM browser_sessions WHERE id = $1', [id])).rows[0].phase).toBe('starting');
      open();
      const res = await creating;
      expect(res.status, res.text).toBe(200);
      expect(res.body.session_id).toBe(id);
      held.mockRestore();
      await visit(res.body.cdp_ws_url, '/patched');
      await eventuallyEvents(client, id, (events) => expect(logged(events, 'fetched-patched')).toBe(true));
      expect((await client.delete(`/browsers/${id}`)).status).toBe(204);
    } finally {
      open();
      held.mockRestore();
    }
  }, 60_000);
});

describe('the retention sweep', () => {
  it('removes events past the retention on its timer, with no telemetry route called', async () => {
    const hours = app.deps.settings.telemetry?.retentionHours ?? 72;
    const now = app.deps.clock.now().getTime();
    const insert = (session: string, receivedAt: Date) =>
      db.query(
        `INSERT INTO browser_telemetry_events (session_id, org_id, project_id, category, type, ts, received_at, event)
         VALUES ($1, $2, $3, 'console', 'console_log', 1, $4, '{"category":"console","type":"console_log","ts":1,"source":{"kind":"cdp"}}') RETURNING seq`,
        [session, app.tenant.orgId, projectId, receivedAt],
      );
    const old = (await insert('bs_sweep_old', new Date(now - (hours + 1) * 3_600_000))).rows[0].seq as string;
    const fresh = (await insert('bs_sweep_fresh', new Date(now - (hours - 1) * 3_600_000))).rows[0].seq as string;
    const left = async () => (await db.query<{ seq: string }>('SELECT seq FROM browser_telemetry_events WHERE seq = ANY($1::bigint[])', [[old, fresh]])).rows.map((r) => r.seq);
    await eventually(async () => !(await left()).includes(old), { timeoutMs: 20_000, intervalMs: 100, what: 'the old event swept' });
    expect(await left()).toEqual([fresh]);
  });
});
