import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { adoptBrowsersAtStart } from '../../api/src/modules/browsers/adopt.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import { fetchHealth } from '../../contract/agent-client.js';
import { CapturedLog } from '../support/captured-log.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * Crashes and start-up reconciliation with real agents and real Chromium: a killed
 * Chromium ends its session as browser_crashed (log line with the reason, /metrics), and
 * adoptBrowsersAtStart ends interrupted creates and terminates browsers nobody owns.
 */

let app: TestApp;
let http: HttpClient;
const captured = new CapturedLog();

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, log: captured.logger() });
  http = app.tenant.http;
});
afterAll(async () => {
  await app?.close();
});

const deletedReason = async (id: string) =>
  (await app.database.db.query<{ deleted_reason: string | null }>('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [id])).rows[0]!
    .deleted_reason;

async function endedCount(reason: string): Promise<number> {
  const text = (await app.client().get('/metrics')).text;
  const match = new RegExp(`^browserplane_browser_sessions_ended_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

async function createSession(client: HttpClient): Promise<{ session_id: string }> {
  const res = await client.post('/browsers', { headless: true, timeout_seconds: 600 });
  expect(res.status, res.text).toBe(200);
  // Crashes and restarts of a running browser: one whose Chromium has answered.
  await readyBrowser(app.runtime, res.body.session_id);
  return res.body as { session_id: string };
}

describe('a crashed Chromium', () => {
  it('ends its session as browser_crashed, logs why, and counts it in /metrics', async () => {
    const { http: client } = await newProject(http);
    const session = await createSession(client);
    const crashesBefore = await endedCount('browser_crashed');
    const agentUrl = (await app.runtime.observe(session.session_id))!.agentUrl!;
    const chromiumPid = (await fetchHealth({ url: agentUrl, token: app.deps.agentTokens(session.session_id) }, 2000))!.browser!.pid;

    process.kill(-chromiumPid, 'SIGKILL');
    // The agent sees Chromium exit, cleans up and exits non-zero; the runtime reports Failed.
    await expect.poll(async () => (await app.runtime.observe(session.session_id))?.phase, { timeout: 15_000 }).toBe('Failed');
    await new IdleReaper(app.deps).tick();

    expect(await deletedReason(session.session_id)).toBe('browser_crashed');
    expect((await client.get(`/browsers/${session.session_id}`)).status).toBe(404);
    const line = captured.entries().find((entry) => entry.sessionId === session.session_id && String(entry.msg).startsWith('browser crashed'));
    expect(line?.msg).toMatch(/chromium exited unexpectedly \(code null, signal SIGKILL\)/);
    expect(await endedCount('browser_crashed')).toBe(crashesBefore + 1);
    expect(await app.runtime.observe(session.session_id)).toBeUndefined();
  }, 40_000);

  it('reports active sessions by phase in /metrics', async () => {
    const { http: client } = await newProject(http);
    const before = (await app.client().get('/metrics')).text;
    const running = (text: string) => Number(/^browserplane_browser_sessions\{phase="running"\} (\d+)$/m.exec(text)?.[1]);
    const session = await createSession(client);
    expect(running((await app.client().get('/metrics')).text)).toBe(running(before) + 1);
    expect((await client.delete(`/browsers/${session.session_id}`)).status).toBe(204);
    expect(running((await app.client().get('/metrics')).text)).toBe(running(before));
    expect(await endedCount('deleted')).toBeGreaterThanOrEqual(1);
  });
});

describe('reconciliation at start-up', () => {
  it('keeps running sessions, ends interrupted creates, and terminates browsers without a session', async () => {
    const { http: client } = await newProject(http);
    const kept = await createSession(client);
    const interrupted = await createSession(client);
    // A create the service was in the middle of when it died: the row is still 'starting'.
    await app.database.db.query(`UPDATE browser_sessions SET phase = 'starting' WHERE id = $1`, [interrupted.session_id]);
    const orphanId = `bs_orphan${Date.now()}`;
    const orphan = await app.runtime.launch(
      { browserId: orphanId, orgId: 'o', projectId: 'p', headless: true, stealth: false, kioskMode: false, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: {} },
      { signal: AbortSignal.timeout(30_000) },
    );
    expect(orphan.phase).toBe('Ready');

    const report = await adoptBrowsersAtStart(app.deps);

    expect(report.orphans).toBe(1);
    expect(report.adopted).toBeGreaterThanOrEqual(1);
    expect(await app.runtime.observe(orphanId)).toBeUndefined();
    expect(await deletedReason(interrupted.session_id)).toBe('launch_interrupted');
    expect(await app.runtime.observe(interrupted.session_id)).toBeUndefined();
    expect(await deletedReason(kept.session_id)).toBeNull();
    expect((await app.runtime.observe(kept.session_id))?.phase).toBe('Ready');
    expect((await client.delete(`/browsers/${kept.session_id}`)).status).toBe(204);
  }, 60_000);
});

describe('the reaper’s orphan sweep', () => {
  it('terminates a browser whose session ended once two sweeps found it, and leaves owned and unknown browsers alone', async () => {
    const { http: client } = await newProject(http);
    const owned = await createSession(client);
    // What an end whose terminate failed leaves behind: the row ended, the browser running.
    const abandoned = await createSession(client);
    await app.database.db.query(`UPDATE browser_sessions SET deleted_at = now(), deleted_reason = 'deleted' WHERE id = $1`, [abandoned.session_id]);
    // A browser with no row at all: not this installation's (another release sharing the runtime).
    const unknownId = `bs_unknown${Date.now()}`;
    await app.runtime.launch(
      { browserId: unknownId, orgId: 'o', projectId: 'p', headless: true, stealth: false, kioskMode: false, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: {} },
      { signal: AbortSignal.timeout(30_000) },
    );
    const reaper = new IdleReaper(app.deps, { orphanSweepMs: 0 });

    await reaper.tick();
    // One sighting is not enough: a terminate may be under way.
    expect((await app.runtime.observe(abandoned.session_id))?.phase).toBe('Ready');
    await reaper.tick();

    expect(await app.runtime.observe(abandoned.session_id)).toBeUndefined();
    expect(captured.entries().some((entry) => entry.browserId === abandoned.session_id && entry.msg === 'terminated a browser whose session has ended')).toBe(true);
    expect((await app.runtime.observe(owned.session_id))?.phase).toBe('Ready');
    expect(await deletedReason(owned.session_id)).toBeNull();
    expect((await app.runtime.observe(unknownId))?.phase).toBe('Ready');
    expect((await client.delete(`/browsers/${owned.session_id}`)).status).toBe(204);
    await app.runtime.terminate(unknownId, { graceMs: 5_000 });
  }, 60_000);
});
