import type Kernel from '@onkernel/sdk';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * puppeteer-core against sessions created with the SDK on the built service: over
 * WebDriver BiDi (webdriver_ws_url, served by the agent's chromium-bidi mapper) and over
 * CDP (cdp_ws_url). puppeteer-core never launches or downloads a browser here: it only
 * connects to the session's endpoints.
 */

/** A string, because this project compiles without the DOM library. */
const READ_MARKER = "document.getElementById('marker').textContent";

let service: RunningService;
let admin: Kernel;
let pages: TestPageServer;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  pages = await startTestPageServer({ '/reader': '<title>Read by puppeteer</title><p id="marker">served-to-puppeteer</p>' });
});
afterAll(async () => {
  await cleanupServices();
  await pages?.close();
});

describe('puppeteer-core on a session created with the SDK', () => {
  it('connects over WebDriver BiDi to webdriver_ws_url, opens a page, navigates and reads it', async () => {
    const created = await admin.browsers.create({ name: unique('bidi'), headless: true });
    expect(created.webdriver_ws_url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/browsers\/.+\/webdriver\?token=/);
    const browser = await puppeteer.connect({ browserWSEndpoint: created.webdriver_ws_url, protocol: 'webDriverBiDi' });
    try {
      // Pure BiDi: puppeteer falls back to running its own mapper over CDP when the endpoint
      // does not answer session.status, and then it holds a CDP connection. Both getters
      // are on the object but not in puppeteer's public types.
      const internals = browser as unknown as { protocol: string; cdpSupported: boolean };
      expect(internals.protocol).toBe('webDriverBiDi');
      expect(internals.cdpSupported).toBe(false);
      const page = await browser.newPage();
      await page.goto(`${pages.url}/reader`, { waitUntil: 'load' });
      expect(await page.title()).toBe('Read by puppeteer');
      expect(await page.evaluate(READ_MARKER)).toBe('served-to-puppeteer');
      expect(pages.requests).toContain('/reader');
    } finally {
      await browser.disconnect();
    }
    // Disconnecting ends the BiDi session, not the browser.
    expect((await admin.browsers.retrieve(created.session_id)).session_id).toBe(created.session_id);
    await admin.browsers.deleteByID(created.session_id);
  });

  it('connects over CDP to cdp_ws_url, opens a page, navigates and reads it', async () => {
    const created = await admin.browsers.create({ name: unique('cdp'), headless: true });
    const browser = await puppeteer.connect({ browserWSEndpoint: created.cdp_ws_url });
    try {
      expect((browser as unknown as { protocol: string }).protocol).toBe('cdp');
      const page = await browser.newPage();
      await page.goto(`${pages.url}/reader`, { waitUntil: 'load' });
      expect(await page.title()).toBe('Read by puppeteer');
      expect(await page.evaluate(READ_MARKER)).toBe('served-to-puppeteer');
    } finally {
      await browser.disconnect();
    }
    expect((await admin.browsers.retrieve(created.session_id)).session_id).toBe(created.session_id);
    await admin.browsers.deleteByID(created.session_id);
  });
});
