import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';

/** Real agents and real Chromium: what newer SDKs send on browser create and update. */

let app: TestApp;
let http: HttpClient;
let pages: TestPageServer;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, settings: { region: 'eu-west' } });
  ({ http } = await newProject(app.tenant.http));
  pages = await startTestPageServer();
});
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

/** The URL of the browser's first tab, as another CDP client sees it. */
async function firstTabUrl(cdpWsUrl: string): Promise<string> {
  const browser = await chromium.connectOverCDP(cdpWsUrl);
  try {
    return browser.contexts()[0]!.pages()[0]!.url();
  } finally {
    await browser.close().catch(() => undefined);
  }
}

describe('newer clients: a real browser', () => {
  it('is created with region, location, memory and private_hosts, and reports the configured region and memory', async () => {
    const res = await http.post('/browsers', {
      headless: true,
      region: 'us-west',
      location: { timezone: 'Europe/Paris', locale: 'fr-FR' },
      memory: '4GiB',
      network: { private_hosts: ['_.corp.example'] },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ region: 'eu-west', memory: '1GiB' });
    expect((await http.get(`/browsers/${res.body.session_id}`)).body).toMatchObject({ region: 'eu-west', memory: '1GiB' });
    const listed = (await http.get('/browsers')).body as Array<{ session_id: string; region: string }>;
    expect(listed.find((b) => b.session_id === res.body.session_id)?.region).toBe('eu-west');
    expect((await http.delete(`/browsers/${res.body.session_id}`)).status).toBe(204);
  }, 120_000);

  it('navigates its first tab on PATCH start_url, keeps the page on "", and refuses a bad URL without changing anything', async () => {
    const created = await http.post('/browsers', { headless: true, start_url: `${pages.url}/first`, name: 'navigated' });
    expect(created.status, created.text).toBe(200);
    const id = created.body.session_id as string;
    const cdp = created.body.cdp_ws_url as string;
    await eventually(() => firstTabUrl(cdp), {
      accept: (url) => url === `${pages.url}/first`,
      timeoutMs: 30_000,
      intervalMs: 250,
      what: 'the start_url to open',
    });

    const patched = await http.patch(`/browsers/${id}`, { start_url: `${pages.url}/second`, tags: { step: 'two' } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.tags).toEqual({ step: 'two' });
    expect(await firstTabUrl(cdp)).toBe(`${pages.url}/second`);
    expect(pages.requests).toContain('/second');

    expect((await http.patch(`/browsers/${id}`, { start_url: '' })).status).toBe(200);
    expect(await firstTabUrl(cdp)).toBe(`${pages.url}/second`);

    for (const bad of ['javascript:alert(1)', 'file:///etc/passwd', 'chrome://settings', 'not a url', 42]) {
      const res = await http.patch(`/browsers/${id}`, { start_url: bad, name: 'renamed-by-bad-patch' });
      expect(res.status, String(bad)).toBe(400);
      expect(errorFields(res)).toContain('body.start_url');
    }
    for (const bad of [{ network: { allowed_hosts: ['example.com'] } }, { location: { timezone: 'Mars/Olympus Mons' } }]) {
      expect((await http.patch(`/browsers/${id}`, { ...bad, name: 'renamed-by-bad-patch' })).status, JSON.stringify(bad)).toBe(400);
    }
    expect(await firstTabUrl(cdp)).toBe(`${pages.url}/second`);
    expect((await http.get(`/browsers/${id}`)).body).toMatchObject({ name: 'navigated', tags: { step: 'two' } });

    // Accepted and ignored on update: location and private_hosts.
    const ignored = await http.patch(`/browsers/${id}`, { location: { timezone: null, locale: 'de-DE' }, network: { private_hosts: [] } });
    expect(ignored.status, ignored.text).toBe(200);
    expect((await http.delete(`/browsers/${id}`)).status).toBe(204);
  }, 120_000);
});
