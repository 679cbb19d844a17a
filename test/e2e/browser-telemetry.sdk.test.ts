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
    response.end(request.url === '/data' ? 'ok' : `<title>t</title><script>console.log('sdk-telemetry'); fetch('/data')</script>`);
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
});
