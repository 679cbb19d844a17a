import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import { startTestApp, type TestApp } from '../support/test-app.js';
import type { HttpClient } from '../support/http.js';
import { markerZip, uploadForm, zipOf } from '../support/extension-zip.js';
import { newProject } from './browsers.fixtures.js';
import { startStatePage, type StatePage } from './browsers-profile.fixtures.js';

/**
 * Extensions in real Chromium through real agents: an MV3 extension whose content script
 * marks every page (data-ext on <html>), loaded at create and into a running browser.
 */

let app: TestApp;
let page: StatePage;

beforeAll(async () => {
  app = await startTestApp();
  page = await startStatePage('127.0.0.31');
});
afterAll(async () => {
  await app?.close();
  await page?.close();
});

const upload = async (client: HttpClient, zip: Buffer, name?: string) => {
  const res = await fetch(`${client.baseUrl}/extensions`, { method: 'POST', headers: headersOf(client), body: uploadForm(zip, name) });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { id: string; name: string | null; last_used_at: string | null };
};

const headersOf = (client: HttpClient) => ({ ...client.extraHeaders, authorization: `Bearer ${client.key}` });

/** The page's marker and cookie, read over CDP. */
async function readPage(cdpWsUrl: string, url: string, setCookie?: string): Promise<{ marker: string | null; cookie: string }> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const tab = await context.newPage();
    await tab.goto(url);
    // The content script runs at document_end: wait for it rather than race it, bounded.
    const marker = await tab
      .waitForFunction('document.documentElement.dataset.ext', undefined, { timeout: 5000 })
      .then(() => tab.evaluate<string | null>('document.documentElement.dataset.ext ?? null'))
      .catch(() => null);
    if (setCookie) await tab.evaluate(`document.cookie = ${JSON.stringify(setCookie)}`);
    const cookie = await tab.evaluate<string>('document.cookie');
    await tab.close();
    return { marker, cookie };
  } finally {
    await browser.close().catch(() => undefined);
  }
}

const loadForm = (items: { name: string; zip: Buffer }[]) => {
  const form = new FormData();
  items.forEach(({ name, zip }, i) => {
    form.append(`extensions[${i}][name]`, name);
    form.append(`extensions[${i}][zip_file]`, new Blob([new Uint8Array(zip)], { type: 'application/zip' }), `${name}.zip`);
  });
  return form;
};

describe('a browser created with extensions', () => {
  it('loads the stored extension by name, marks it used, and its content script marks pages', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const stored = await upload(client, await markerZip({ folder: 'marker' }), 'marker');
    expect(stored.last_used_at).toBeNull();
    const created = await client.post('/browsers', { headless: true, extensions: [{ name: 'marker' }] });
    expect(created.status, created.text).toBe(200);
    expect((await readPage(created.body.cdp_ws_url, page.url)).marker).toBe('loaded');
    expect((await client.get(`/extensions/${stored.id}/metadata`)).body.last_used_at).not.toBeNull();
    await client.delete(`/browsers/${created.body.session_id}`);
  });

  it('a browser without them is not marked (the marker is the extension’s doing)', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = await client.post('/browsers', { headless: true });
    expect((await readPage(created.body.cdp_ws_url, page.url)).marker).toBeNull();
    await client.delete(`/browsers/${created.body.session_id}`);
  });

  it('refuses an unknown extension, and another project’s, creating nothing', async () => {
    const a = await newProject(app.tenant.http);
    const b = await newProject(app.tenant.http);
    const theirs = await upload(a.http, await markerZip(), 'theirs');
    for (const selector of [{ id: theirs.id }, { name: 'theirs' }, { name: 'missing' }]) {
      const res = await b.http.post('/browsers', { headless: true, extensions: [selector] });
      expect(res.status, res.text).toBe(404);
    }
    expect((await b.http.get('/browsers')).body).toEqual([]);
    expect((await b.http.post('/browsers', { headless: true, extensions: [{ id: 'x', name: 'y' }] })).status).toBe(400);
  });
});

describe('POST /browsers/{id}/extensions', () => {
  it('restarts Chromium with the extension: same session and CDP URL, pages marked, cookies kept', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const created = await client.post('/browsers', { headless: true });
    const { session_id: id, cdp_ws_url: cdp } = created.body as { session_id: string; cdp_ws_url: string };
    const before = await readPage(cdp, page.url, 'kept=1; max-age=86400; path=/');
    expect(before.marker).toBeNull();
    await readPage(cdp, page.url, 'session_kept=1; path=/');

    const res = await fetch(`${client.baseUrl}/browsers/${id}/extensions`, { method: 'POST', headers: headersOf(client), body: loadForm([{ name: 'marker', zip: await markerZip() }]) });
    expect(res.status, await res.text()).toBe(204);

    const after = await readPage(cdp, page.url);
    expect(after.marker).toBe('loaded');
    expect(after.cookie).toContain('kept=1');
    expect(after.cookie).toContain('session_kept=1');
    expect((await client.get(`/browsers/${id}`)).body.cdp_ws_url).toBe(cdp);

    // The same name again is 409, a bad zip 400, and the browser keeps working either way.
    const again = await fetch(`${client.baseUrl}/browsers/${id}/extensions`, { method: 'POST', headers: headersOf(client), body: loadForm([{ name: 'marker', zip: await markerZip() }]) });
    expect(again.status).toBe(409);
    const slip = await zipOf([{ name: 'manifest.json', data: '{"manifest_version":3,"name":"x","version":"1"}' }, { name: '../evil.js', data: '' }]);
    const bad = await fetch(`${client.baseUrl}/browsers/${id}/extensions`, { method: 'POST', headers: headersOf(client), body: loadForm([{ name: 'slip', zip: slip }]) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe('invalid_extension');
    expect((await readPage(cdp, page.url)).marker).toBe('loaded');
    await client.delete(`/browsers/${id}`);
  });

  it('is 404 for another project’s browser', async () => {
    const a = await newProject(app.tenant.http);
    const b = await newProject(app.tenant.http);
    const created = await a.http.post('/browsers', { headless: true });
    const res = await fetch(`${b.http.baseUrl}/browsers/${created.body.session_id}/extensions`, {
      method: 'POST',
      headers: headersOf(b.http),
      body: loadForm([{ name: 'marker', zip: await markerZip() }]),
    });
    expect(res.status).toBe(404);
    expect((await readPage(created.body.cdp_ws_url, page.url)).marker).toBeNull();
    await a.http.delete(`/browsers/${created.body.session_id}`);
  });
});
