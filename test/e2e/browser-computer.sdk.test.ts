import type Kernel from '@onkernel/sdk';
import { BadRequestError } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** Computer control through the SDK against the built service, a real Chromium: headful on its Xvfb, and headless through CDP. */

let service: RunningService;
let admin: Kernel;
let pages: TestPageServer;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  pages = await startTestPageServer({
    '/input': '<title>input</title><input id="text" autofocus>',
    '/clicks': '<title>clicks</title><body style="margin:0"><script>window.clicks = []; addEventListener("click", (e) => clicks.push([e.clientX, e.clientY, e.detail]));</script></body>',
  });
});
afterAll(async () => {
  await cleanupServices();
  await pages?.close();
});

describe('browsers.computer through the SDK', () => {
  it('moves the pointer, types, round-trips the clipboard, takes a PNG and runs a batch on a headful session', async () => {
    const session = await admin.browsers.create({ headless: false, viewport: { width: 800, height: 600 }, start_url: `${pages.url}/input` });
    const browser = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.waitForSelector('#text');
      await page.focus('#text');
      const { computer } = admin.browsers;
      await computer.moveMouse(session.session_id, { x: 200, y: 300, smooth: true, duration_ms: 100 });
      expect(await computer.getMousePosition(session.session_id)).toEqual({ x: 200, y: 300 });
      await computer.typeText(session.session_id, { text: 'hi ✓' });
      await expect.poll(() => page.inputValue('#text')).toBe('hi ✓');
      await computer.writeClipboard(session.session_id, { text: 'from the SDK' });
      expect(await computer.readClipboard(session.session_id)).toEqual({ text: 'from the SDK' });
      const shot = await computer.captureScreenshot(session.session_id, { region: { x: 0, y: 0, width: 120, height: 80 } });
      const png = Buffer.from(await shot.arrayBuffer());
      expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([120, 80]);
      await computer.batch(session.session_id, {
        actions: [
          { type: 'press_key', press_key: { keys: ['ctrl+a', 'BackSpace'] } },
          { type: 'type_text', type_text: { text: 'batched' } },
        ],
      });
      await expect.poll(() => page.inputValue('#text')).toBe('batched');
      expect(await computer.setCursorVisibility(session.session_id, { hidden: true })).toEqual({ ok: true });
    } finally {
      await browser.close().catch(() => undefined);
      await admin.browsers.deleteByID(session.session_id);
    }
  }, 60_000);

  it('types, clicks, reads the pointer, round-trips the clipboard, takes a PNG and runs a batch on a headless session', async () => {
    const viewport = { width: 800, height: 600 };
    const session = await admin.browsers.create({ headless: true, viewport, start_url: `${pages.url}/input` });
    const browser = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.waitForSelector('#text');
      await page.focus('#text');
      const { computer } = admin.browsers;
      await computer.typeText(session.session_id, { text: 'hi ✓' });
      await expect.poll(() => page.inputValue('#text')).toBe('hi ✓');
      await computer.pressKey(session.session_id, { keys: ['ctrl+a', 'ctrl+c'] });
      expect(await computer.readClipboard(session.session_id)).toEqual({ text: 'hi ✓' });
      await computer.writeClipboard(session.session_id, { text: 'from the SDK' });
      await computer.pressKey(session.session_id, { keys: ['ctrl+a', 'ctrl+v'] });
      await expect.poll(() => page.inputValue('#text')).toBe('from the SDK');
      await computer.moveMouse(session.session_id, { x: 200, y: 300, smooth: true, duration_ms: 100 });
      expect(await computer.getMousePosition(session.session_id)).toEqual({ x: 200, y: 300 });
      const shot = await computer.captureScreenshot(session.session_id);
      const png = Buffer.from(await shot.arrayBuffer());
      expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([viewport.width, viewport.height]);
      await page.goto(`${pages.url}/clicks`);
      const top = await page.evaluate<number>('outerHeight - innerHeight');
      await computer.batch(session.session_id, {
        actions: [
          { type: 'click_mouse', click_mouse: { x: 40, y: top + 30 } },
          { type: 'click_mouse', click_mouse: { x: 50, y: top + 60, num_clicks: 2 } },
        ],
      });
      await expect.poll(() => page.evaluate('window.clicks')).toEqual([
        [40, 30, 1],
        [50, 60, 1],
        [50, 60, 2],
      ]);
      expect(await computer.setCursorVisibility(session.session_id, { hidden: true })).toEqual({ ok: true });
      await expect(computer.clickMouse(session.session_id, { x: viewport.width, y: 1 })).rejects.toBeInstanceOf(BadRequestError);
    } finally {
      await browser.close().catch(() => undefined);
      await admin.browsers.deleteByID(session.session_id);
    }
  }, 60_000);
});
