import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { allEvents, eventuallyEvents, ofType } from './browser-telemetry.fixtures.js';

/**
 * The agent's side doors into the API (telemetry batches, extension archives) attacked by a
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
});
