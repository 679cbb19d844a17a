import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { decodePng, INPUT_PAGE, postForBytes, type RecordedEvent } from './browser-computer.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/**
 * Every computer operation against one real headless session, through CDP, each checked
 * by what the page saw, with the headful file's checks. One session for the whole file:
 * the machine has two cores. Nothing is faked.
 */

const VIEWPORT = { width: 1024, height: 768 };

/** A page that pretends to be the tab shown and records every key it gets. */
const SPY_PAGE = `<!doctype html><title>spy</title><input id="text" autofocus><script>
Object.defineProperty(Document.prototype, 'visibilityState', { get: () => 'visible' });
Object.defineProperty(Document.prototype, 'hidden', { get: () => false });
window.keys = []; addEventListener('keydown', (e) => keys.push(e.key), true);
</script>`;

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;
let sessionId: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** Where the page's (0, 0) is on the headless screen: below the toolbar Chromium lays out. */
let origin: { x: number; y: number };

const op = (name: string, body?: unknown) => client.post(`/browsers/${sessionId}/computer/${name}`, body);
const events = () => page.evaluate<RecordedEvent[]>('window.events.splice(0)');

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/input': INPUT_PAGE, '/spy': SPY_PAGE });
  ({ http: client } = await newProject(app.tenant.http));
  const res = await client.post('/browsers', { headless: true, viewport: VIEWPORT, start_url: `${pages.url}/input` });
  expect(res.status, res.text).toBe(200);
  sessionId = res.body.session_id;
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  context = browser.contexts()[0]!;
  page = context.pages()[0]!;
  await page.waitForFunction('Array.isArray(window.events)');
  expect((await op('move_mouse', { x: 300, y: 300 })).status).toBe(204);
  await page.waitForFunction('window.events.some((event) => event.type === "mousemove")');
  const [move] = (await events()).filter((event) => event.type === 'mousemove').slice(-1);
  origin = { x: 300 - move!.x, y: 300 - move!.y };
}, 60_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  if (sessionId) await client?.delete(`/browsers/${sessionId}`);
  await app?.close();
  await pages?.close();
});
beforeEach(async () => {
  await page.bringToFront();
  await page.evaluate('window.scrollTo(0, 0); document.getElementById("text").value = ""; document.activeElement.blur(); getSelection().removeAllRanges(); window.events.length = 0');
});

describe('the screen', () => {
  it('is the window, with the page below the band where a headful browser has its toolbar', async () => {
    const { outer, inner } = await page.evaluate<{ outer: number; inner: number }>('({ outer: outerHeight, inner: innerHeight })');
    expect(origin).toEqual({ x: 0, y: outer - inner });
    expect(origin.y).toBeGreaterThan(0);
  });
});

describe('keyboard', () => {
  it('types ASCII and other Unicode text into the focused input, honouring the delay between keystrokes', async () => {
    await page.focus('#text');
    const text = 'héllo ✓ 日本語 ünï A!';
    const started = Date.now();
    expect((await op('type', { text, delay: 60 })).status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual(([...text].length - 1) * 60 * 0.9);
    await expect.poll(() => page.inputValue('#text')).toBe(text);
    const keys = (await events()).filter((event) => event.type === 'keydown').map((event) => event.key);
    expect(keys).toEqual(expect.arrayContaining(['h', 'l', 'o', ' ', 'A', '!', 'Shift']));
  });

  it('presses keysyms and combos, with hold_keys held around them', async () => {
    await page.focus('#text');
    await op('type', { text: 'abc' });
    expect((await op('press_key', { keys: ['ctrl+a', 'BackSpace'] })).status).toBe(204);
    await expect.poll(() => page.inputValue('#text')).toBe('');
    expect((await op('press_key', { keys: ['a'], hold_keys: ['shift'] })).status).toBe(204);
    expect((await op('press_key', { keys: ['b'], duration: 50 })).status).toBe(204);
    await expect.poll(() => page.inputValue('#text')).toBe('Ab');
    expect((await events()).some((event) => event.type === 'keydown' && event.key === 'a' && event.ctrl)).toBe(true);
  });

  it('replaces a selection: Ctrl+a then typing, and moves by words with ctrl+shift+Left', async () => {
    await page.focus('#text');
    await op('type', { text: 'old text' });
    await op('press_key', { keys: ['Ctrl+a'] });
    await op('type', { text: 'new' });
    await expect.poll(() => page.inputValue('#text')).toBe('new');
    await op('type', { text: ' words here' });
    await op('press_key', { keys: ['ctrl+shift+Left', 'Delete'] });
    await expect.poll(() => page.inputValue('#text')).toBe('new words ');
    await op('press_key', { keys: ['Home', 'End', 'Return', 'Tab', 'F2', 'Escape'] });
    const keys = (await events()).filter((event) => event.type === 'keydown').map((event) => event.key);
    expect(keys).toEqual(expect.arrayContaining(['Home', 'End', 'Enter', 'Tab', 'F2', 'Escape', 'ArrowLeft', 'Delete']));
  });

  it('refuses a key name X does not know with 400, and pressing nothing', async () => {
    await page.focus('#text');
    for (const keys of [['NoSuchKey'], ['return'], ['ctrl+'], ['a', 'NoSuchKey']]) {
      const res = await op('press_key', { keys });
      expect(res.status, JSON.stringify(keys)).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    expect((await op('press_key', { keys: ['NoSuchKey'] })).body.message).toContain('NoSuchKey');
    expect(await page.inputValue('#text')).toBe('');
  });
});

describe('mouse', () => {
  it('clicks land at the given coordinates, with the given button and count', async () => {
    const at = { x: origin.x + 200, y: origin.y + 150 };
    expect((await op('click_mouse', at)).status).toBe(204);
    expect((await op('click_mouse', { x: at.x + 10, y: at.y, button: 'right' })).status).toBe(204);
    expect((await op('click_mouse', { x: at.x + 15, y: at.y, button: 'middle' })).status).toBe(204);
    expect((await op('click_mouse', { x: at.x + 20, y: at.y, num_clicks: 2 })).status).toBe(204);
    await page.waitForFunction('window.events.some((event) => event.type === "dblclick")');
    const seen = (await events()).filter((event) => event.type !== 'mousemove');
    expect(seen.find((event) => event.type === 'click')).toMatchObject({ x: 200, y: 150, button: 0, detail: 1 });
    expect(seen.find((event) => event.type === 'contextmenu')).toMatchObject({ x: 210, y: 150, button: 2 });
    expect(seen.find((event) => event.type === 'mousedown' && event.button === 1)).toMatchObject({ x: 215, y: 150 });
    expect(seen.find((event) => event.type === 'dblclick')).toMatchObject({ x: 220, y: 150, detail: 2 });
  });

  it('presses and releases separately with click_type down and up, holding keys', async () => {
    const at = { x: origin.x + 50, y: origin.y + 120 };
    await op('click_mouse', { ...at, click_type: 'down', hold_keys: ['shift'] });
    await op('click_mouse', { ...at, click_type: 'up' });
    await page.waitForFunction('window.events.some((event) => event.type === "mouseup")');
    const seen = (await events()).filter((event) => event.type === 'mousedown' || event.type === 'mouseup');
    expect(seen.map((event) => event.type)).toEqual(['mousedown', 'mouseup']);
    expect(seen[0]).toMatchObject({ x: 50, y: 120, shift: true });
    expect(seen[1]!.shift).toBe(false);
  });

  it('moves smoothly along a path of many points and reports where the pointer is', async () => {
    await op('move_mouse', { x: origin.x + 10, y: origin.y + 110 });
    await events();
    expect((await op('move_mouse', { x: origin.x + 500, y: origin.y + 350, smooth: true, duration_ms: 300 })).status).toBe(204);
    await page.waitForFunction('window.events.some((event) => event.type === "mousemove" && event.x === 500 && event.y === 350)');
    const moves = (await events()).filter((event) => event.type === 'mousemove');
    expect(moves.length).toBeGreaterThan(5);
    expect(moves.at(-1)).toMatchObject({ x: 500, y: 350 });
    const position = await op('get_mouse_position');
    expect(position.status).toBe(200);
    expect(position.body).toEqual({ x: origin.x + 500, y: origin.y + 350 });
  });

  it('drags along a path with the button held from the first point to the last', async () => {
    const path = [
      [origin.x + 20, origin.y + 120],
      [origin.x + 220, origin.y + 220],
      [origin.x + 400, origin.y + 130],
    ];
    expect((await op('drag_mouse', { path, steps_per_segment: 5, step_delay_ms: 25 })).status).toBe(204);
    await page.waitForFunction('window.events.some((event) => event.type === "mouseup")');
    const seen = await events();
    const down = seen.findIndex((event) => event.type === 'mousedown');
    const up = seen.findIndex((event) => event.type === 'mouseup');
    expect(seen[down]).toMatchObject({ x: 20, y: 120 });
    expect(seen[up]).toMatchObject({ x: 400, y: 130 });
    expect(seen.slice(down, up).filter((event) => event.type === 'mousemove').length).toBeGreaterThanOrEqual(10);
    expect((await op('drag_mouse', { path, smooth: true, duration_ms: 200, button: 'middle' })).status).toBe(204);
    await expect.poll(async () => (await events()).some((event) => event.type === 'mouseup' && event.button === 1)).toBe(true);
  });

  it('scrolls the page under the pointer by 120 pixels a notch, as a headful scroll moves it, and back up', async () => {
    expect((await op('scroll', { x: origin.x + 300, y: origin.y + 500, delta_y: 3 })).status).toBe(204);
    await expect.poll(() => page.evaluate<number>('window.scrollY')).toBe(360);
    expect((await op('scroll', { x: origin.x + 300, y: origin.y + 500, delta_y: -10 })).status).toBe(204);
    await expect.poll(() => page.evaluate<number>('window.scrollY')).toBe(0);
  });

  it('sends nothing to the page for a click on the toolbar band, where no page is', async () => {
    expect((await op('click_mouse', { x: 100, y: 5 })).status).toBe(204);
    expect((await op('click_mouse', { x: origin.x + 30, y: origin.y + 30 })).status).toBe(204);
    await page.waitForFunction('window.events.some((event) => event.type === "click")');
    expect((await events()).filter((event) => event.type === 'click').map((event) => [event.x, event.y])).toEqual([[30, 30]]);
  });

  it('answers the cursor call with ok, as there is no pointer drawn to hide', async () => {
    expect((await op('cursor', { hidden: true })).body).toEqual({ ok: true });
    expect((await op('cursor', { hidden: false })).body).toEqual({ ok: true });
  });
});

describe('screen and clipboard', () => {
  it('takes a PNG of the whole window, and of a region', async () => {
    const full = await postForBytes(client, `/browsers/${sessionId}/computer/screenshot`, {});
    expect(full.status).toBe(200);
    expect(full.type).toBe('image/png');
    const image = decodePng(full.bytes);
    expect([image.width, image.height]).toEqual([VIEWPORT.width, VIEWPORT.height]);
    expect(image.pixel(origin.x + 300, origin.y + 250)).toEqual([0, 255, 0]);
    expect(image.pixel(origin.x + 300, origin.y + 50)).toEqual([255, 255, 255]);
    expect(image.pixel(300, 5)).not.toEqual([255, 255, 255]);
    const region = { x: origin.x + 100, y: origin.y + 150, width: 200, height: 100 };
    const part = decodePng((await postForBytes(client, `/browsers/${sessionId}/computer/screenshot`, { region })).bytes);
    expect([part.width, part.height]).toEqual([200, 100]);
    expect([part.pixel(0, 0), part.pixel(199, 99)]).toEqual([
      [0, 255, 0],
      [0, 255, 0],
    ]);
    const outside = await op('screenshot', { region: { x: 1000, y: 0, width: 100, height: 10 } });
    expect(outside.status).toBe(400);
  });

  it('writes text the page can paste with ctrl+v, and reads it back', async () => {
    expect((await op('clipboard/write', { text: 'clip ünï ✓' })).status).toBe(204);
    expect((await op('clipboard/read')).body).toEqual({ text: 'clip ünï ✓' });
    await page.focus('#text');
    await op('press_key', { keys: ['ctrl+v'] });
    await expect.poll(() => page.inputValue('#text')).toBe('clip ünï ✓');
  });

  it('reads what the page copied with ctrl+c', async () => {
    await page.focus('#text');
    await op('type', { text: 'copied ✓ here' });
    await op('press_key', { keys: ['ctrl+a', 'ctrl+c'] });
    expect((await op('clipboard/read')).body).toEqual({ text: 'copied ✓ here' });
  });

  it('leaves the page no permission to read the clipboard after a read', async () => {
    await op('clipboard/write', { text: 'secret' });
    expect((await op('clipboard/read')).body).toEqual({ text: 'secret' });
    const cdp = await context.newCDPSession(page);
    try {
      await cdp.send('Emulation.setFocusEmulationEnabled', { enabled: true });
      // With a user gesture, the most a page's script can have (a click on the page gives one).
      const { result } = await cdp.send('Runtime.evaluate', {
        expression: 'navigator.clipboard.readText().then((text) => "read: " + text, (error) => "refused: " + error.message)',
        awaitPromise: true,
        userGesture: true,
        returnByValue: true,
      });
      const stolen = result.value as string;
      expect(stolen).toMatch(/^refused: .*permission/i);
    } finally {
      await cdp.detach();
    }
  });
});

describe('the page acted on', () => {
  it('is a new foreground tab while it is open, then the tab shown before it', async () => {
    const second = await context.newPage();
    try {
      await second.goto(`${pages.url}/input`);
      await second.focus('#text');
      await op('type', { text: 'to second' });
      await expect.poll(() => second.inputValue('#text')).toBe('to second');
      expect(await page.inputValue('#text')).toBe('');
    } finally {
      await second.close();
    }
    await page.focus('#text');
    await op('type', { text: 'to first' });
    await expect.poll(() => page.inputValue('#text')).toBe('to first');
  });
});

/**
 * A bare CDP client with flat sessions: Playwright emulates focus on every page it
 * attaches to, which keeps every tab visible, so tab switches are tried without it.
 */
class RawCdp {
  private nextId = 0;
  private readonly pending = new Map<number, (message: { result?: any; error?: { message: string } }) => void>();
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id !== undefined) this.pending.get(message.id)?.(message);
    });
  }

  static async open(url: string): Promise<RawCdp> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new RawCdp(ws);
  }

  send<T = any>(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<T> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, (message) => (message.error ? reject(new Error(`${method}: ${message.error.message}`)) : resolve(message.result as T)));
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  /** A page's value of `expression`, read through a session of this client's. */
  async evaluate<T>(targetId: string, expression: string): Promise<T> {
    const { sessionId } = await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    const { result } = await this.send<{ result: { value: T } }>('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
    await this.send('Target.detachFromTarget', { sessionId });
    return result.value;
  }

  close(): void {
    this.ws.close();
  }
}

describe('the page acted on, with no client keeping tabs visible', () => {
  let id: string;
  let cdp: RawCdp;
  let first: string;
  const act = (name: string, body?: unknown) => client.post(`/browsers/${id}/computer/${name}`, body);

  beforeAll(async () => {
    const res = await client.post('/browsers', { headless: true, viewport: VIEWPORT, start_url: `${pages.url}/input` });
    expect(res.status, res.text).toBe(200);
    id = res.body.session_id;
    cdp = await RawCdp.open(res.body.cdp_ws_url);
    const { targetInfos } = await cdp.send<{ targetInfos: { targetId: string; type: string }[] }>('Target.getTargets');
    first = targetInfos.find((info) => info.type === 'page')!.targetId;
    await eventually(() => cdp.evaluate<boolean>(first, 'Array.isArray(window.events)'), { timeoutMs: 15_000, intervalMs: 100, what: 'the input page to load' });
  }, 60_000);
  afterAll(async () => {
    cdp?.close();
    if (id) await client.delete(`/browsers/${id}`);
  });

  /** Focuses the input of the tab shown by clicking it, then types (a hidden tab's page fills its window, so the shown one says where its page is). */
  async function typeIntoShownTab(shown: string, text: string): Promise<void> {
    const top = await cdp.evaluate<number>(shown, 'outerHeight - innerHeight');
    expect((await act('click_mouse', { x: 20, y: top + 10 })).status).toBe(204);
    expect((await act('press_key', { keys: ['End'] })).status).toBe(204);
    expect((await act('type', { text })).status).toBe(204);
  }

  it('is not a background tab that claims to be visible', async () => {
    expect((await act('get_mouse_position')).status).toBe(200);
    const { targetId: spy } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: `${pages.url}/spy`, background: true });
    await expect.poll(() => cdp.evaluate(spy, 'Array.isArray(window.keys) && document.visibilityState')).toBe('visible');
    await typeIntoShownTab(first, 'private');
    await expect.poll(() => cdp.evaluate(first, 'document.getElementById("text").value')).toBe('private');
    expect(await cdp.evaluate(spy, 'window.keys')).toEqual([]);
    await cdp.send('Target.closeTarget', { targetId: spy });
  });

  it('follows a tab switch with Target.activateTarget, and back', async () => {
    const { targetId: second } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: `${pages.url}/input` });
    await expect.poll(() => cdp.evaluate(second, 'Array.isArray(window.events)')).toBe(true);
    await cdp.send('Target.activateTarget', { targetId: first });
    await cdp.evaluate(first, 'document.getElementById("text").value = ""');
    await typeIntoShownTab(first, 'one');
    await expect.poll(() => cdp.evaluate(first, 'document.getElementById("text").value')).toBe('one');
    await cdp.send('Target.activateTarget', { targetId: second });
    await typeIntoShownTab(second, 'two');
    await expect.poll(() => cdp.evaluate(second, 'document.getElementById("text").value')).toBe('two');
    await cdp.send('Target.activateTarget', { targetId: first });
    await typeIntoShownTab(first, '!');
    await expect.poll(() => cdp.evaluate(first, 'document.getElementById("text").value')).toBe('one!');
    expect(await cdp.evaluate(second, 'document.getElementById("text").value')).toBe('two');
  });

  it('writes the clipboard from a page that is not a secure context, and says why it cannot read it there', async () => {
    const { targetId: blank } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    try {
      expect((await act('clipboard/write', { text: 'from blank ✓' })).status).toBe(204);
      const read = await act('clipboard/read');
      expect(read.status, read.text).toBe(409);
      expect(read.body.code).toBe('clipboard_unavailable');
    } finally {
      await cdp.send('Target.closeTarget', { targetId: blank });
    }
    const open = async () => (await cdp.send<{ targetInfos: { targetId: string }[] }>('Target.getTargets')).targetInfos.some((info) => info.targetId === blank);
    await expect.poll(open).toBe(false);
    expect((await act('clipboard/read')).body).toEqual({ text: 'from blank ✓' });
  });
});

describe('batch', () => {
  it('runs actions in order', async () => {
    await page.focus('#text');
    const res = await op('batch', {
      actions: [
        { type: 'type_text', type_text: { text: 'x' } },
        { type: 'sleep', sleep: { duration_ms: 20 } },
        { type: 'press_key', press_key: { keys: ['y'] } },
        { type: 'set_cursor', set_cursor: { hidden: false } },
        { type: 'click_mouse', click_mouse: { x: origin.x + 300, y: origin.y + 300 } },
        { type: 'type_text', type_text: { text: 'z' } },
      ],
    });
    expect(res.status, res.text).toBe(204);
    await expect.poll(() => page.inputValue('#text')).toBe('xy');
    expect((await events()).some((event) => event.type === 'click' && event.x === 300 && event.y === 300)).toBe(true);
  });

  it('stops at the first failing action and says which one', async () => {
    await page.focus('#text');
    const res = await op('batch', {
      actions: [
        { type: 'type_text', type_text: { text: 'a' } },
        { type: 'click_mouse', click_mouse: { x: 5000, y: 10 } },
        { type: 'type_text', type_text: { text: 'b' } },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('actions[1] (click_mouse)');
    await expect.poll(() => page.inputValue('#text')).toBe('a');
  });
});

describe('validation and access', () => {
  it.each([
    ['click_mouse', { x: 1, y: 1, button: 'side' }],
    ['click_mouse', { x: -1, y: 1 }],
    ['click_mouse', { x: VIEWPORT.width, y: 1 }],
    ['click_mouse', { x: 1, y: VIEWPORT.height }],
    ['click_mouse', { x: 1, y: 1, click_type: 'hold' }],
    ['move_mouse', { x: 1 }],
    ['move_mouse', { x: 1, y: 5000 }],
    ['scroll', { x: 5000, y: 1, delta_y: 1 }],
    ['drag_mouse', { path: [[1, 1]] }],
    ['drag_mouse', { path: [[1, 1], [2, 5000]] }],
    ['drag_mouse', { path: [[1, 1], [2, 2]], steps_per_segment: 0 }],
    ['drag_mouse', { path: [[1, 1], [2, 2]], button: 'back' }],
    ['press_key', { keys: [] }],
    ['type', { text: 'a', speed: 3 }],
    ['screenshot', { region: { x: 0, y: 0, width: 10 } }],
    ['screenshot', { region: { x: 0, y: 700, width: 10, height: 100 } }],
    ['cursor', {}],
    ['clipboard/write', { text: 5 }],
    ['batch', { actions: [{ type: 'sleep', type_text: { text: 'a' } }] }],
    ['batch', { actions: [{ type: 'teleport' }] }],
  ])('answers 400 to %s with %j', async (name, body) => {
    const res = await op(name, body);
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('invalid_request');
  });

  it('changes nothing on the page for a refused request', async () => {
    await page.focus('#text');
    expect((await op('click_mouse', { x: 1, y: 1, button: 'side' })).status).toBe(400);
    expect((await op('drag_mouse', { path: [[origin.x + 10, origin.y + 120], [5000, 5000]] })).status).toBe(400);
    expect((await events()).filter((event) => event.type !== 'mousemove')).toEqual([]);
  });

  it('is 404 for a session of another project', async () => {
    const { http: other } = await newProject(app.tenant.http);
    const res = await other.post(`/browsers/${sessionId}/computer/get_mouse_position`);
    expect(res.status).toBe(404);
  });
});
