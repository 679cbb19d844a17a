import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import { markerZip, uploadForm } from '../support/extension-zip.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { startStatePage, type StatePage } from './browsers-profile.fixtures.js';
import { expectError, type Pool } from './browser-pools.fixtures.js';

/**
 * Uploaded extensions in browser pools, with real pool browsers (agents, Chromium,
 * Postgres; nothing faked): the marker extension's content script marks every page
 * (data-ext on <html>) of an http page this test serves, since content scripts do not run
 * on data: or about:blank.
 */

let app: TestApp;
let page: StatePage;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, background: { reaperIntervalMs: 250, poolIntervalMs: 250 } });
  page = await startStatePage('127.0.0.32');
}, 120_000);
afterAll(async () => {
  await app?.close();
  await page?.close();
});

interface Lease {
  session_id: string;
  cdp_ws_url: string;
}

const upload = async (client: HttpClient, name: string) => {
  const res = await fetch(`${client.baseUrl}/extensions`, {
    method: 'POST',
    headers: { ...client.extraHeaders, authorization: `Bearer ${client.key}` },
    body: uploadForm(await markerZip(), name),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { id: string; last_used_at: string | null };
};

/** The marker the extension's content script sets on the test's page, or null without it. */
async function markerOf(cdpWsUrl: string): Promise<string | null> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const tab = await context.newPage();
    await tab.goto(page.url);
    // The content script runs at document_end: wait for it rather than race it, bounded.
    const marker = await tab
      .waitForFunction('document.documentElement.dataset.ext', undefined, { timeout: 5000 })
      .then(() => tab.evaluate<string | null>('document.documentElement.dataset.ext ?? null'))
      .catch(() => null);
    await tab.close();
    return marker;
  } finally {
    await browser.close().catch(() => undefined);
  }
}

const poolOf = async (client: HttpClient, id: string) => (await client.get<Pool>(`/browser_pools/${id}`)).body;
const warm = (client: HttpClient, id: string) =>
  eventually(() => poolOf(client, id), { timeoutMs: 90_000, intervalMs: 200, what: `pool ${id} warm`, accept: (p) => p.available_count === 1 });

async function lease(client: HttpClient, poolId: string): Promise<Lease> {
  const res = await client.post<Lease>(`/browser_pools/${poolId}/acquire`, { acquire_timeout_seconds: 30 });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

describe('a pool with extensions', () => {
  it('warms browsers that load them; a reused browser keeps them; [] with discard_all_idle rebuilds without', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const marker = await upload(client, 'marker');
    const created = await client.post<Pool>('/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 6000, extensions: [{ name: 'marker' }, { id: marker.id }] });
    expect(created.status, created.text).toBe(200);
    const pool = created.body;
    expect(pool.extension_ids).toEqual([marker.id]);
    expect(pool.browser_pool_config.extensions).toEqual([{ name: 'marker' }, { id: marker.id }]);
    try {
      await warm(client, pool.id);
      const first = await lease(client, pool.id);
      expect(await markerOf(first.cdp_ws_url)).toBe('loaded');
      expect((await client.get(`/extensions/${marker.id}/metadata`)).body.last_used_at).not.toBeNull();

      // Released for reuse, the browser is reset, and still loads the extension.
      expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: first.session_id, reuse: true })).status).toBe(204);
      await warm(client, pool.id);
      const again = await lease(client, pool.id);
      expect(again.session_id).toBe(first.session_id);
      expect(await markerOf(again.cdp_ws_url)).toBe('loaded');
      expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: again.session_id, reuse: true })).status).toBe(204);

      const cleared = await client.patch<Pool>(`/browser_pools/${pool.id}`, { extensions: [], discard_all_idle: true });
      expect(cleared.status, cleared.text).toBe(200);
      expect(cleared.body.extension_ids).toEqual([]);
      expect(cleared.body.browser_pool_config).not.toHaveProperty('extensions');
      await warm(client, pool.id);
      const plain = await lease(client, pool.id);
      expect(plain.session_id).not.toBe(first.session_id);
      expect(await markerOf(plain.cdp_ws_url)).toBeNull();
    } finally {
      await client.delete(`/browser_pools/${pool.id}`, { force: true });
    }
  }, 240_000);
});

describe('pool extensions are the project’s own', () => {
  it('refuses another project’s extension and an unknown one at create and update, changing nothing', async () => {
    const a = await newProject(app.tenant.http);
    const b = await newProject(app.tenant.http);
    const theirs = await upload(a.http, 'theirs');
    for (const selector of [{ id: theirs.id }, { name: 'theirs' }, { name: 'missing' }]) {
      expectError(await b.http.post('/browser_pools', { size: 1, extensions: [selector] }), 404, 'not_found');
    }
    expect((await b.http.get('/browser_pools')).body).toEqual([]);

    // A pool of B (size 1, never warmed past its first browser: nothing here is leased).
    const mine = await upload(b.http, 'mine');
    const created = await b.http.post<Pool>('/browser_pools', { size: 1, headless: true, extensions: [{ name: 'mine' }] });
    expect(created.status, created.text).toBe(200);
    try {
      const before = await poolOf(b.http, created.body.id);
      expect(before.extension_ids).toEqual([mine.id]);
      for (const selector of [{ id: theirs.id }, { name: 'theirs' }]) {
        expectError(await b.http.patch(`/browser_pools/${created.body.id}`, { extensions: [{ name: 'mine' }, selector] }), 404, 'not_found');
      }
      const after = await poolOf(b.http, created.body.id);
      expect(after.extension_ids).toEqual([mine.id]);
      expect(after.browser_pool_config).toEqual(before.browser_pool_config);
    } finally {
      await b.http.delete(`/browser_pools/${created.body.id}`, { force: true });
    }
  });

  it.each([
    ['an extension named by both id and name', { extensions: [{ id: 'ext_x', name: 'x' }] }],
    ['an extension named by neither', { extensions: [{}] }],
    ['an extension name with a space', { extensions: [{ name: 'my ext' }] }],
    ['21 extensions', { extensions: Array.from({ length: 21 }, (_, i) => ({ name: `e${i}` })) }],
    ['extensions that are not a list', { extensions: { name: 'x' } }],
  ])('refuses %s with 400 at create and update', async (_label, body) => {
    const { http: client } = await newProject(app.tenant.http);
    expectError(await client.post('/browser_pools', { size: 1, ...body }), 400, 'invalid_request');
    expect((await client.get('/browser_pools')).body).toEqual([]);
    const created = await client.post<Pool>('/browser_pools', { size: 1, headless: true });
    try {
      expectError(await client.patch(`/browser_pools/${created.body.id}`, body), 400, 'invalid_request');
      expect((await poolOf(client, created.body.id)).extension_ids).toEqual([]);
    } finally {
      await client.delete(`/browser_pools/${created.body.id}`, { force: true });
    }
  });
});

describe('deleting an extension a pool loads', () => {
  it('is refused with 409 naming the pool until the pool drops it or is deleted', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const used = await upload(client, 'used');
    const first = await client.post<Pool>('/browser_pools', { size: 1, headless: true, name: 'with-ext', extensions: [{ name: 'used' }] });
    const second = await client.post<Pool>('/browser_pools', { size: 1, headless: true, extensions: [{ id: used.id }] });
    expect([first.status, second.status]).toEqual([200, 200]);

    const refused = await client.delete(`/extensions/${used.id}`);
    expectError(refused, 409, 'extension_in_use');
    expect(refused.body.message).toContain('with-ext');
    expect(refused.body.message).toContain(second.body.id);
    expect((await client.get(`/extensions/${used.id}/metadata`)).status).toBe(200);
    expect((await poolOf(client, first.body.id)).extension_ids).toEqual([used.id]);

    expect((await client.patch(`/browser_pools/${first.body.id}`, { extensions: [] })).status).toBe(200);
    const still = await client.delete(`/extensions/used`);
    expectError(still, 409, 'extension_in_use');
    expect(still.body.message).not.toContain('with-ext');

    expect((await client.delete(`/browser_pools/${second.body.id}`, { force: true })).status).toBe(204);
    expect((await client.delete(`/extensions/used`)).status).toBe(204);
    expect((await client.get(`/extensions/${used.id}/metadata`)).status).toBe(404);
    await client.delete(`/browser_pools/${first.body.id}`, { force: true });
  });
});
