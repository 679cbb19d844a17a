import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/** Real agents and real Chromium through the app's own local runtime and CDP proxy. */

let app: TestApp;
let http: HttpClient;
let pages: TestPageServer;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  http = app.tenant.http;
  pages = await startTestPageServer({ '/hello': '<title>Hello through the proxy</title><p id="p">hi</p>' });
});
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

describe('a real browser session', () => {
  it('is driven by Playwright connectOverCDP(cdp_ws_url) and closed by DELETE', async () => {
    const { http: client } = await newProject(http);
    const res = await client.post('/browsers', { headless: true, viewport: { width: 1024, height: 768 } });
    expect(res.status, res.text).toBe(200);
    const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
    try {
      const context = browser.contexts()[0] ?? (await browser.newContext());
      const page = await context.newPage();
      await page.goto(`${pages.url}/hello`);
      expect(await page.title()).toBe('Hello through the proxy');
      expect(await page.evaluate<number>('window.innerWidth')).toBe(1024);
    } finally {
      await browser.close().catch(() => undefined);
    }
    expect((await client.delete(`/browsers/${res.body.session_id}`)).status).toBe(204);
    const observed = await app.runtime.observe(res.body.session_id);
    expect(observed === undefined || observed.phase === 'Gone').toBe(true);
  });

  it('is deleted by the reaper once idle for timeout_seconds', async () => {
    const { http: client } = await newProject(http);
    const res = await client.post('/browsers', { headless: true, timeout_seconds: 10 });
    expect(res.status, res.text).toBe(200);
    const reaper = new IdleReaper(app.deps, { connections: app.cdpProxy.connections });
    await reaper.tick();
    expect((await client.get(`/browsers/${res.body.session_id}`)).status).toBe(200);
    // The agent's idle_since and started_at are real time here: wait out the minimum timeout.
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    await reaper.tick();
    expect((await client.get(`/browsers/${res.body.session_id}`)).status).toBe(404);
  }, 40_000);

  it('admits exactly the cap out of 20 parallel creates with real browsers; the rest get 429', async () => {
    const { http: client } = await newProject(http, { max_concurrent_sessions: 5 });
    const results = await Promise.all(Array.from({ length: 20 }, () => client.post('/browsers', { headless: true })));
    const created = results.filter((r) => r.status === 200);
    expect(created).toHaveLength(5);
    expect(results.filter((r) => r.status === 429 && r.body.code === 'concurrency_limit_exceeded')).toHaveLength(15);
    const ids = created.map((r) => r.body.session_id as string);
    // Five distinct live browsers, each answering on its own agent.
    for (const id of ids) expect((await readyBrowser(app.runtime, id)).phase).toBe('Ready');
    for (const id of ids) expect((await client.delete(`/browsers/${id}`)).status).toBe(204);
    expect((await client.post('/browsers', { headless: true })).status).toBe(200);
  }, 60_000);
});
