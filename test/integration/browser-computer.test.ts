import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { decodePng, INPUT_PAGE, postForBytes, type RecordedEvent } from './browser-computer.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/**
 * Every computer operation against one real headful session (its own Xvfb), each checked
 * by what the page saw. One session for the whole file: the machine has two cores.
 */

const VIEWPORT = { width: 1024, height: 768 };

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;
let sessionId: string;
let browser: Browser;
let page: Page;
/** Screen position of the page's (0, 0): the browser's toolbar sits above it. */
let origin: { x: number; y: number };
/** The session's own Xvfb. */
let xvfbPid: number | undefined;

const op = (name: string, body?: unknown) => client.post(`/browsers/${sessionId}/computer/${name}`, body);
const events = () => page.evaluate<RecordedEvent[]>('window.events.splice(0)');
/** Processes by command name with their arguments (ps exits 1 when none match). */
function processes(command: string): { pid: number; args: string }[] {
  let out: string;
  try {
    out = execFileSync('ps', ['-C', command, '-o', 'pid=,args='], { encoding: 'utf8' });
  } catch {
    return [];
  }
  return out.trim().split('\n').filter(Boolean).map((line) => {
    const [, pid, args] = /^\s*(\d+)\s+(.*)$/.exec(line)!;
    return { pid: Number(pid), args: args! };
  });
}
const unclutterCount = () => processes('unclutter').length;

/** Display numbers whose listening socket (path or abstract) belongs to `pid`. */
function displaysOf(pid: number): number[] {
  const inodes = new Set(readdirSync(`/proc/${pid}/fd`).map((fd) => /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`, 'utf8'))?.[1]));
  return readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => inodes.has(fields[6]) && /\.X11-unix\/X\d+$/.test(fields[7] ?? ''))
    .map((fields) => Number(/X(\d+)$/.exec(fields[7]!)![1]));
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/input': INPUT_PAGE });
  ({ http: client } = await newProject(app.tenant.http));
  const before = processes('Xvfb').map((process) => process.pid);
  const res = await client.post('/browsers', { headless: false, viewport: VIEWPORT, start_url: `${pages.url}/input` });
  expect(res.status, res.text).toBe(200);
  sessionId = res.body.session_id;
  xvfbPid = processes('Xvfb').find((process) => !before.includes(process.pid))?.pid;
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  page = browser.contexts()[0]!.pages()[0]!;
  await page.waitForFunction('Array.isArray(window.events)');
  expect((await op('move_mouse', { x: 300, y: 300 })).status).toBe(204);
  await page.waitForFunction('window.events.some((event) => event.type === "mousemove")');
  const [move] = (await events()).filter((event) => event.type === 'mousemove').slice(-1);
  origin = { x: move!.sx - move!.x, y: move!.sy - move!.y };
}, 60_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await app?.close();
  await pages?.close();
});
beforeEach(async () => {
  await page.evaluate('window.scrollTo(0, 0); document.getElementById("text").value = ""; document.activeElement.blur(); getSelection().removeAllRanges(); window.events.length = 0');
});

describe('keyboard', () => {
  it('types Unicode text into the focused input, honouring the delay between keystrokes', async () => {
    await page.focus('#text');
    const text = 'héllo ✓ 日本語 ünï';
    const started = Date.now();
    expect((await op('type', { text, delay: 60 })).status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual((text.length - 1) * 60 * 0.9);
    await expect.poll(() => page.inputValue('#text')).toBe(text);
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

  it('refuses a key name X does not know with 400', async () => {
    const res = await op('press_key', { keys: ['NoSuchKey'] });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('NoSuchKey');
  });
});

describe('mouse', () => {
  it('clicks land at the given coordinates, with the given button and count', async () => {
    const at = { x: origin.x + 200, y: origin.y + 150 };
    expect((await op('click_mouse', at)).status).toBe(204);
    expect((await op('click_mouse', { x: at.x + 10, y: at.y, button: 'right' })).status).toBe(204);
    expect((await op('click_mouse', { x: at.x + 20, y: at.y, num_clicks: 2 })).status).toBe(204);
    await page.waitForFunction('window.events.some((event) => event.type === "dblclick")');
    const seen = (await events()).filter((event) => event.type !== 'mousemove');
    expect(seen.find((event) => event.type === 'click')).toMatchObject({ x: 200, y: 150, sx: at.x, sy: at.y, button: 0 });
    expect(seen.find((event) => event.type === 'contextmenu')).toMatchObject({ x: 210, y: 150, button: 2 });
    expect(seen.find((event) => event.type === 'dblclick')).toMatchObject({ x: 220, y: 150 });
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
    expect(seen.slice(down, up).filter((event) => event.type === 'mousemove').length).toBeGreaterThanOrEqual(5);
    expect((await op('drag_mouse', { path, smooth: true, duration_ms: 200, button: 'middle' })).status).toBe(204);
  });

  it('scrolls the page under the pointer down and back up', async () => {
    expect((await op('scroll', { x: origin.x + 300, y: origin.y + 500, delta_y: 3 })).status).toBe(204);
    await expect.poll(() => page.evaluate<number>('window.scrollY')).toBeGreaterThan(0);
    expect((await op('scroll', { x: origin.x + 300, y: origin.y + 500, delta_y: -10 })).status).toBe(204);
    await expect.poll(() => page.evaluate<number>('window.scrollY')).toBe(0);
  });

  it('hides the cursor while asked to and shows it again', async () => {
    const before = unclutterCount();
    expect((await op('cursor', { hidden: true })).body).toEqual({ ok: true });
    expect(unclutterCount()).toBe(before + 1);
    expect((await op('cursor', { hidden: true })).body).toEqual({ ok: true });
    expect(unclutterCount()).toBe(before + 1);
    expect((await op('cursor', { hidden: false })).body).toEqual({ ok: true });
    await expect.poll(unclutterCount).toBe(before);
  });
});

describe('screen and clipboard', () => {
  it('takes a PNG of the whole display, and of a region', async () => {
    const full = await postForBytes(client, `/browsers/${sessionId}/computer/screenshot`, {});
    expect(full.status).toBe(200);
    expect(full.type).toBe('image/png');
    const image = decodePng(full.bytes);
    expect([image.width, image.height]).toEqual([VIEWPORT.width, VIEWPORT.height]);
    expect(image.pixel(origin.x + 300, origin.y + 250)).toEqual([0, 255, 0]);
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

  it('round-trips text through the clipboard, which the page can paste', async () => {
    const empty = await op('clipboard/read');
    expect(empty.status).toBe(200);
    expect(typeof empty.body.text).toBe('string');
    expect((await op('clipboard/write', { text: 'clip ünï ✓' })).status).toBe(204);
    expect((await op('clipboard/read')).body).toEqual({ text: 'clip ünï ✓' });
    await page.focus('#text');
    await op('press_key', { keys: ['ctrl+v'] });
    await expect.poll(() => page.inputValue('#text')).toBe('clip ünï ✓');
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
        { type: 'type_text', type_text: { text: 'z' } },
      ],
    });
    expect(res.status, res.text).toBe(204);
    await expect.poll(() => page.inputValue('#text')).toBe('xyz');
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
    ['click_mouse', { x: 1, y: 1, click_type: 'hold' }],
    ['move_mouse', { x: 1 }],
    ['drag_mouse', { path: [[1, 1]] }],
    ['drag_mouse', { path: [[1, 1], [2, 2]], steps_per_segment: 0 }],
    ['drag_mouse', { path: [[1, 1], [2, 2]], button: 'back' }],
    ['press_key', { keys: [] }],
    ['type', { text: 'a', speed: 3 }],
    ['screenshot', { region: { x: 0, y: 0, width: 10 } }],
    ['cursor', {}],
    ['clipboard/write', { text: 5 }],
    ['batch', { actions: [{ type: 'sleep', type_text: { text: 'a' } }] }],
    ['batch', { actions: [{ type: 'teleport' }] }],
  ])('answers 400 to %s with %j', async (name, body) => {
    const res = await op(name, body);
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('invalid_request');
  });

  it('is 404 for a session of another project', async () => {
    const { http: other } = await newProject(app.tenant.http);
    const res = await other.post(`/browsers/${sessionId}/computer/get_mouse_position`);
    expect(res.status).toBe(404);
  });
});

describe('a headful session', () => {
  it('leaves no Xvfb, socket or lock file behind after DELETE', async () => {
    expect(xvfbPid).toBeDefined();
    const [display] = displaysOf(xvfbPid!);
    expect(existsSync(`/tmp/.X11-unix/X${display}`)).toBe(true);
    await browser.close().catch(() => undefined);
    expect((await client.delete(`/browsers/${sessionId}`)).status).toBe(204);
    expect(processes('Xvfb').map((process) => process.pid)).not.toContain(xvfbPid);
    expect(existsSync(`/tmp/.X11-unix/X${display}`)).toBe(false);
    expect(existsSync(`/tmp/.X${display}-lock`)).toBe(false);
  }, 30_000);
});
