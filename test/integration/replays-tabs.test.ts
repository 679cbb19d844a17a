import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { dominant, ReplayCalls, solidPage, Video } from './replays.fixtures.js';

/**
 * A headless recording follows the tab in front: a tab a client opens, a tab brought back
 * to the front, a popup a page opens. Real Chromium (headless, CDP screencast), ffmpeg and
 * Postgres; nothing is faked. The video is read as the sequence of colours its frames
 * show, four a second, so no assertion depends on when a switch happened.
 */

const run = promisify(execFile);
const VIEWPORT = { width: 320, height: 240 };

let app: TestApp;
let calls: ReplayCalls;
let browser: Browser;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newProject(app.tenant.http);
  const res = await http.post('/browsers', { headless: true, viewport: VIEWPORT });
  expect(res.status, res.text).toBe(200);
  calls = new ReplayCalls(http, res.body.session_id as string);
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url as string);
}, 120_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await app?.close();
});

/** The dominant colour at the frame's centre, four frames a second, repeats and in-between colours dropped. */
async function colourSequence(video: Video): Promise<string[]> {
  const { stdout } = await run(
    'ffmpeg',
    ['-v', 'error', '-i', video.file, '-vf', `fps=4,crop=8:8:${VIEWPORT.width / 2 - 4}:${VIEWPORT.height / 2 - 4},scale=1:1`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'],
    { encoding: 'buffer', maxBuffer: 1 << 20 },
  );
  const pixels = stdout as unknown as Buffer;
  const sequence: string[] = [];
  for (let i = 0; i + 3 <= pixels.length; i += 3) {
    const colour = dominant([pixels[i]!, pixels[i + 1]!, pixels[i + 2]!]);
    if (colour !== 'other' && sequence.at(-1) !== colour) sequence.push(colour);
  }
  return sequence;
}

const SHOWN_MS = 6000;

describe('a headless recording with several tabs', () => {
  it('moves to a new tab, back to a tab brought to the front, and to a popup a page opens', { timeout: 90_000 }, async () => {
    const context = browser.contexts()[0]!;
    const first = context.pages()[0]!;
    await first.goto(
      `data:text/html,<html><body style="margin:0;background:red;height:100vh">` +
        `<button id="open" style="width:100vw;height:100vh;opacity:0" onclick="window.open().document.write('<body style=&quot;margin:0;background:lime;height:100vh&quot;></body>')"></button></body></html>`,
    );
    const id = await calls.startOk({ framerate: 10, max_duration_in_seconds: 60 });
    // Each tab stays in front past the 5 s a switch may take on a loaded host (a new tab's first frame).
    await sleep(SHOWN_MS);
    const second = await context.newPage();
    await second.goto(solidPage('blue'));
    await sleep(SHOWN_MS);
    await first.bringToFront();
    await sleep(SHOWN_MS);
    const popup = context.waitForEvent('page');
    await first.click('#open');
    await (await popup).waitForLoadState();
    await sleep(SHOWN_MS);
    expect((await calls.stop(id)).status).toBe(204);

    const download = await calls.download(id);
    expect(download.status).toBe(200);
    const video = await Video.of(download.bytes);
    try {
      expect(await colourSequence(video)).toEqual(['red', 'blue', 'red', 'green']);
    } finally {
      await video.remove();
    }
  });

  it('does not follow a hidden tab (the agent’s own curl pages)', { timeout: 60_000 }, async () => {
    const page = browser.contexts()[0]!.pages()[0]!;
    await page.bringToFront();
    await page.goto(solidPage('red'));
    const id = await calls.startOk({ framerate: 10, max_duration_in_seconds: 60 });
    await sleep(1000);
    const cdp = await browser.newBrowserCDPSession();
    const { targetId } = await cdp.send('Target.createTarget', { url: solidPage('blue'), hidden: true });
    await sleep(SHOWN_MS);
    expect((await calls.stop(id)).status).toBe(204);
    await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined);
    const video = await Video.of((await calls.download(id)).bytes);
    try {
      expect(await colourSequence(video)).toEqual(['red']);
    } finally {
      await video.remove();
    }
  });
});
