import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';

/**
 * The live view's read-only mode, its embedding and its toolbar, with real parts: a headful session
 * (Xvfb, Chromium, x11vnc), the live view page in a second, headless Chromium, and the
 * session's own CDP to see what input reached the page. The attack is made by hand: raw
 * RFB key and pointer messages sent over the read-only page's own WebSocket, as a
 * modified page would send them; the same messages over a full link are the control
 * that shows they do reach the browser when allowed. No fakes.
 */

const TARGET_PAGE = `<!doctype html><html><head><title>read-only target</title><style>
html, body { margin: 0; height: 100%; }
#big { position: fixed; inset: 0; width: 100%; height: 100%; border: 0; background: rgb(0, 200, 0); }
</style></head><body><button id="big">target</button><script>
window.clicks = 0;
window.keys = [];
document.getElementById('big').addEventListener('click', (e) => { if (e.detail > 0) clicks += 1; });
document.addEventListener('keydown', (e) => keys.push(e.key));
</script></body></html>`;

/** Frames the live view of `#hash` from another origin (the page server's port). */
const EMBED_PAGE = `<!doctype html><html><head><title>embedder</title></head><body><script>
const frame = document.createElement('iframe');
frame.src = decodeURIComponent(location.hash.slice(1));
frame.width = 900; frame.height = 700;
frame.addEventListener('load', () => { document.body.dataset.loaded = 'yes'; });
document.body.append(frame);
</script></body></html>`;

let app: TestApp;
let client: HttpClient;
let pages: TestPageServer;
let viewer: Browser;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/target': TARGET_PAGE, '/embed': EMBED_PAGE });
  client = (await newProject(app.tenant.http)).http;
  viewer = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: ['--no-sandbox'] });
});
afterAll(async () => {
  await viewer?.close();
  await app?.close();
  await pages?.close();
});

async function createHeadful() {
  const res = await client.post('/browsers', { headless: false, viewport: { width: 800, height: 600 }, start_url: `${pages.url}/target` });
  expect(res.status, res.text).toBe(200);
  return res.body as { session_id: string; cdp_ws_url: string; browser_live_view_url: string };
}

async function openLiveView(url: string): Promise<Page> {
  const page = await viewer.newPage({ viewport: { width: 1000, height: 800 } });
  await page.goto(url);
  await page.waitForSelector('body[data-state="connected"]', { timeout: 30_000 });
  return page;
}

const KEY_K = 0x6b;
const KEY_Z = 0x7a;
/** RFB client messages: a click at (400, 300) and a press of `key`. */
const inputMessages = (key: number) => [
  [5, 0, 1, 144, 1, 44],
  [5, 1, 1, 144, 1, 44],
  [5, 0, 1, 144, 1, 44],
  [4, 1, 0, 0, 0, 0, 0, key],
  [4, 0, 0, 0, 0, 0, 0, key],
];

/**
 * Runs in `page`: a WebSocket of its own to `wsUrl`, the RFB handshake by hand (no noVNC,
 * so nothing of the page's read-only setting applies), `messages` sent raw, then a
 * framebuffer update request whose answer says x11vnc has read everything sent before it.
 */
function sendRawRfb(page: Page, wsUrl: string, messages: number[][]): Promise<string> {
  return page.evaluate(
    async ({ url, messages: sent }) => {
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      let buffer = new Uint8Array(0);
      let wake: (() => void) | undefined;
      ws.onmessage = (event: { data: ArrayBuffer }) => {
        const chunk = new Uint8Array(event.data);
        const joined = new Uint8Array(buffer.length + chunk.length);
        joined.set(buffer);
        joined.set(chunk, buffer.length);
        buffer = joined;
        wake?.();
      };
      ws.onclose = () => wake?.();
      await new Promise((resolve, reject) => {
        ws.onopen = resolve;
        ws.onerror = () => reject(new Error('the WebSocket was refused'));
      });
      const read = async (n: number) => {
        while (buffer.length < n) {
          if (ws.readyState > 1) throw new Error('the server closed the connection');
          await new Promise<void>((resolve) => (wake = resolve));
        }
        const out = buffer.slice(0, n);
        buffer = buffer.slice(n);
        return out;
      };
      const version = new TextDecoder().decode(await read(12));
      ws.send(new TextEncoder().encode('RFB 003.008\n'));
      const types = await read((await read(1))[0]!);
      if (!types.includes(1)) throw new Error(`no "None" security type offered by ${version}: ${types.join()}`);
      ws.send(new Uint8Array([1]));
      if ((await read(4)).some((byte) => byte !== 0)) throw new Error('security handshake failed');
      ws.send(new Uint8Array([1]));
      const init = await read(24);
      await read(new DataView(init.buffer).getUint32(20));
      for (const message of sent) ws.send(new Uint8Array(message));
      ws.send(new Uint8Array([3, 0, 0, 0, 0, 0, 0, 16, 0, 16]));
      const reply = (await read(1))[0];
      ws.close();
      return `${version.trim()} answered ${reply}`;
    },
    { url: wsUrl, messages },
  );
}

/** The page's WebSocket address, as its own script builds it: /browsers/{id}/vnc + the page's query. */
const vncUrlOf = (page: Page) => page.evaluate<string>("(() => { const u = new URL('vnc' + location.search, location.href); u.protocol = 'ws:'; return u.href; })()");

describe('a read-only live view', () => {
  it('drops every key and click the service is sent, whatever the client does, and gives no way back to input', async () => {
    const session = await createHeadful();
    const cdp = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const target = cdp.contexts()[0]!.pages().find((p) => p.url().endsWith('/target'))!;
      const seen = () => target.evaluate<{ clicks: number; keys: string[] }>('({ clicks: window.clicks, keys: window.keys })');

      // Kernel's form: readOnly=true on browser_live_view_url. The page answers with a redirect
      // to a token of its own, so the full token is not what the viewing page holds.
      const fullToken = new URL(session.browser_live_view_url).searchParams.get('token')!;
      const view = await openLiveView(`${session.browser_live_view_url}&readOnly=true`);
      const viewUrl = new URL(view.url());
      expect(viewUrl.searchParams.get('readOnly')).toBe('true');
      expect(viewUrl.searchParams.get('token')).not.toBe(fullToken);
      expect(await view.isVisible('#read-only-badge')).toBe(true);

      // The attack: raw input over the page's own WebSocket, then without readOnly in the query.
      const readOnlyWs = await vncUrlOf(view);
      expect(await sendRawRfb(view, readOnlyWs, inputMessages(KEY_K))).toMatch(/^RFB 003\.00\d answered 0$/);
      const stripped = new URL(readOnlyWs);
      stripped.searchParams.delete('readOnly');
      await sendRawRfb(view, stripped.href, inputMessages(KEY_K));
      // The full token with Kernel's readOnly=true on the WebSocket itself is view-only too.
      const fullReadOnly = new URL(readOnlyWs);
      fullReadOnly.searchParams.set('token', fullToken);
      await sendRawRfb(view, fullReadOnly.href, inputMessages(KEY_K));
      // And noVNC's own input on the read-only page.
      const canvas = (await view.locator('#screen canvas').boundingBox())!;
      await view.mouse.click(canvas.x + canvas.width / 2, canvas.y + canvas.height / 2);
      await view.keyboard.press('k');

      // The control: the same messages over a full link do reach the page (with z, not k).
      // x11vnc forwards input in the order the X server gets it, so once z has arrived,
      // any k sent before it would have too.
      const full = new URL(readOnlyWs);
      full.searchParams.set('token', fullToken);
      full.searchParams.delete('readOnly');
      await sendRawRfb(view, full.href, inputMessages(KEY_Z));
      const after = await eventually(async () => ((await seen()).keys.includes('z') ? seen() : undefined), {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: 'the control key',
        detail: async () => JSON.stringify(await seen()),
      });
      expect(after).toEqual({ clicks: 1, keys: ['z'] });

      // The read-only token opens nothing else: not CDP, and not a full page.
      const readOnlyToken = viewUrl.searchParams.get('token')!;
      expect(await upgradeOutcome(session.cdp_ws_url.replace(fullToken, readOnlyToken))).toContain('403');
      const anonymous = app.client();
      const unfollowed = (query: string) => fetch(`${app.url}${viewUrl.pathname}?${query}`, { redirect: 'manual' });
      for (const query of [`token=${readOnlyToken}`, `token=${readOnlyToken}&readOnly=false`]) {
        const answer = await unfollowed(query);
        expect(answer.status, query).toBe(303);
        expect(answer.headers.get('location')).toBe(`live?token=${readOnlyToken}&readOnly=true`);
      }
      expect((await unfollowed(`token=${readOnlyToken}&readOnly=true`)).status).toBe(200);
      // Kernel's form answers with a fresh read-only token, never the full one.
      const minted = await unfollowed(`token=${fullToken}&readOnly=true`);
      expect(minted.status).toBe(303);
      expect(minted.headers.get('location')).toMatch(/^live\?token=\d+\.[\w-]{43}&readOnly=true$/);
      expect(minted.headers.get('location')).not.toContain(fullToken);
      // A read-only token of another session is refused like any foreign token.
      const other = await createHeadful();
      const otherView = await anonymous.get(`${new URL(other.browser_live_view_url).pathname}?token=${readOnlyToken}&readOnly=true`);
      expect(otherView.status).toBe(403);
      await client.delete(`/browsers/${other.session_id}`);
      await view.close();
    } finally {
      await cdp.close();
      await client.delete(`/browsers/${session.session_id}`);
    }
  }, 120_000);
});

describe('embedding the live view', () => {
  it("allows frame-ancestors 'self' only by default, and the configured origins when set", async () => {
    const session = await createHeadful();
    const live = new URL(session.browser_live_view_url);
    const embed = async () => {
      const page = await viewer.newPage();
      await page.goto(`${pages.url}/embed#${encodeURIComponent(session.browser_live_view_url)}`);
      await page.waitForSelector('body[data-loaded="yes"]');
      const frame = page.frames().find((f) => f !== page.mainFrame())!;
      const state = frame.url().startsWith(app.url) ? await frame.waitForSelector('body[data-state="connected"]', { timeout: 30_000 }).then(() => 'connected') : frame.url();
      await page.close();
      return state;
    };
    try {
      const byDefault = await app.client().get(live.pathname + live.search);
      expect(byDefault.headers.get('content-security-policy')).toContain("frame-ancestors 'self';");
      expect(await embed()).toMatch(/^chrome-error:/);

      app.deps.settings.liveViewFrameAncestors = [pages.url, 'https://*.example.com'];
      const configured = await app.client().get(live.pathname + live.search);
      expect(configured.headers.get('content-security-policy')).toContain(`frame-ancestors 'self' ${pages.url} https://*.example.com;`);
      expect(await embed()).toBe('connected');
    } finally {
      app.deps.settings.liveViewFrameAncestors = undefined;
      await client.delete(`/browsers/${session.session_id}`);
    }
  }, 90_000);
});

describe('the live view toolbar', () => {
  it('stays collapsed in a corner without moving the screen, reconnects, and toggles fit and 1:1', async () => {
    const session = await createHeadful();
    const page = await viewer.newPage({ viewport: { width: 600, height: 400 } });
    const sockets: { isClosed(): boolean }[] = [];
    page.on('websocket', (socket) => sockets.push(socket));
    try {
      await page.goto(session.browser_live_view_url);
      await page.waitForSelector('body[data-state="connected"]', { timeout: 30_000 });
      const canvasBox = async () => (await page.locator('#screen canvas').boundingBox())!;
      const fitted = await canvasBox();
      expect(fitted.width).toBeLessThanOrEqual(600);
      expect(await page.isVisible('#read-only-badge')).toBe(false);
      expect(await page.isVisible('#reconnect')).toBe(false);

      // Opened, it floats over the screen: the canvas keeps its place and size.
      await page.click('#toolbar-toggle');
      expect(await page.getAttribute('#toolbar-toggle', 'aria-expanded')).toBe('true');
      expect(await page.isVisible('#reconnect')).toBe(true);
      expect(await canvasBox()).toEqual(fitted);
      const bar = (await page.locator('#toolbar').boundingBox())!;
      expect(bar.x + bar.width).toBeGreaterThan(550);
      expect(bar.y).toBeLessThan(20);

      // 1:1 shows remote pixels as they are (800 wide here); Fit scales to the window again.
      await page.click('#scale');
      expect(await page.getAttribute('body', 'data-scale')).toBe('1:1');
      await eventually(async () => ((await canvasBox()).width === 800 ? true : undefined), { timeoutMs: 10_000, intervalMs: 50, what: 'the 1:1 canvas' });
      await page.click('#scale');
      expect(await page.getAttribute('body', 'data-scale')).toBe('fit');
      await eventually(async () => ((await canvasBox()).width === fitted.width ? true : undefined), { timeoutMs: 10_000, intervalMs: 50, what: 'the fitted canvas' });

      // Reconnect closes the socket and opens a new one, and the page is connected again.
      expect(sockets).toHaveLength(1);
      await page.click('#reconnect');
      await eventually(() => (sockets.length === 2 && sockets[0]!.isClosed() ? true : undefined), { timeoutMs: 10_000, intervalMs: 50, what: 'a second socket' });
      await page.waitForSelector('body[data-state="connected"]', { timeout: 30_000 });
      expect(sockets[1]!.isClosed()).toBe(false);
      expect(await page.textContent('#status')).toBe('Connected');
    } finally {
      await page.close();
      await client.delete(`/browsers/${session.session_id}`);
    }
  }, 90_000);
});

function upgradeOutcome(url: string): Promise<string> {
  return new Promise((resolve) => {
    const ws = new NodeWebSocket(url);
    ws.once('open', () => {
      ws.close();
      resolve('open');
    });
    ws.once('error', (error) => resolve(error.message));
  });
}
