import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { dominant, ReplayCalls, solidPage, Video } from './replays.fixtures.js';

/**
 * browsers.replays with real Chromium (headless: CDP screencast) and the real ffmpeg and
 * ffprobe, through the API and the agent's upload side door. Nothing is faked. The
 * recordings run for real seconds (sleep), but no assertion depends on how long anything
 * took: durations are checked against bounds the requests set.
 */

const VIEWPORT = { width: 640, height: 480 };

let app: TestApp;
let calls: ReplayCalls;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newProject(app.tenant.http);
  const res = await http.post('/browsers', { headless: true, viewport: VIEWPORT });
  expect(res.status, res.text).toBe(200);
  calls = new ReplayCalls(http, res.body.session_id as string);
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url as string);
  page = browser.contexts()[0]!.pages()[0]!;
  await page.goto(solidPage('red'));
}, 120_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await app?.close();
});

describe('replays of a headless browser', () => {
  it('records an H.264 MP4 at the viewport size in which a page change shows up', async () => {
    await page.goto(solidPage('red'));
    const id = await calls.startOk({ framerate: 10, max_duration_in_seconds: 60 });
    await sleep(1500);
    await page.goto(solidPage('blue'));
    await sleep(1500);
    const stopped = await calls.stop(id);
    expect(stopped.status, stopped.text).toBe(204);

    const download = await calls.download(id);
    expect(download.status).toBe(200);
    expect(download.type).toBe('video/mp4');
    const video = await Video.of(download.bytes);
    try {
      const facts = await video.facts();
      expect(facts).toMatchObject({ codec: 'h264', width: VIEWPORT.width, height: VIEWPORT.height, pixFmt: 'yuv420p', profile: 'High' });
      // At least the 3 s slept, at most the max duration.
      expect(facts.durationS).toBeGreaterThanOrEqual(2.5);
      expect(facts.durationS).toBeLessThanOrEqual(60);
      expect(dominant(await video.colourAt(0.3, 320, 240))).toBe('red');
      expect(dominant(await video.colourAt(facts.durationS - 0.3, 320, 240))).toBe('blue');
    } finally {
      await video.remove();
    }
  });

  it('ends a recording at max_duration_in_seconds by itself, a still page giving a video of that length', async () => {
    const id = await calls.startOk({ max_duration_in_seconds: 2 });
    await calls.ended(id);
    const download = await calls.download(id);
    expect(download.status).toBe(200);
    const video = await Video.of(download.bytes);
    try {
      const facts = await video.facts();
      expect(facts.codec).toBe('h264');
      expect(facts.durationS).toBeGreaterThanOrEqual(1.5);
      expect(facts.durationS).toBeLessThanOrEqual(2.2);
    } finally {
      await video.remove();
    }
    // Ended already: a stop now is Kernel's 400.
    const again = await calls.stop(id);
    expect(again.status).toBe(400);
    expect(again.body.code).toBe('replay_not_recording');
  });

  it('lists several recordings, oldest first, and refuses one more than the limit at once', async () => {
    const first = await calls.startOk();
    const second = await calls.startOk();
    const third = await calls.start();
    expect(third.status).toBe(409);
    expect(third.body.code).toBe('replay_limit_reached');
    expect(third.headers.get('x-should-retry')).toBe('false');

    const busy = await calls.download(first);
    expect(busy.status).toBe(409);
    expect((busy.json as { code: string }).code).toBe('replay_in_progress');

    expect((await calls.stop(first)).status).toBe(204);
    expect((await calls.stop(second)).status).toBe(204);
    const list = await calls.list();
    expect(list.status).toBe(200);
    const ids = (list.body as Array<{ replay_id: string }>).map((r) => r.replay_id);
    expect(ids.indexOf(first)).toBeLessThan(ids.indexOf(second));
    for (const item of (list.body as Array<{ replay_id: string; started_at: string; finished_at: string | null }>).filter((r) => [first, second].includes(r.replay_id))) {
      expect(Date.parse(item.finished_at!)).toBeGreaterThanOrEqual(Date.parse(item.started_at));
    }
    for (const id of [first, second]) expect((await calls.download(id)).status).toBe(200);
  });

  it('refuses bad input with a 400 and starts nothing', async () => {
    const before = ((await calls.list()).body as unknown[]).length;
    for (const body of [
      { framerate: 0 },
      { framerate: 21 },
      { framerate: 2.5 },
      { max_duration_in_seconds: -1 },
      { max_duration_in_seconds: 0 },
      { max_duration_in_seconds: 86_400 },
      { record_audio: true },
      { frame_rate: 10 },
    ]) {
      const res = await calls.start(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect(((await calls.list()).body as unknown[]).length).toBe(before);
  });

  it('answers 404 for an unknown replay or session', async () => {
    expect((await calls.stop('rpl_unknown')).status).toBe(404);
    expect((await calls.download('rpl_unknown')).status).toBe(404);
    const other = new ReplayCalls(calls.client, 'no-such-session');
    expect((await other.list()).status).toBe(404);
    expect((await other.start()).status).toBe(404);
  });
});
