import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { markerZip } from '../support/extension-zip.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { decodePng } from './browser-computer.fixtures.js';
import { allEvents, eventuallyEvents, ofType, type Envelope } from './browser-telemetry.fixtures.js';

/**
 * What the agent captures beyond CDP's own events, in real Chromium through real agents
 * and real Postgres: interactions and page metrics from its script in an isolated world,
 * screenshots, and the monitor events around a Chromium restart. Input is real input
 * (Playwright's mouse and keyboard go through CDP Input.dispatch*Event, trusted events
 * like a user's); the page's own dispatchEvent and scrollTo are what must not count.
 */

const INTERACT = `<!doctype html><title>interact</title><body style="margin:0">
<button id="go" style="position:absolute;left:10px;top:10px;width:200px;height:40px">Press   me
  please</button>
<input id="name" style="position:absolute;left:10px;top:60px">
<input id="pw" type="password" style="position:absolute;left:10px;top:100px">
<div id="fake" style="position:absolute;left:10px;top:140px">Synthetic</div>
<div style="height:5000px"></div>
<script>
  window.fake = () => {
    document.getElementById('fake').dispatchEvent(new MouseEvent('click', { bubbles: true, clientX: 1, clientY: 2 }));
    document.body.dispatchEvent(new KeyboardEvent('keydown', { key: 'z', bubbles: true }));
    window.dispatchEvent(new WheelEvent('wheel'));
    window.scrollTo(0, 300);
  };
</script>`;

const SHIFT = `<!doctype html><title>shift</title><body><p id="top">Top</p><p id="moved">A paragraph that the page pushes down</p>
<script>setTimeout(() => { const d = document.createElement('div'); d.style.height = '200px'; document.body.insertBefore(d, document.getElementById('top')); }, 300);</script></body>`;

const COLOUR = (colour: string) => `<!doctype html><title>colour</title><body style="margin:0;background:${colour}"></body>`;

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/interact': INTERACT, '/shift': SHIFT, '/red': COLOUR('rgb(255,0,0)'), '/green': COLOUR('rgb(0,255,0)') });
  ({ http: client } = await newProject(app.tenant.http));
}, 60_000);
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

async function openSession(browserTelemetry: Record<string, { enabled: boolean }>): Promise<{ id: string; browser: Browser; page: Page; cdp: string }> {
  const res = await client.post('/browsers', { headless: true, telemetry: { browser: browserTelemetry } });
  expect(res.status, res.text).toBe(200);
  const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  const context = browser.contexts()[0] ?? (await browser.newContext());
  return { id: res.body.session_id as string, browser, page: await context.newPage(), cdp: res.body.cdp_ws_url as string };
}

const nextFrame = (page: Page) => page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');

describe('interaction capture', () => {
  let session: Awaited<ReturnType<typeof openSession>>;
  let events: Envelope[];
  let scrolledFrom: number;
  let scrolledTo: number;

  beforeAll(async () => {
    session = await openSession({ interaction: { enabled: true } });
    const { page } = session;
    await page.goto(`${pages.url}/interact`);
    // The page's own events first, before any real input: none of them may be recorded.
    await page.evaluate('window.fake()');
    await nextFrame(page);
    // Back to the top, by the page too, so that no click below needs Playwright to scroll its
    // target into view: on a loaded host that scroll's event can land after the click's
    // pointerdown, and then it is a user's scroll by the script's rule (within USER_INPUT_MS).
    await page.evaluate('window.scrollTo(0, 0)');
    await nextFrame(page);
    await page.click('#go');
    await page.click('#name');
    await page.keyboard.type('ab');
    await page.keyboard.press('Enter');
    await page.click('#pw');
    await page.keyboard.type('secret');
    await page.mouse.click(400, 400);
    await page.keyboard.press('x');
    scrolledFrom = await page.evaluate<number>('scrollY');
    await page.mouse.wheel(0, 500);
    events = await eventuallyEvents(client, session.id, (all) => {
      expect(ofType(all, 'interaction_scroll_settled').length).toBeGreaterThan(0);
      expect(ofType(all, 'interaction_key').some((e) => e.event.data?.key === 'x')).toBe(true);
    });
    scrolledTo = await page.evaluate<number>('scrollY');
  }, 60_000);
  afterAll(async () => {
    await session?.browser.close().catch(() => undefined);
    await client.delete(`/browsers/${session?.id}`);
  });

  it('records a real click with its selector, tag, trimmed text and viewport position', () => {
    const clicks = ofType(events, 'interaction_click');
    const go = clicks.find((e) => e.event.data?.selector === '#go');
    expect(go?.event).toMatchObject({ category: 'interaction', source: { kind: 'cdp', event: 'Runtime.bindingCalled' } });
    expect(go?.event.data).toMatchObject({ tag: 'BUTTON', text: 'Press me please', target_type: 'page', url: `${pages.url}/interact` });
    expect(go?.event.data?.x).toBeGreaterThanOrEqual(10);
    expect(go?.event.data?.x).toBeLessThanOrEqual(210);
    expect(go?.event.data?.y).toBeGreaterThanOrEqual(10);
    expect(go?.event.data?.y).toBeLessThanOrEqual(50);
    expect(typeof go?.event.data?.session_id).toBe('string');
    expect(typeof go?.event.data?.target_id).toBe('string');
  });

  it('records nothing the page dispatched itself: no synthetic click, key or scroll', () => {
    expect(ofType(events, 'interaction_click').some((e) => e.event.data?.selector === '#fake')).toBe(false);
    expect(ofType(events, 'interaction_key').some((e) => e.event.data?.key === 'z')).toBe(false);
    expect(ofType(events, 'interaction_scroll_settled').some((e) => e.event.data?.to_y === 300)).toBe(false);
  });

  it('masks printable keys typed into a field, keeps named keys, and records nothing in a password field', () => {
    const keys = ofType(events, 'interaction_key').map((e) => e.event.data as Record<string, unknown>);
    const inName = keys.filter((k) => k.selector === '#name');
    expect(inName.map((k) => k.key)).toEqual(['*', '*', 'Enter']);
    expect(inName[0]).toMatchObject({ tag: 'INPUT' });
    expect(keys.some((k) => k.selector === '#pw')).toBe(false);
    expect(JSON.stringify(events)).not.toContain('secret');
    expect(keys.find((k) => k.key === 'x')).toMatchObject({ tag: 'BODY' });
  });

  it('records a real scroll when it settled, with where it started and ended', () => {
    // One gesture is one event; on a loaded host its wheel steps may pause past the settle
    // time (150 ms), and then it settles more than once: the events chain without a gap.
    const scrolls = ofType(events, 'interaction_scroll_settled').map((e) => e.event.data as Record<string, unknown>);
    expect(scrolls.length).toBeGreaterThanOrEqual(1);
    expect(scrolls.length).toBeLessThanOrEqual(3);
    expect(scrolls[0]).toMatchObject({ from_x: 0, from_y: scrolledFrom, target_selector: 'document' });
    expect(scrolls.at(-1)).toMatchObject({ to_x: 0, to_y: scrolledTo });
    for (let i = 1; i < scrolls.length; i++) expect(scrolls[i]!.from_y).toBe(scrolls[i - 1]!.to_y);
    expect(scrolledTo).toBeGreaterThan(scrolledFrom);
  });

  it('leaves nothing the page can see in its own world', async () => {
    const globals = await session.page.evaluate<string[]>("Object.getOwnPropertyNames(window).filter((name) => name.startsWith('__bp'))");
    expect(globals).toEqual([]);
  });

  it('captures nothing of a category that is off: no page metrics, no screenshot', () => {
    expect(new Set(events.map((e) => e.event.category))).toEqual(new Set(['interaction']));
  });
});

describe('page metrics', () => {
  it('records a layout shift, the LCP, then layout settled and navigation settled on a page that shifts', async () => {
    const { id, browser, page } = await openSession({ page: { enabled: true } });
    try {
      await page.goto(`${pages.url}/shift`);
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'page_navigation_settled').some((e) => String(e.event.data?.url).endsWith('/shift'))).toBe(true));
      const onShift = (type: string) => ofType(events, type).filter((e) => String(e.event.data?.url).endsWith('/shift'));
      const shift = onShift('page_layout_shift')[0];
      expect(shift?.event.data).toMatchObject({ target_type: 'page', layout_shift_details: { had_recent_input: false } });
      expect(shift?.event.data?.layout_shift_details.value).toBeGreaterThan(0);
      expect(typeof shift?.event.data?.time).toBe('number');
      const lcp = onShift('page_lcp')[0];
      expect(lcp?.event.data?.lcp_details.size).toBeGreaterThan(0);
      const [settled, navigation] = [onShift('page_layout_settled')[0]!, onShift('page_navigation_settled')[0]!];
      // Settled comes after the shift and after the load, and navigation settled after both.
      expect(settled.seq).toBeGreaterThan(shift!.seq);
      expect(settled.seq).toBeGreaterThan(onShift('page_load')[0]!.seq);
      expect(navigation.seq).toBeGreaterThan(settled.seq);
      expect(navigation.event.data?.nav_seq).toBe(settled.event.data?.nav_seq);
      expect(ofType(events, 'interaction_click')).toEqual([]);
    } finally {
      await browser.close().catch(() => undefined);
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});

describe('screenshots', () => {
  it('sends a PNG of the active page at its viewport size', async () => {
    const { id, browser, page } = await openSession({ screenshot: { enabled: true } });
    try {
      await page.goto(`${pages.url}/shift`);
      const viewport = await page.evaluate<{ width: number; height: number; dpr: number }>('({ width: innerWidth, height: innerHeight, dpr: devicePixelRatio })');
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'monitor_screenshot').length).toBeGreaterThan(0), 30_000);
      const shot = ofType(events, 'monitor_screenshot')[0]!;
      expect(shot.event).toMatchObject({ category: 'screenshot', source: { kind: 'cdp', event: 'Page.captureScreenshot' } });
      expect(shot.event.truncated).toBeUndefined();
      const png = decodePng(Buffer.from(String(shot.event.data?.png), 'base64'));
      expect({ width: png.width, height: png.height }).toEqual({ width: viewport.width * viewport.dpr, height: viewport.height * viewport.dpr });
      // Listed under its category.
      const listed = await allEvents(client, id, '&category=screenshot');
      expect(listed.length).toBeGreaterThan(0);
    } finally {
      await browser.close().catch(() => undefined);
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});

describe('screenshots of the page in front', () => {
  it('follows the tab a client brought to the front, not the one opened last', async () => {
    const { id, browser, page } = await openSession({ screenshot: { enabled: true } });
    try {
      await page.goto(`${pages.url}/red`);
      const later = await page.context().newPage();
      await later.goto(`${pages.url}/green`);
      await page.bringToFront();
      const since = Date.now() * 1000;
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'monitor_screenshot').filter((e) => e.event.ts > since).length).toBeGreaterThan(0), 30_000);
      const shot = ofType(events, 'monitor_screenshot').find((e) => e.event.ts > since)!;
      expect(decodePng(Buffer.from(String(shot.event.data?.png), 'base64')).pixel(10, 10)).toEqual([255, 0, 0]);
    } finally {
      await browser.close().catch(() => undefined);
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});

describe('monitor events', () => {
  it('reports the capture disconnected and reconnected around a Chromium restart, then captures again', async () => {
    const { id, browser } = await openSession({ page: { enabled: true } });
    await browser.close().catch(() => undefined);
    try {
      const form = new FormData();
      form.append('extensions[0][name]', 'marker');
      form.append('extensions[0][zip_file]', new Blob([new Uint8Array(await markerZip())], { type: 'application/zip' }), 'marker.zip');
      const headers = { ...client.extraHeaders, authorization: `Bearer ${client.key}` };
      const res = await fetch(`${client.baseUrl}/browsers/${id}/extensions`, { method: 'POST', headers, body: form });
      expect(res.status, await res.text()).toBe(204);
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'monitor_reconnected').length).toBe(1));
      const [down, up] = [ofType(events, 'monitor_disconnected')[0]!, ofType(events, 'monitor_reconnected')[0]!];
      expect(down.event).toMatchObject({ category: 'monitor', data: { reason: 'chrome_restarted' } });
      expect(up.seq).toBeGreaterThan(down.seq);
      expect(up.event.data?.reconnect_duration_ms).toBeGreaterThanOrEqual(0);
      expect(ofType(events, 'monitor_reconnect_failed')).toEqual([]);

      // The new capture works: a page opened in the restarted Chromium is seen.
      const session = await client.get(`/browsers/${id}`);
      const again = await chromium.connectOverCDP(session.body.cdp_ws_url as string);
      try {
        const tab = await (again.contexts()[0] ?? (await again.newContext())).newPage();
        await tab.goto(`${pages.url}/after-restart`);
        await eventuallyEvents(client, id, (all) => expect(ofType(all, 'page_navigation').some((e) => String(e.event.data?.url).endsWith('/after-restart'))).toBe(true));
      } finally {
        await again.close().catch(() => undefined);
      }
      const monitorOnly = await allEvents(client, id, '&category=monitor');
      expect(new Set(monitorOnly.map((e) => e.event.category))).toEqual(new Set(['monitor']));
    } finally {
      await client.delete(`/browsers/${id}`);
    }
  }, 90_000);

  it('sends no monitor event for a session that captures nothing from CDP', async () => {
    const res = await client.post('/browsers', { headless: true, telemetry: { browser: { connection: { enabled: true } } } });
    expect(res.status, res.text).toBe(200);
    const id = res.body.session_id as string;
    try {
      const form = new FormData();
      form.append('extensions[0][name]', 'marker');
      form.append('extensions[0][zip_file]', new Blob([new Uint8Array(await markerZip())], { type: 'application/zip' }), 'marker.zip');
      const headers = { ...client.extraHeaders, authorization: `Bearer ${client.key}` };
      expect((await fetch(`${client.baseUrl}/browsers/${id}/extensions`, { method: 'POST', headers, body: form })).status).toBe(204);
      // A CDP client connecting after the restart is the marker that the agent is past it.
      const browser = await chromium.connectOverCDP(res.body.cdp_ws_url as string);
      await browser.close();
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'cdp_disconnect').length).toBeGreaterThan(0));
      expect(events.filter((e) => e.event.category === 'monitor')).toEqual([]);
    } finally {
      await client.delete(`/browsers/${id}`);
    }
  }, 90_000);
});
