import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION } from '../../api/src/version.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakeAgent, FakeRuntime, useRuntime } from './browsers.fixtures.js';

/**
 * GET / and /docs: pages for people, without a key. The home page holds no tenant data
 * (it lists a project's sessions and pools only with a key pasted into it); /docs renders
 * /openapi.json with Redoc served from node_modules. Both in a real Chromium, watching
 * every request the page makes: none may leave this service.
 *
 * Fake: the browsers behind listed sessions are browsers.fixtures' FakeAgent; the page
 * lists the API's answers, and a real Chromium per session would only slow this down.
 */

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

let app: TestApp;
let browser: Browser;
let agent: FakeAgent;

beforeAll(async () => {
  app = await startTestApp();
  agent = new FakeAgent();
  useRuntime(app, new FakeRuntime(await agent.listen()));
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await agent?.close();
});

/** Pastes a key into the home page and waits for its lists (or its refusal). */
async function showWithKey(page: Page, key: string): Promise<void> {
  await page.fill('#key', key);
  await page.click('button[type=submit]');
  await page.locator('#status:not(:text("Loading…"))').waitFor();
}

/** The key the page keeps in this tab's sessionStorage (the test's tsconfig has no DOM types). */
const storedKey = (page: Page) => page.evaluate('sessionStorage.getItem("browserplane.apiKey")');

/** A page that records every request's URL and every console error (CSP violations among them). */
async function watchedPage(): Promise<{ page: Page; requests: string[]; consoleErrors: string[] }> {
  const page = await browser.newPage();
  const requests: string[] = [];
  const consoleErrors: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  return { page, requests, consoleErrors };
}

const offOrigin = (urls: string[]) => urls.filter((url) => !url.startsWith(app.url) && !url.startsWith('blob:') && !url.startsWith('data:'));

describe('GET /', () => {
  it('is an HTML page with the version and the links, under a strict CSP, the same with or without a key', async () => {
    const project = await app.tenant.http.post<{ id: string; name: string }>('/org/projects', { name: 'home-page-secret-project' });
    const anonymous = await fetch(`${app.url}/`);
    const body = await anonymous.text();
    expect(anonymous.status).toBe(200);
    expect(anonymous.headers.get('content-type')).toMatch(/^text\/html/);
    expect(anonymous.headers.get('content-security-policy')).toContain("script-src 'self';");
    expect(anonymous.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(body).toContain(`Version <span id="version">${API_VERSION}</span>`);
    expect(body).toContain('href="docs"');
    expect(body).not.toContain(project.body.id);
    expect(body).not.toContain(project.body.name);
    expect(body).not.toContain(app.tenant.orgId);
    const withKey = await fetch(`${app.url}/`, { headers: { Authorization: `Bearer ${app.tenant.adminKey}` } });
    expect(await withKey.text()).toBe(body);
  });

  it('lists nothing until a key is pasted, then that key’s sessions and pools; a wrong key is refused', async () => {
    const { page, requests, consoleErrors } = await watchedPage();
    await page.goto(`${app.url}/`);
    expect(await page.locator('#sessions tbody tr').count()).toBe(0);
    expect(requests.some((url) => url.includes('/browsers'))).toBe(false);

    await page.fill('#key', 'bp_not_a_real_key');
    await page.click('button[type=submit]');
    await page.locator('#status[data-error]').waitFor();
    expect(await page.textContent('#status')).toContain('401');

    await page.fill('#key', app.tenant.adminKey);
    await page.click('button[type=submit]');
    await page.locator('#sessions td.empty', { hasText: 'No live session' }).waitFor();
    await page.locator('#pools td.empty', { hasText: 'No pool' }).waitFor();
    expect(await storedKey(page)).toBe(app.tenant.adminKey);
    expect(await page.evaluate('document.cookie')).toBe('');

    await page.click('#forget');
    expect(await storedKey(page)).toBeNull();
    expect(offOrigin(requests)).toEqual([]);
    expect(consoleErrors.filter((text) => !text.includes('401'))).toEqual([]);
    await page.close();
  });
});

describe('GET / with a key', () => {
  it('lists that key’s live sessions with their live view links; another org’s key sees none of them', async () => {
    const created = await app.tenant.http.post<{ session_id: string; browser_live_view_url: string }>('/browsers', { headless: false });
    expect(created.status).toBe(200);
    const { page, requests } = await watchedPage();
    await page.goto(`${app.url}/`);
    await showWithKey(page, app.tenant.adminKey);
    const row = page.locator('#sessions tbody tr', { hasText: created.body.session_id });
    await row.waitFor();
    expect(await row.locator('a').getAttribute('href')).toBe(created.body.browser_live_view_url);

    const other = await app.newTenant('home-page-other');
    await showWithKey(page, other.adminKey);
    await page.locator('#sessions td.empty', { hasText: 'No live session' }).waitFor();
    expect(await page.content()).not.toContain(created.body.session_id);
    expect(offOrigin(requests)).toEqual([]);
    await page.close();
    expect((await app.tenant.http.delete(`/browsers/${created.body.session_id}`)).status).toBeLessThan(300);
  });
});

describe('GET /docs', () => {
  it('renders the operations of /openapi.json with Redoc, every request staying on this service', async () => {
    const { page, requests, consoleErrors } = await watchedPage();
    const response = await page.goto(`${app.url}/docs`);
    expect(response?.headers()['content-security-policy']).toContain("default-src 'none'");
    // Operation summaries from the document, as Redoc titles them in its main column.
    await page.locator('h2', { hasText: 'Start a browser session and answer once it is ready' }).first().waitFor({ timeout: 20_000 });
    await page.locator('h2', { hasText: 'Create a pool of warm browsers in the resolved project' }).first().waitFor();
    expect(requests.some((url) => url.endsWith('/openapi.json'))).toBe(true);
    expect(offOrigin(requests)).toEqual([]);
    expect(consoleErrors.filter((text) => /Content Security Policy/i.test(text))).toEqual([]);
    await page.close();
  });

  it('serves the Redoc bundle and the pages’ own files, and 404s anything else', async () => {
    const bundle = await fetch(`${app.url}/ui-assets/redoc.standalone.js`);
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toMatch(/^text\/javascript/);
    const text = await bundle.text();
    expect(text.length).toBeGreaterThan(100_000);
    expect(text).not.toContain('https://cdn.redoc.ly/');
    for (const file of ['home.js', 'home.css', 'docs.js']) expect((await fetch(`${app.url}/ui-assets/${file}`)).status, file).toBe(200);
    for (const file of ['__proto__', 'constructor', '..%2Fpackage.json', 'redoc.standalone.js.map', 'x'.repeat(65)]) {
      const res = await fetch(`${app.url}/ui-assets/${file}`);
      expect(res.status, file).toBeGreaterThanOrEqual(400);
      expect(res.status, file).toBeLessThan(500);
    }
  });
});
