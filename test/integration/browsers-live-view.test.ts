import { readdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * browser_live_view_url end to end with real parts: a headful session (Xvfb, Chromium,
 * x11vnc started by the agent), the service's page with noVNC opened in a second,
 * headless Chromium, and the session's own CDP to see what the viewer's input did.
 */

const BUTTON_PAGE = `<!doctype html><html><head><title>live view target</title><style>
html, body { margin: 0; height: 100%; background: #fff; }
#big { position: fixed; left: 10%; top: 15%; width: 80%; height: 70%; border: 0; background: rgb(0, 200, 0); font-size: 40px; }
#big.clicked { background: rgb(200, 0, 0); }
</style></head><body><button id="big">Click me</button><script>
window.clicks = [];
window.keys = [];
const big = document.getElementById('big');
// detail 0: a click made by the keyboard (Enter on the focused button), not the mouse.
big.addEventListener('click', (e) => { if (e.detail === 0) return; clicks.push({ x: e.screenX, y: e.screenY }); big.classList.add('clicked'); });
document.addEventListener('keydown', (e) => keys.push(e.key));
</script></body></html>`;

let app: TestApp;
let client: HttpClient;
let pages: TestPageServer;
let viewer: Browser;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/button': BUTTON_PAGE });
  client = (await newProject(app.tenant.http)).http;
  viewer = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: ['--no-sandbox'] });
});
afterAll(async () => {
  await viewer?.close();
  await app?.close();
  await pages?.close();
});

const agentHealth = async (sessionId: string) => {
  const agentUrl = (await readyBrowser(app.runtime, sessionId)).agentUrl!;
  return (await (await fetch(`${agentUrl}/health`, { headers: { authorization: `Bearer ${app.deps.agentTokens(sessionId)}` } })).json()) as { connections_by_kind: Record<string, number> };
};

/** The RGB of the remote screen at (x, y), as noVNC drew it on its canvas (canvas pixels are remote pixels). */
const remotePixel = (page: Page, x: number, y: number) =>
  page.evaluate<number[]>(`Array.from(document.querySelector('#screen canvas').getContext('2d').getImageData(${x}, ${y}, 1, 1).data.slice(0, 3))`);

async function openLiveView(url: string): Promise<Page> {
  const page = await viewer.newPage({ viewport: { width: 1000, height: 800 } });
  await page.goto(url);
  await page.waitForSelector('body[data-state="connected"]', { timeout: 30_000 });
  return page;
}

async function createHeadful(body: Record<string, unknown> = {}) {
  const res = await client.post('/browsers', { headless: false, viewport: { width: 800, height: 600 }, start_url: `${pages.url}/button`, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as { session_id: string; cdp_ws_url: string; browser_live_view_url?: string };
}

describe('the live view of a headful session', () => {
  it('shows the screen, forwards a click and a key, counts as use for the idle timeout, and says when the session ended', async () => {
    const session = await createHeadful({ timeout_seconds: 10 });
    expect(session.browser_live_view_url).toMatch(new RegExp(`^${app.url}/browsers/${session.session_id}/live\\?token=`));

    const x11vncBefore = await x11vncPids();
    const view = await openLiveView(session.browser_live_view_url!);
    expect((await agentHealth(session.session_id)).connections_by_kind.live_view).toBe(1);
    // The agent started x11vnc for this browser on the first viewer.
    const started = (await x11vncPids()).filter((pid) => !x11vncBefore.includes(pid));
    expect(started).toHaveLength(1);
    // A frame is drawn: the middle of the remote screen is the green button.
    await eventually(async () => ((await remotePixel(view, 400, 300)).join() === '0,200,0' ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the first frame' });

    const canvas = (await view.locator('#screen canvas').boundingBox())!;
    const scale = canvas.width / 800;
    const clickedAt = Date.now();
    await view.mouse.click(canvas.x + 400 * scale, canvas.y + 300 * scale);
    // The click's effect comes back as a frame: the button turns red on the viewer's canvas.
    await eventually(async () => ((await remotePixel(view, 400, 300)).join() === '200,0,0' ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the button to turn red in the live view' });
    const roundTripMs = Date.now() - clickedAt;
    await view.keyboard.press('k');
    await view.keyboard.press('Enter');

    const cdp = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const target = cdp.contexts()[0]!.pages().find((p) => p.url().endsWith('/button'))!;
      const clicks = await target.evaluate<{ x: number; y: number }[]>('window.clicks');
      expect(clicks).toHaveLength(1);
      // The window fills the screen from (0, 0), so screen coordinates are the remote pixel clicked.
      expect(Math.abs(clicks[0]!.x - 400)).toBeLessThanOrEqual(3);
      expect(Math.abs(clicks[0]!.y - 300)).toBeLessThanOrEqual(3);
      await eventually(async () => ((await target.evaluate<string[]>('window.keys')).join() === 'k,Enter' ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the keys' });
    } finally {
      await cdp.close();
    }
    console.info(`live view: click to visible change in the viewer ${roundTripMs} ms`);

    // Only the live view is left connected: the idle reaper keeps the session past its timeout.
    await eventually(async () => ((await agentHealth(session.session_id)).connections_by_kind.cdp === 0 ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the CDP client to leave' });
    const reaper = new IdleReaper(app.deps, { connections: app.cdpProxy.connections });
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    await reaper.tick();
    expect((await client.get(`/browsers/${session.session_id}`)).status).toBe(200);

    await view.close();
    await eventually(
      async () =>
        (await agentHealth(session.session_id)).connections_by_kind.live_view === 0 ? true : undefined,
      { timeoutMs: 20_000, intervalMs: 100, what: 'the live view connection to be released' },
    );

    // A viewer open when the session is deleted says so.
    const second = await openLiveView(session.browser_live_view_url!);
    expect((await client.delete(`/browsers/${session.session_id}`)).status).toBe(204);
    await second.waitForSelector('body[data-state="disconnected"]', { timeout: 20_000 });
    await eventually(async () => ((await second.textContent('#status')) === 'The browser session has ended.' ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the ended message', detail: async () => `last seen ${JSON.stringify(await second.textContent('#status'))}` });
    await second.close();
    // Deleting the session stopped x11vnc with the rest of the browser.
    expect((await x11vncPids()).filter((pid) => started.includes(pid))).toEqual([]);
    expect((await app.client().get(new URL(session.browser_live_view_url!).pathname + new URL(session.browser_live_view_url!).search)).status).toBe(404);
  }, 120_000);

  it('serves the page with strict headers and refuses bad tokens, unknown sessions and headless sessions', async () => {
    const session = await createHeadful();
    const live = new URL(session.browser_live_view_url!);
    const anonymous = app.client();
    const page = await anonymous.get(live.pathname + live.search);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("frame-ancestors 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('cache-control')).toBe('no-store');

    expect((await anonymous.get(live.pathname)).status).toBe(401);
    expect((await anonymous.get(`${live.pathname}?token=garbage`)).status).toBe(401);
    const other = await createHeadful();
    const foreign = await anonymous.get(`${live.pathname}?token=${new URL(other.cdp_ws_url).searchParams.get('token')}`);
    expect(foreign.status).toBe(403);
    expect(foreign.body.code).toBe('forbidden');
    const { token: unknownToken } = await createCdpTokens(app.deps).issue('no-such-session');
    expect((await anonymous.get(`/browsers/no-such-session/live?token=${unknownToken}`)).status).toBe(404);

    const headless = await client.post('/browsers', { headless: true });
    expect(headless.status).toBe(200);
    expect(headless.body.browser_live_view_url).toBeUndefined();
    const headlessToken = new URL(headless.body.cdp_ws_url as string).searchParams.get('token');
    const refused = await anonymous.get(`/browsers/${headless.body.session_id}/live?token=${headlessToken}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('live_view_unavailable');
    // The agent refuses a VNC stream of a headless browser, and the service passes the 409 on.
    const upgradeOutcome = (url: string, headers: Record<string, string> = {}) =>
      new Promise<string>((resolve) => {
        const ws = new WebSocket(url, { headers });
        ws.once('open', () => resolve('open'));
        ws.once('error', (error) => resolve(error.message));
      });
    const agentUrl = (await readyBrowser(app.runtime, headless.body.session_id as string)).agentUrl!;
    expect(await upgradeOutcome(`${agentUrl.replace(/^http/, 'ws')}/vnc`, { authorization: `Bearer ${app.deps.agentTokens(headless.body.session_id as string)}` })).toContain('409');
    expect(await upgradeOutcome((headless.body.cdp_ws_url as string).replace('/cdp?', '/vnc?'))).toContain('409');

    for (const id of [session.session_id, other.session_id, headless.body.session_id as string]) await client.delete(`/browsers/${id}`);
  }, 90_000);

  it('serves noVNC read-only from the package and nothing outside it', async () => {
    const rfb = await app.client().get('/live-view/novnc/core/rfb.js');
    expect(rfb.status).toBe(200);
    expect(rfb.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(rfb.headers.get('cache-control')).toContain('max-age');
    expect(rfb.text).toContain('export default class RFB');
    expect((await app.client().get('/live-view/novnc/vendor/pako/lib/zlib/inflate.js')).status).toBe(200);
    for (const raw of [
      '/live-view/novnc/core/%2e%2e/%2e%2e/package.json',
      '/live-view/novnc/core/..%2f..%2fpackage.json',
      '/live-view/novnc/core/..%2F..%2F..%2F..%2Fpackage.json',
      '/live-view/novnc/package.json',
      '/live-view/novnc/core/util/.hidden.js',
      '/live-view/novnc/core/no-such-file.js',
      '/live-view/../package.json',
    ]) {
      expect(await rawGetStatus(app.url, raw), raw).toBe(404);
    }
  });
});

describe('PATCH viewport on a running browser', () => {
  const measure = (page: Page) =>
    page.evaluate<{ screenWidth: number; screenHeight: number; innerWidth: number; innerHeight: number; outerHeight: number }>(
      '({ screenWidth: screen.width, screenHeight: screen.height, innerWidth, innerHeight, outerHeight })',
    );

  it('resizes a headful browser’s screen and window; a size beyond its screen is a 409 and stores nothing', async () => {
    const session = await createHeadful({ viewport: { width: 1024, height: 768 } });
    const cdp = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const page = cdp.contexts()[0]!.pages()[0]!;
      const before = await measure(page);
      expect(before.screenWidth).toBe(1024);
      const res = await client.patch(`/browsers/${session.session_id}`, { viewport: { width: 800, height: 600 } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.viewport).toMatchObject({ width: 800, height: 600 });
      const after = await eventually(
        async () => {
          const m = await measure(page);
          return m.innerWidth <= 800 && m.screenWidth === 800 ? m : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 100, what: 'the new size', detail: async () => `last seen ${JSON.stringify(await measure(page))}` },
      );
      expect(after).toMatchObject({ screenWidth: 800, screenHeight: 600 });
      // Chromium on X keeps a window that fills the screen one pixel short of it (at launch too).
      const short = 1024 - before.innerWidth;
      expect(short).toBeLessThanOrEqual(1);
      expect(after.innerWidth).toBe(800 - short);
      expect(after.outerHeight).toBe(600 - short);
      // The browser's own toolbar keeps its height.
      expect(after.innerHeight).toBe(after.outerHeight - (before.outerHeight - before.innerHeight));

      const tooLarge = await client.patch(`/browsers/${session.session_id}`, { viewport: { width: 1280, height: 720 } });
      expect(tooLarge.status).toBe(409);
      expect(tooLarge.body.code).toBe('browser_settings_not_applied');
      expect(tooLarge.body.message).toContain('1024x768');
      expect((await client.get(`/browsers/${session.session_id}`)).body.viewport).toMatchObject({ width: 800, height: 600 });
      expect(await measure(page)).toMatchObject({ screenWidth: 800, innerWidth: after.innerWidth });

      expect((await client.patch(`/browsers/${session.session_id}`, { viewport: { width: 1024, height: 768 } })).status).toBe(200);
      await eventually(async () => ((await measure(page)).screenWidth === 1024 ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the size at start again' });
    } finally {
      await cdp.close();
      await client.delete(`/browsers/${session.session_id}`);
    }
  }, 90_000);

  it('resizes a headless browser’s window', async () => {
    const created = await client.post('/browsers', { headless: true, viewport: { width: 1024, height: 768 } });
    expect(created.status).toBe(200);
    const cdp = await chromium.connectOverCDP(created.body.cdp_ws_url as string);
    try {
      const page = cdp.contexts()[0]!.pages()[0] ?? (await cdp.contexts()[0]!.newPage());
      const before = await measure(page);
      expect(before.innerWidth).toBe(1024);
      expect((await client.patch(`/browsers/${created.body.session_id}`, { viewport: { width: 640, height: 480 } })).status).toBe(200);
      await eventually(async () => ((await measure(page)).innerWidth === 640 ? true : undefined), { timeoutMs: 20_000, intervalMs: 100, what: 'the new size' });
      // Headless Chromium keeps room for a toolbar it does not draw, at launch as after a resize.
      expect(await measure(page)).toMatchObject({ innerWidth: 640, outerHeight: 480, innerHeight: 480 - (before.outerHeight - before.innerHeight) });
    } finally {
      await cdp.close();
      await client.delete(`/browsers/${created.body.session_id}`);
    }
  }, 60_000);

  it('refuses a resize while a live view is open unless force is true, and the live view follows a forced one', async () => {
    const session = await createHeadful();
    const view = await openLiveView(session.browser_live_view_url!);
    try {
      const refused = await client.patch(`/browsers/${session.session_id}`, { viewport: { width: 640, height: 480 } });
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('live_view_active');
      expect((await client.get(`/browsers/${session.session_id}`)).body.viewport).toMatchObject({ width: 800, height: 600 });

      const forced = await client.patch(`/browsers/${session.session_id}`, { viewport: { width: 640, height: 480, force: true } });
      expect(forced.status, forced.text).toBe(200);
      expect(forced.body.viewport).toMatchObject({ width: 640, height: 480 });
      await eventually(
        async () =>
          (await view.evaluate<string>("(({ width, height }) => width + 'x' + height)(document.querySelector('#screen canvas'))")) === '640x480'
            ? true
            : undefined,
        { timeoutMs: 20_000, intervalMs: 100, what: 'noVNC to take the new desktop size' },
      );
      expect(await view.getAttribute('body', 'data-state')).toBe('connected');
    } finally {
      await view.close();
      await client.delete(`/browsers/${session.session_id}`);
    }
  }, 90_000);
});

async function x11vncPids(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0')[0]?.endsWith('x11vnc')) pids.push(Number(entry));
  }
  return pids;
}

/** A GET with the path exactly as given: fetch would resolve the dot segments first. */
function rawGetStatus(base: string, rawPath: string): Promise<number> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const request = http.get({ host: hostname, port, path: rawPath }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
  });
}
