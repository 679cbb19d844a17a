import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { createCdpTokens } from '../../api/src/modules/browsers/cdp-token.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { allEvents, eventuallyEvents, ofType } from './browser-telemetry.fixtures.js';
import { ReplayCalls, Video } from './replays.fixtures.js';

/**
 * The agent's side doors into the API (telemetry batches, extension archives, recordings) attacked by a
 * web page in a real browser of the session itself, in the worst case: private networks are
 * not blocked here, so the page reaches the API's address (as a page in a browser pod
 * reaches the API Service). It knows the session id and guesses tokens; it must neither
 * write an event nor read an archive. Real Chromium, real agent, real Postgres.
 */

let app: TestApp;
let client: HttpClient;
let pages: TestPageServer;
let sessionId: string;
let browser: Browser;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/attack': '<!doctype html><title>attack</title>' });
  ({ http: client } = await newProject(app.tenant.http));
  const res = await client.post('/browsers', { headless: true, telemetry: { browser: { console: { enabled: true } } } });
  expect(res.status, res.text).toBe(200);
  sessionId = res.body.session_id;
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
}, 60_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await app?.close();
  await pages?.close();
});

describe('side doors attacked from a page', () => {
  it('a page cannot forge telemetry events nor read an extension archive, whatever token it sends; the agent’s own events still arrive', async () => {
    const forged = { events: [{ category: 'console', type: 'console_log', ts: Date.now() * 1000, source: { kind: 'cdp' }, data: { text: 'forged-by-page' } }], dropped: 0 };
    const door = `${app.url}/internal/browsers/${sessionId}/telemetry`;
    const archive = `${app.url}/internal/browsers/${sessionId}/extensions/ext_guessed`;
    // Control: the doors are there, and refuse a caller without the agent's token.
    const direct = await fetch(`${door}?token=forged`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(forged) });
    expect(direct.status).toBe(401);
    expect((await fetch(`${archive}?token=forged`)).status).toBe(401);

    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    await page.goto(`${pages.url}/attack`);
    const outcomes = await page.evaluate(
      async ({ door, archive, body }) => {
        const tries: [string, RequestInit][] = [
          [door, { method: 'POST', headers: { 'content-type': 'application/json' }, body }],
          [door, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body }],
          [`${door}?token=`, { method: 'POST', mode: 'no-cors', body }],
          [`${door}?token=${'A'.repeat(64)}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }],
          [`${archive}?token=forged`, {}],
        ];
        const seen: string[] = [];
        for (const [url, init] of tries) {
          try {
            const res = await fetch(url, init);
            seen.push(res.type === 'opaque' ? 'opaque' : `read ${res.status} ${(await res.text()).slice(0, 40)}`);
          } catch {
            seen.push('blocked');
          }
        }
        console.log('real-from-page');
        return seen;
      },
      { door, archive, body: JSON.stringify(forged) },
    );
    // Nothing is readable cross-origin (the API answers no CORS), and no-cors sends are blind.
    expect(outcomes.every((o) => o === 'blocked' || o === 'opaque'), outcomes.join(', ')).toBe(true);
    const events = await eventuallyEvents(client, sessionId, (all) => expect(ofType(all, 'console_log').some((e) => e.event.data?.text === 'real-from-page')).toBe(true));
    expect(JSON.stringify(events)).not.toContain('forged-by-page');
    expect(JSON.stringify(await allEvents(client, sessionId))).not.toContain('forged-by-page');
  }, 60_000);

  it('a page cannot upload, overwrite or fail a recording: no token, another session’s token and a used token are refused', async () => {
    const calls = new ReplayCalls(client, sessionId);
    const other = await client.post('/browsers', { headless: true });
    expect(other.status, other.text).toBe(200);
    const otherCalls = new ReplayCalls(client, other.body.session_id as string);
    const target = await calls.startOk({ framerate: 5 });
    const otherReplay = await otherCalls.startOk({ framerate: 5 });
    // A token the service signs for the other session's recording, as its agent holds one.
    const { token: otherToken } = await createCdpTokens(app.deps).issue(otherReplay, 'replay');
    const video = `${app.url}/internal/replays/${target}/video`;
    const forged = 'forged-by-page'.repeat(100);

    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    await page.goto(`${pages.url}/attack`);
    const outcomes = await page.evaluate(
      async ({ video, otherToken, forged }) => {
        const tries: [string, RequestInit][] = [
          [video, { method: 'PUT', body: forged }],
          [`${video}?token=${otherToken}`, { method: 'PUT', body: forged }],
          [`${video}?token=${otherToken}`, { method: 'POST', mode: 'no-cors', body: forged }],
          [`${video}/failure`, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"message":"forged"}' }],
          [`${video}/failure?token=${otherToken}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message":"forged"}' }],
        ];
        const seen: string[] = [];
        for (const [url, init] of tries) {
          try {
            const res = await fetch(url, init);
            seen.push(res.type === 'opaque' ? 'opaque' : `read ${res.status}`);
          } catch {
            seen.push('blocked');
          }
        }
        return seen;
      },
      { video, otherToken, forged },
    );
    expect(outcomes.every((o) => o === 'blocked' || o === 'opaque'), outcomes.join(', ')).toBe(true);

    // What CORS keeps from the page, the token keeps from anything that reaches the API's address directly.
    const put = (token?: string) => fetch(`${video}${token === undefined ? '' : `?token=${token}`}`, { method: 'PUT', body: forged });
    expect((await put()).status).toBe(401);
    expect((await put(otherToken)).status).toBe(403);
    const fail = await fetch(`${video}/failure?token=${otherToken}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message":"forged"}' });
    expect(fail.status).toBe(403);
    const listed = (await calls.list()).body as Array<{ replay_id: string; finished_at: string | null }>;
    expect(listed.find((r) => r.replay_id === target)?.finished_at).toBeNull();

    // The recording ends with its own video; the upload token, used once, opens nothing afterwards.
    expect((await calls.stop(target)).status).toBe(204);
    expect((await otherCalls.stop(otherReplay)).status).toBe(204);
    const stored = (await calls.download(target)).bytes;
    const { token: used } = await createCdpTokens(app.deps).issue(target, 'replay');
    const again = await put(used);
    expect(again.status).toBe(404);
    expect(((await again.json()) as { code: string }).code).toBe('replay_not_recording');
    const after = (await calls.download(target)).bytes;
    expect(after.equals(stored)).toBe(true);
    expect(after.toString('latin1')).not.toContain('forged-by-page');
    const file = await Video.of(after);
    try {
      expect((await file.facts()).codec).toBe('h264');
    } finally {
      await file.remove();
    }
  }, 90_000);
});
