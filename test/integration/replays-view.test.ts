import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { DEFAULT_REPLAY_SETTINGS } from '../../api/src/config-replays.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import { sweepReplays } from '../../api/src/modules/replays/sweep.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { expiredToken } from './authorization-tokens.fixtures.js';
import { newProject } from './browsers.fixtures.js';
import { ReplayCalls, Video } from './replays.fixtures.js';

/**
 * replay_view_url: the page that plays a stored recording without an API key, and the
 * video behind it with Range requests. Real Chromium (headless), ffmpeg, ffprobe and
 * Postgres; nothing is faked. Expired tokens are signed by the service's own signer on a
 * clock set back past their lifetime.
 */

interface ListedReplay {
  replay_id: string;
  finished_at: string | null;
  replay_view_url?: string;
}

let app: TestApp;
let calls: ReplayCalls;
let finished: string;
let viewUrl: URL;

const listed = async (id: string): Promise<ListedReplay> => {
  const res = await calls.list();
  expect(res.status, res.text).toBe(200);
  return (res.body as ListedReplay[]).find((r) => r.replay_id === id)!;
};
const publicGet = (path: string, headers: Record<string, string> = {}) => fetch(new URL(path, calls.client.baseUrl), { headers });
const tokenOf = (url: URL) => url.searchParams.get('token')!;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newProject(app.tenant.http);
  const res = await http.post('/browsers', { headless: true, viewport: { width: 320, height: 240 } });
  expect(res.status, res.text).toBe(200);
  calls = new ReplayCalls(http, res.body.session_id as string);
  finished = await calls.startOk({ framerate: 5 });
  await sleep(1500);
  expect((await calls.stop(finished)).status).toBe(204);
  viewUrl = new URL((await listed(finished)).replay_view_url!);
}, 120_000);
afterAll(async () => {
  await app?.close();
});

describe('replay_view_url', () => {
  it('is absent while the recording runs, and present in the list once it is stored', async () => {
    const running = await calls.start({ framerate: 5 });
    expect(running.status, running.text).toBe(200);
    const id = running.body.replay_id as string;
    try {
      expect(running.body).not.toHaveProperty('replay_view_url');
      expect(await listed(id)).not.toHaveProperty('replay_view_url');
      // Even a token made for it by hand shows no page before the video exists.
      const { token } = await createCdpTokens(app.deps).issue(id, 'replay_view');
      const early = await publicGet(`/replays/${id}/view?token=${token}`);
      expect(early.status).toBe(409);
      expect(((await early.json()) as { code: string }).code).toBe('replay_in_progress');
    } finally {
      expect((await calls.stop(id)).status).toBe(204);
    }
    expect((await listed(id)).replay_view_url).toMatch(new RegExp(`/replays/${id}/view\\?token=`));
  });

  it('opens a page with the video in it, under a CSP, with no API key', async () => {
    expect(viewUrl.origin).toBe(new URL(calls.client.baseUrl).origin);
    const page = await fetch(viewUrl);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("media-src 'self'");
    expect(csp).not.toContain('script-src');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('cache-control')).toBe('no-store');
    const html = await page.text();
    const src = /<video[^>]* src="([^"]+)"/.exec(html)?.[1];
    expect(src).toBe(`video?token=${encodeURIComponent(tokenOf(viewUrl))}`);

    // The video the page points at, resolved as a browser resolves it: the stored MP4.
    const video = await fetch(new URL(src!.replaceAll('&amp;', '&'), viewUrl));
    expect(video.status).toBe(200);
    expect(video.headers.get('content-type')).toBe('video/mp4');
    expect(video.headers.get('accept-ranges')).toBe('bytes');
    const bytes = Buffer.from(await video.arrayBuffer());
    expect(bytes.equals((await calls.download(finished)).bytes)).toBe(true);
    const file = await Video.of(bytes);
    try {
      expect((await file.facts()).codec).toBe('h264');
    } finally {
      await file.remove();
    }
  });

  it('serves byte ranges, so a player can seek, and refuses a range past the end', async () => {
    const whole = (await calls.download(finished)).bytes;
    const videoPath = `/replays/${finished}/video?token=${tokenOf(viewUrl)}`;
    const first = await publicGet(videoPath, { range: 'bytes=0-99' });
    expect(first.status).toBe(206);
    expect(first.headers.get('content-range')).toBe(`bytes 0-99/${whole.length}`);
    expect(Buffer.from(await first.arrayBuffer()).equals(whole.subarray(0, 100))).toBe(true);

    const tail = await publicGet(videoPath, { range: 'bytes=-50' });
    expect(tail.status).toBe(206);
    expect(Buffer.from(await tail.arrayBuffer()).equals(whole.subarray(whole.length - 50))).toBe(true);

    const middle = await publicGet(videoPath, { range: `bytes=100-` });
    expect(middle.status).toBe(206);
    expect(Buffer.from(await middle.arrayBuffer()).equals(whole.subarray(100))).toBe(true);

    const past = await publicGet(videoPath, { range: `bytes=${whole.length}-` });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${whole.length}`);

    // The API-key download honours ranges too.
    const headers: Record<string, string> = { ...calls.client.extraHeaders, authorization: `Bearer ${calls.client.key}`, range: 'bytes=10-19' };
    const download = await fetch(`${calls.client.baseUrl}/browsers/${calls.sessionId}/replays/${finished}`, { headers });
    expect(download.status).toBe(206);
    expect(Buffer.from(await download.arrayBuffer()).equals(whole.subarray(10, 20))).toBe(true);
  });

  it('refuses a missing, forged, expired or other purpose’s token, and another replay’s id with this one', async () => {
    const token = tokenOf(viewUrl);
    const other = await calls.startOk({ framerate: 5 });
    expect((await calls.stop(other)).status).toBe(204);
    const { token: uploadToken } = await createCdpTokens(app.deps).issue(finished, 'replay');
    const cases: Array<[string, number]> = [
      [`/replays/${finished}/view`, 401],
      [`/replays/${finished}/view?token=nonsense`, 401],
      [`/replays/${finished}/view?token=${await expiredToken(app, finished, 'replay_view')}`, 401],
      [`/replays/${finished}/video?token=${await expiredToken(app, finished, 'replay_view')}`, 401],
      [`/replays/${finished}/view?token=${uploadToken}`, 403],
      [`/replays/${other}/view?token=${token}`, 403],
      [`/replays/${other}/video?token=${token}`, 403],
      [`/replays/rpl_unknown/video?token=${token}`, 403],
    ];
    for (const [path, status] of cases) {
      const res = await publicGet(path);
      expect(res.status, path).toBe(status);
      expect(res.headers.get('content-type'), path).toMatch(/json/);
    }
    // The other replay's own URL works: the refusals above were the token's, not the replay's.
    const own = new URL((await listed(other)).replay_view_url!);
    expect((await fetch(new URL(`video?token=${tokenOf(own)}`, own))).status).toBe(200);
  });

  it('is a 404 once the recording expired and the sweep deleted it', async () => {
    const id = await calls.startOk({ framerate: 5 });
    expect((await calls.stop(id)).status).toBe(204);
    const url = new URL((await listed(id)).replay_view_url!);
    expect((await fetch(url)).status).toBe(200);
    const retentionMs = (app.deps.settings.replays ?? DEFAULT_REPLAY_SETTINGS).retentionDays * 86_400_000;
    await sweepReplays({ ...app.deps, clock: { now: () => new Date(Date.now() + retentionMs + 60_000) } });
    expect((await fetch(url)).status).toBe(404);
  });
});
