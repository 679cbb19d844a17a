import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rejection } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * browsers.telemetry through the official SDK against the built service: real agents, real
 * Chromium, the agent pushing to the service's side door. events() is the SDK's offset
 * pager; stream() its SSE iterator, which ignores ids and needs JSON in every data line.
 */

/** The fields the test reads of an event's data (its shape depends on the type). */
const dataOf = (event: object): { text?: unknown; url?: unknown } => ('data' in event && event.data && typeof event.data === 'object' ? event.data : {});

let service: RunningService;
let site: Server;
let base: string;

beforeAll(async () => {
  site = createServer((request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' });
    const url = request.url ?? '/';
    if (url.startsWith('/data')) response.end('ok');
    // The pool test's pages: each logs its path, fetches /data<path>, then logs "fetched <path>".
    else if (url.startsWith('/pool')) response.end(`<title>p</title><script>console.log('${url}'); fetch('/data${url}').then(() => console.log('fetched ${url}'))</script>`);
    else response.end(`<title>t</title><script>console.log('sdk-telemetry'); fetch('/data')</script>`);
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  service = await startService();
});
afterAll(async () => {
  await cleanupServices();
  site?.closeAllConnections();
  await new Promise((resolve) => site?.close(resolve));
});

describe('browsers.telemetry through the SDK', () => {
  it('lists and streams a console.log, a request, a navigation and a CDP client', async () => {
    const client: Kernel = service.client();
    const session = await client.browsers.create({
      headless: true,
      timeout_seconds: 120,
      telemetry: { browser: { console: { enabled: true }, network: { enabled: true }, page: { enabled: true }, connection: { enabled: true } } },
    });
    const id = session.session_id;
    const stream = await client.browsers.telemetry.stream(id);
    const seen: { seq: number; type: string; text?: unknown; url?: unknown }[] = [];
    const reading = (async () => {
      for await (const frame of stream) {
        seen.push({ seq: frame.seq, type: frame.event.type, ...dataOf(frame.event) });
      }
    })();
    const browser = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${base}/page`);
      const wanted = (events: { type: string; text?: unknown; url?: unknown }[]) => {
        expect(events.some((e) => e.type === 'console_log' && e.text === 'sdk-telemetry')).toBe(true);
        expect(events.some((e) => e.type === 'network_request' && String(e.url).endsWith('/data'))).toBe(true);
        expect(events.some((e) => e.type === 'page_navigation' && String(e.url).endsWith('/page'))).toBe(true);
        expect(events.some((e) => e.type === 'cdp_connect')).toBe(true);
      };
      await vi.waitFor(
        async () => {
          const listed = [];
          for await (const item of client.browsers.telemetry.events(id, { limit: 10 })) listed.push(item);
          wanted(listed.map((item) => ({ type: item.event.type, ...dataOf(item.event) })));
        },
        { timeout: 30_000, interval: 300 },
      );
      await vi.waitFor(() => wanted(seen), { timeout: 10_000, interval: 100 });
      const consoleOnly = await client.browsers.telemetry.events(id, { category: ['console'], limit: 100 });
      expect(consoleOnly.getPaginatedItems().every((item) => item.event.category === 'console')).toBe(true);
    } finally {
      stream.controller.abort();
      await reading.catch(() => undefined);
      await browser.close().catch(() => undefined);
      await client.browsers.deleteByID(id).catch(() => undefined);
    }
  }, 90_000);

  it('refuses desc with since (400) and an unknown session (404)', async () => {
    const client: Kernel = service.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 60 });
    try {
      const bad = await rejection(client.browsers.telemetry.events(session.session_id, { order: 'desc', since: '5m' }), BadRequestError);
      expect(bad.status).toBe(400);
      await rejection(client.browsers.telemetry.events('bs_nosuchsession'), NotFoundError);
      await rejection(client.browsers.telemetry.stream('bs_nosuchsession'), NotFoundError);
    } finally {
      await client.browsers.deleteByID(session.session_id).catch(() => undefined);
    }
  }, 60_000);

  it('captures a pool browser’s telemetry, with a lease’s override for that lease only', async () => {
    const client: Kernel = service.client();
    const pool = await client.browserPools.create({ name: `telemetry-${Date.now()}`, size: 1, headless: true, fill_rate_per_minute: 6000, telemetry: { browser: { console: { enabled: true } } } });
    const texts = async (id: string) => {
      const listed: { type: string; text?: unknown; url?: unknown }[] = [];
      for await (const item of client.browsers.telemetry.events(id, { limit: 100, offset: 0 })) listed.push({ type: item.event.type, ...dataOf(item.event) });
      return listed;
    };
    const visit = async (cdpUrl: string, path: string) => {
      const browser = await chromium.connectOverCDP(cdpUrl);
      try {
        const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
        await page.goto(`${base}${path}`);
        await page.waitForFunction((p) => performance.getEntriesByType('resource').some((e) => e.name.endsWith(`/data${p}`)), path);
      } finally {
        await browser.close().catch(() => undefined);
      }
    };
    const acquired = async (body: Parameters<Kernel['browserPools']['acquire']>[1]) => {
      const lease = await vi.waitFor(async () => {
        const got = (await client.browserPools.acquire(pool.id, body)) as { session_id: string; cdp_ws_url: string } | null;
        expect(got).toBeTruthy();
        return got!;
      }, { timeout: 60_000, interval: 500 });
      return lease;
    };
    try {
      const first = await acquired({ acquire_timeout_seconds: 5, telemetry: { browser: { network: { enabled: true } } } });
      await visit(first.cdp_ws_url, '/pool-one');
      await vi.waitFor(async () => {
        const events = await texts(first.session_id);
        expect(events.some((e) => e.type === 'console_log' && e.text === 'fetched /pool-one')).toBe(true);
        expect(events.some((e) => e.type === 'network_request' && String(e.url).endsWith('/data/pool-one'))).toBe(true);
      }, { timeout: 30_000, interval: 300 });
      await client.browserPools.release(pool.id, { session_id: first.session_id });

      const second = await acquired({ acquire_timeout_seconds: 5 });
      expect(second.session_id).toBe(first.session_id);
      await visit(second.cdp_ws_url, '/pool-two');
      const events = await vi.waitFor(async () => {
        const all = await texts(second.session_id);
        expect(all.some((e) => e.type === 'console_log' && e.text === 'fetched /pool-two')).toBe(true);
        return all;
      }, { timeout: 30_000, interval: 300 });
      // The pool's baseline again: console, no network.
      expect(events.some((e) => e.type === 'network_request' && String(e.url).endsWith('/data/pool-two'))).toBe(false);
      await client.browserPools.release(pool.id, { session_id: second.session_id, reuse: false });
    } finally {
      await client.browserPools.delete(pool.id, { force: true }).catch(() => undefined);
    }
  }, 150_000);
});
