import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import { insertReplay } from '../../api/src/modules/replays/store.js';
import { OVERDUE_GRACE_MS, sweepReplays } from '../../api/src/modules/replays/sweep.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { dominant, ReplayCalls, solidPage, Video } from './replays.fixtures.js';

/**
 * Replays across their life: a headful browser recorded from its display, a recording
 * finished and stored by the agent when its session is deleted, the side door's refusals,
 * other projects' keys, and the retention sweep. Real Chromium, Xvfb, ffmpeg and Postgres;
 * nothing is faked. The sweep is run with a clock moved forward instead of waiting days.
 */

let app: TestApp;
let http: HttpClient;
let other: HttpClient;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http } = await newProject(app.tenant.http));
  ({ http: other } = await newProject(app.tenant.http));
}, 60_000);
afterAll(async () => {
  await app?.close();
});

async function newSession(body: Record<string, unknown>): Promise<{ calls: ReplayCalls; cdpUrl: string }> {
  const res = await http.post('/browsers', body);
  expect(res.status, res.text).toBe(200);
  return { calls: new ReplayCalls(http, res.body.session_id as string), cdpUrl: res.body.cdp_ws_url as string };
}

const later = (ms: number) => ({ ...app.deps, clock: { now: () => new Date(Date.now() + ms) } });

describe('replays', () => {
  it('records a headful browser from its display at the viewport size, with the page change in it', { timeout: 90_000 }, async () => {
    const viewport = { width: 800, height: 600 };
    const { calls, cdpUrl } = await newSession({ headless: false, viewport });
    const browser = await chromium.connectOverCDP(cdpUrl);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.goto(solidPage('red'));
      const id = await calls.startOk({ framerate: 5 });
      await sleep(1500);
      await page.goto(solidPage('blue'));
      await sleep(1500);
      expect((await calls.stop(id)).status).toBe(204);
      const download = await calls.download(id);
      expect(download.status).toBe(200);
      const video = await Video.of(download.bytes);
      try {
        const facts = await video.facts();
        expect(facts).toMatchObject({ codec: 'h264', width: viewport.width, height: viewport.height });
        expect(facts.durationS).toBeGreaterThanOrEqual(2.5);
        expect(dominant(await video.colourAt(0.3, 400, 400))).toBe('red');
        expect(dominant(await video.colourAt(facts.durationS - 0.3, 400, 400))).toBe('blue');
      } finally {
        await video.remove();
      }
    } finally {
      await browser.close().catch(() => undefined);
    }
  });

  it('finishes and keeps a recording still running when its session is deleted', { timeout: 90_000 }, async () => {
    const { calls } = await newSession({ headless: true, viewport: { width: 320, height: 240 } });
    const id = await calls.startOk({ framerate: 5 });
    await sleep(1500);
    expect((await http.delete(`/browsers/${calls.sessionId}`)).status).toBe(204);
    await calls.ended(id);
    const download = await calls.download(id);
    expect(download.status).toBe(200);
    const video = await Video.of(download.bytes);
    try {
      expect(await video.facts()).toMatchObject({ codec: 'h264', width: 320, height: 240 });
    } finally {
      await video.remove();
    }
    // The session is gone: no new recording.
    expect((await calls.start()).status).toBe(404);
  });

  it('is invisible to another project: list, start, stop and download are 404', async () => {
    const { calls } = await newSession({ headless: true });
    const id = await calls.startOk();
    const intruder = new ReplayCalls(other, calls.sessionId);
    expect((await intruder.list()).status).toBe(404);
    expect((await intruder.start()).status).toBe(404);
    expect((await intruder.stop(id)).status).toBe(404);
    expect((await intruder.download(id)).status).toBe(404);
    // Unchanged by the attempts: still recording, and its owner stops it.
    expect((await calls.stop(id)).status).toBe(204);
    expect((await calls.download(id)).status).toBe(200);
  });

  it('takes a video at the side door only with the recording’s own token, and only while it records', async () => {
    const { calls } = await newSession({ headless: true });
    const id = await calls.startOk();
    const put = (replayId: string, token?: string) =>
      fetch(`${app.url}/internal/replays/${replayId}/video${token ? `?token=${token}` : ''}`, { method: 'PUT', headers: { 'content-type': 'video/mp4' }, body: 'not a video' });
    const tokens = createCdpTokens(app.deps);
    expect((await put(id)).status).toBe(401);
    expect((await put(id, (await tokens.issue('rpl_other', 'replay')).token)).status).toBe(403);
    // A token of another purpose for the same id (what a CDP URL carries) is refused too.
    expect((await put(id, (await tokens.issue(id, 'cdp')).token)).status).toBe(403);
    expect((await calls.stop(id)).status).toBe(204);
    // Stored: the same, valid token cannot replace the video.
    expect((await put(id, (await tokens.issue(id, 'replay')).token)).status).toBe(404);
    const download = await calls.download(id);
    expect(download.bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });

  it('ends as failed a recording its browser does not know (its agent was replaced), on stop', async () => {
    const { calls } = await newSession({ headless: true });
    const row = (await app.deps.db.query<{ org_id: string; project_id: string }>('SELECT org_id, project_id FROM browser_sessions WHERE id = $1', [calls.sessionId])).rows[0]!;
    const now = new Date();
    await insertReplay(app.deps.db, {
      id: 'rpl_unknown_to_agent',
      session_id: calls.sessionId,
      org_id: row.org_id,
      project_id: row.project_id,
      framerate: 10,
      max_duration_s: 60,
      started_at: now,
      // As the service sets it (7 days): the retention test below counts on it.
      expires_at: new Date(now.getTime() + 7 * 86_400_000),
    });
    expect((await calls.stop('rpl_unknown_to_agent')).status).toBe(204);
    const download = await calls.download('rpl_unknown_to_agent');
    expect(download.status).toBe(409);
    expect((download.json as { code: string }).code).toBe('replay_failed');
  });

  it('fails a recording whose browser never reported, and deletes videos once retention passed', { timeout: 90_000 }, async () => {
    const { calls } = await newSession({ headless: true });
    const kept = await calls.startOk();
    expect((await calls.stop(kept)).status).toBe(204);
    const abandoned = await calls.startOk({ max_duration_in_seconds: 60 });

    // Before its max duration and the grace, a recording is left alone.
    expect((await sweepReplays(later(30_000))).abandoned).toBe(0);
    expect((await sweepReplays(later(60_000 + OVERDUE_GRACE_MS + 5_000))).abandoned).toBe(1);
    const failed = await calls.download(abandoned);
    expect(failed.status).toBe(409);
    expect((failed.json as { code: string }).code).toBe('replay_failed');

    const row = (await app.deps.db.query<{ org_id: string; project_id: string }>('SELECT org_id, project_id FROM replays WHERE id = $1', [kept])).rows[0]!;
    const ref = { orgId: row.org_id, projectId: row.project_id, replayId: kept };
    const stored = await app.deps.replayStore.open(ref);
    expect(stored?.sizeBytes).toBeGreaterThan(0);
    stored!.stream.destroy();
    // Retention is 7 days by default: a day early nothing goes, a day late both do.
    expect((await sweepReplays(later(6 * 86_400_000))).expired).toBe(0);
    expect((await sweepReplays(later(8 * 86_400_000))).expired).toBeGreaterThanOrEqual(2);
    expect(await app.deps.replayStore.open(ref)).toBeUndefined();
    expect((await calls.download(kept)).status).toBe(404);
    const ids = ((await calls.list()).body as Array<{ replay_id: string }>).map((r) => r.replay_id);
    expect(ids).not.toContain(kept);
    expect(ids).not.toContain(abandoned);
  });
});
