import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { allEvents, eventuallyEvents, ofType, openTelemetryStream, type Envelope } from './browser-telemetry.fixtures.js';

/**
 * Browser telemetry end to end in process: real agents, real Chromium, real Postgres. The
 * agent captures from CDP and its own bridge and pushes to the app's side door; the tests
 * read the list and the stream. Nothing is faked.
 */

const PAGE = `<!doctype html><title>telemetry</title><script>
  console.log('hello-telemetry', 42);
  fetch('/api-data').then((r) => r.text()).then((t) => console.log('fetched', t));
</script>`;

let app: TestApp;
let http: HttpClient;
let pages: TestPageServer;
let client: HttpClient;
let key: string;
let sessionId: string;
let browser: Browser;
let live: Awaited<ReturnType<typeof openTelemetryStream>>;

const ALL_CDP = { console: { enabled: true }, network: { enabled: true }, page: { enabled: true }, connection: { enabled: true } };

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, settings: { sseHeartbeatMs: 1000 } });
  http = app.tenant.http;
  pages = await startTestPageServer({ '/console': PAGE });
  ({ http: client } = await newProject(http));
  key = client.key!;
  const res = await client.post('/browsers', { headless: true, telemetry: { browser: ALL_CDP } });
  expect(res.status, res.text).toBe(200);
  sessionId = res.body.session_id;
  // A fresh stream sees only what comes after it: opened before the page does anything.
  live = await openTelemetryStream(`${app.url}/browsers/${sessionId}/telemetry/stream`, key, { 'X-Kernel-Project-Id': client.extraHeaders['X-Kernel-Project-Id']! });
  expect(live.res.status).toBe(200);
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  const context = browser.contexts()[0] ?? (await browser.newContext());
  const page = await context.newPage();
  await page.goto(`${pages.url}/console`);
  await page.waitForFunction(() => performance.getEntriesByType('resource').some((e) => e.name.endsWith('/api-data')));
}, 60_000);
afterAll(async () => {
  live?.abort();
  await browser?.close().catch(() => undefined);
  await app?.close();
  await pages?.close();
});

const expected = (events: Envelope[]) => {
  expect(ofType(events, 'console_log').some((e) => e.event.data?.text === 'hello-telemetry')).toBe(true);
  expect(ofType(events, 'network_request').some((e) => String(e.event.data?.url).endsWith('/api-data'))).toBe(true);
  expect(ofType(events, 'page_navigation').some((e) => String(e.event.data?.url).endsWith('/console'))).toBe(true);
  expect(ofType(events, 'cdp_connect').length).toBeGreaterThan(0);
};

describe('browser telemetry, captured from a real browser', () => {
  it('lists a console.log, a fetch, a navigation and a CDP client connecting', async () => {
    const events = await eventuallyEvents(client, sessionId, expected);
    const log = ofType(events, 'console_log').find((e) => e.event.data?.text === 'hello-telemetry')!;
    expect(log.event).toMatchObject({ category: 'console', source: { kind: 'cdp', event: 'Runtime.consoleAPICalled' } });
    expect(log.event.data).toMatchObject({ level: 'log', args: ['hello-telemetry', '42'], target_type: 'page' });
    expect(typeof log.event.data?.session_id).toBe('string');
    // ts is Unix microseconds: within a minute of now.
    expect(Math.abs(log.event.ts / 1000 - Date.now())).toBeLessThan(60_000);
    const response = ofType(events, 'network_response').find((e) => String(e.event.data?.url).endsWith('/api-data'));
    expect(response?.event.data).toMatchObject({ status: 200, method: 'GET' });
    expect(ofType(events, 'page_load').length).toBeGreaterThan(0);
    // seq strictly increases in asc order.
    for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBeGreaterThan(events[i - 1]!.seq);
  });

  it('sends the same events on the stream, each frame with id = seq and no event line', async () => {
    await vi.waitFor(() => expected(live.frames.map((f) => f.data)), { timeout: 20_000, interval: 100 });
    for (const frame of live.frames) {
      expect(frame.name).toBeUndefined();
      expect(frame.id).toBe(String(frame.data.seq));
    }
    const listed = await allEvents(client, sessionId);
    const streamedSeqs = live.frames.map((f) => f.data.seq);
    // Everything streamed is listed, in the same order and with the same content.
    const bySeq = new Map(listed.map((e) => [e.seq, e]));
    for (const frame of live.frames) expect(frame.data).toEqual(bySeq.get(frame.data.seq));
    expect([...streamedSeqs].sort((a, b) => a - b)).toEqual(streamedSeqs);
  });

  it('resumes after Last-Event-ID with no duplicate and no gap, and replays all with replay=all', async () => {
    const listed = await allEvents(client, sessionId);
    expect(listed.length).toBeGreaterThan(4);
    const cut = listed[2]!.seq;
    const headers = { 'X-Kernel-Project-Id': client.extraHeaders['X-Kernel-Project-Id']!, 'Last-Event-ID': String(cut) };
    // Last-Event-ID wins over replay=all.
    const resumed = await openTelemetryStream(`${app.url}/browsers/${sessionId}/telemetry/stream?replay=all`, key, headers);
    const all = await openTelemetryStream(`${app.url}/browsers/${sessionId}/telemetry/stream?replay=all`, key, { 'X-Kernel-Project-Id': headers['X-Kernel-Project-Id'] });
    try {
      const after = listed.slice(3).map((e) => e.seq);
      await vi.waitFor(() => expect(resumed.frames.length).toBeGreaterThanOrEqual(after.length), { timeout: 10_000 });
      expect(resumed.frames.slice(0, after.length).map((f) => f.data.seq)).toEqual(after);
      await vi.waitFor(() => expect(all.frames.length).toBeGreaterThanOrEqual(listed.length), { timeout: 10_000 });
      expect(all.frames.slice(0, listed.length).map((f) => f.data.seq)).toEqual(listed.map((e) => e.seq));
    } finally {
      resumed.abort();
      all.abort();
    }
  });

  it('filters by category, orders desc, and bounds by since and until', async () => {
    const consoleOnly = await client.get<Envelope[]>(`/browsers/${sessionId}/telemetry/events?category=console&limit=100`);
    expect(consoleOnly.status).toBe(200);
    expect(consoleOnly.body.length).toBeGreaterThan(0);
    expect(new Set(consoleOnly.body.map((e) => e.event.category))).toEqual(new Set(['console']));
    const two = await client.get<Envelope[]>(`/browsers/${sessionId}/telemetry/events?category=console,connection&limit=100`);
    expect(new Set(two.body.map((e) => e.event.category))).toEqual(new Set(['console', 'connection']));

    const asc = await allEvents(client, sessionId);
    const desc = await client.get<Envelope[]>(`/browsers/${sessionId}/telemetry/events?order=desc&limit=3`);
    expect(desc.status).toBe(200);
    expect(desc.body.map((e) => e.seq)).toEqual(asc.slice(-3).reverse().map((e) => e.seq));
    expect(desc.headers.get('x-has-more')).toBe('true');
    expect(desc.headers.get('x-next-offset')).toBe('3');

    // The default window (5m) holds everything this test made; an hour-old until holds nothing.
    const windowed = await client.get(`/browsers/${sessionId}/telemetry/events?limit=100`);
    expect(windowed.body.length).toBe(Math.min(100, asc.length));
    const old = await client.get(`/browsers/${sessionId}/telemetry/events?until=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}&since=2h`);
    expect(old.status).toBe(200);
    expect(old.body).toEqual([]);
    const future = await client.get(`/browsers/${sessionId}/telemetry/events?since=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`);
    expect(future.body).toEqual([]);
  });

  it('refuses bad input with 400 and changes nothing', async () => {
    for (const query of ['category=bogus', 'order=sideways', 'since=yesterday', 'until=later', 'limit=0', 'limit=101', 'offset=-1', 'order=desc&since=5m']) {
      const res = await client.get(`/browsers/${sessionId}/telemetry/events?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.code, query).toBe('invalid_request');
    }
    const stream = await client.get(`/browsers/${sessionId}/telemetry/stream?replay=some`);
    expect(stream.status).toBe(400);
  });

  it('answers 404 to another project’s key, on the list and on the stream', async () => {
    const { http: other } = await newProject(http);
    expect((await other.get(`/browsers/${sessionId}/telemetry/events`)).status).toBe(404);
    const stream = await openTelemetryStream(`${app.url}/browsers/${sessionId}/telemetry/stream`, other.key!, { 'X-Kernel-Project-Id': other.extraHeaders['X-Kernel-Project-Id']! });
    expect(stream.res.status).toBe(404);
    expect((await client.get('/browsers/bs_doesnotexist/telemetry/events')).status).toBe(404);
  });

  it('refuses the side door without the session’s telemetry token', async () => {
    const batch = { events: [{ category: 'console', type: 'console_log', ts: Date.now() * 1000, source: { kind: 'cdp' }, data: { text: 'forged' } }] };
    const none = await http.post(`/internal/browsers/${sessionId}/telemetry`, batch);
    expect(none.status).toBe(401);
    const forged = await http.post(`/internal/browsers/${sessionId}/telemetry?token=1999999999.${'A'.repeat(43)}`, batch);
    expect(forged.status).toBe(403);
    const listed = await allEvents(client, sessionId);
    expect(listed.some((e) => e.event.data?.text === 'forged')).toBe(false);
  });
});

describe('categories', () => {
  it('captures only the enabled ones, and a PATCH turns more on in the running browser', async () => {
    const res = await client.post('/browsers', { headless: true, telemetry: { browser: { console: { enabled: true } } } });
    expect(res.status, res.text).toBe(200);
    const id = res.body.session_id as string;
    const other = await chromium.connectOverCDP(res.body.cdp_ws_url);
    try {
      const page = await other.contexts()[0]!.newPage();
      await page.goto(`${pages.url}/console`);
      await eventuallyEvents(client, id, (events) => expect(ofType(events, 'console_log').some((e) => e.event.data?.text === 'fetched')).toBe(true));
      const first = await allEvents(client, id);
      expect(new Set(first.map((e) => e.event.category))).toEqual(new Set(['console']));

      const patched = await client.patch(`/browsers/${id}`, { telemetry: { browser: { network: { enabled: true } } } });
      expect(patched.status, patched.text).toBe(200);
      await page.reload();
      await eventuallyEvents(client, id, (events) => expect(ofType(events, 'network_request').length).toBeGreaterThan(0));
      const after = await allEvents(client, id);
      expect(after.some((e) => e.event.category === 'page' || e.event.category === 'connection')).toBe(false);
    } finally {
      await other.close().catch(() => undefined);
    }
    // The list still answers once the session has ended.
    expect((await client.delete(`/browsers/${id}`)).status).toBe(204);
    const ended = await client.get(`/browsers/${id}/telemetry/events?offset=0&category=network`);
    expect(ended.status).toBe(200);
    expect(ended.body.length).toBeGreaterThan(0);
  }, 60_000);
});

describe('control and platform events', () => {
  it('records the API calls made on the session by its own project, and none of another project’s', async () => {
    const res = await client.post('/browsers', { headless: true, telemetry: { enabled: true } });
    expect(res.status, res.text).toBe(200);
    const id = res.body.session_id as string;
    try {
      // A call that drives the browser is control (on by default); one that manages the session is platform (off).
      expect((await client.get(`/browsers/${id}`)).status).toBe(200);
      const run = await client.post(`/browsers/${id}/playwright/execute`, { code: 'return 1 + 1;' });
      expect(run.status, run.text).toBe(200);
      const { http: other } = await newProject(http);
      expect((await other.get(`/browsers/${id}`)).status).toBe(404);
      expect((await other.post(`/browsers/${id}/playwright/execute`, { code: 'return 1;' })).status).toBe(404);
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'api_call').length).toBeGreaterThan(0));
      const calls = ofType(events, 'api_call');
      expect(calls).toHaveLength(1);
      expect(calls[0]!.event).toMatchObject({ category: 'control', source: { kind: 'kernel_api', event: 'browserPlaywrightExecute' } });
      expect(calls[0]!.event.data).toMatchObject({ method: 'POST', path: '/browsers/{id_or_name}/playwright/execute', status: 200, operation_id: 'browserPlaywrightExecute' });
      expect(ofType(events, 'platform_api_call')).toEqual([]);

      // Opting into platform: the session's management calls are recorded from then on.
      const patched = await client.patch(`/browsers/${id}`, { telemetry: { browser: { platform: { enabled: true } } } });
      expect(patched.status, patched.text).toBe(200);
      expect((await client.get(`/browsers/${id}`)).status).toBe(200);
      const later = await eventuallyEvents(client, id, (all) =>
        expect(ofType(all, 'platform_api_call').some((call) => call.event.data?.operation_id === 'getBrowser')).toBe(true),
      );
      const platform = ofType(later, 'platform_api_call').find((call) => call.event.data?.operation_id === 'getBrowser')!;
      expect(platform.event).toMatchObject({ category: 'platform', source: { kind: 'kernel_api', event: 'getBrowser' } });
      expect(platform.event.data).toMatchObject({ method: 'GET', path: '/browsers/{id_or_name}', status: 200 });
      // Reading telemetry is not itself recorded.
      const filtered = await client.get(`/browsers/${id}/telemetry/events?offset=0&category=platform,control`);
      expect(filtered.status).toBe(200);
      expect(filtered.body.length).toBeGreaterThan(1);
      const all = await client.get(`/browsers/${id}/telemetry/events?offset=0`);
      const paths = (all.body as { event: { data?: { path?: string } } }[]).map((e) => String(e.event.data?.path));
      expect(paths.some((path) => path.includes('/telemetry/'))).toBe(false);
    } finally {
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});
