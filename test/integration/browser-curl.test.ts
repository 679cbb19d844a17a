import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startCheckServer, startForwardProxy, type CheckServer, type ForwardProxy } from '../support/forward-proxy.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { getSession } from '../../api/src/modules/browsers/service.js';
import { newProject } from './browsers.fixtures.js';

/**
 * POST /browsers/{id}/curl with real Chromium, through the API, against a local server
 * that records what arrived (127.0.0.2; the recording proxy's egress is 127.0.0.3, so the
 * check server's answer names the route). Nothing is faked.
 */

interface Arrival {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** Whether its connection has closed (followed for /hang, which is never answered by itself). */
  closed: boolean;
}

const BINARY = Buffer.from(Array.from({ length: 256 }, (_, index) => index));
const TEN_MIB = 10 * 1024 * 1024;
const PROXY_AUTH = { username: 'carol', password: 'pw-Curl-Through-Proxy-41d2' };

let target: Server;
let base: string;
const arrivals: Arrival[] = [];
/** /hang requests not answered yet. */
const hanging: ServerResponse[] = [];
let check: CheckServer;
let proxy: ForwardProxy;
let app: TestApp;
let http: HttpClient;
let projectId: string;
let sessionId: string;
let browser: Browser;
let context: BrowserContext;

function serve(request: IncomingMessage, response: ServerResponse, body: string): void {
  const path = new URL(request.url ?? '/', 'http://target').pathname;
  const arrival: Arrival = { method: request.method ?? '', path, headers: request.headers, body, closed: false };
  arrivals.push(arrival);
  if (path === '/hang') {
    request.socket.once('close', () => (arrival.closed = true));
    hanging.push(response);
    return;
  }
  if (path === '/redirect') {
    response.writeHead(302, { location: '/after-redirect' });
    return void response.end('moved');
  }
  if (path === '/sw-page') {
    response.writeHead(200, { 'content-type': 'text/html' });
    return void response.end('<title>sw</title><script>navigator.serviceWorker.register("/sw.js")</script>');
  }
  if (path === '/sw.js') {
    response.writeHead(200, { 'content-type': 'text/javascript' });
    const worker = `self.addEventListener('install', () => self.skipWaiting());
      self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
      self.addEventListener('fetch', (event) => event.respondWith(new Response('from the service worker')));`;
    return void response.end(worker);
  }
  if (path === '/binary') {
    response.writeHead(200, { 'content-type': 'application/octet-stream' });
    return void response.end(BINARY);
  }
  if (path === '/big') {
    response.writeHead(200, { 'content-type': 'application/octet-stream' });
    return void response.end(Buffer.alloc(TEN_MIB + 1, 0x61));
  }
  response.setHeader('set-cookie', ['first=1; Path=/', 'second=2; Path=/']);
  response.writeHead(201, { 'content-type': 'text/plain; charset=utf-8', 'x-answer': 'yes' });
  response.end(request.method === 'HEAD' ? undefined : 'héllo ✓');
}

const curl = (body: Record<string, unknown>, id = sessionId, client = http) => client.post(`/browsers/${id}/curl`, body);
const arrivalsAt = (path: string) => arrivals.filter((arrival) => arrival.path === path);

beforeAll(async () => {
  target = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => serve(request, response, Buffer.concat(chunks).toString('utf8')));
  });
  // Every address: the blocked case must find a server at 127.0.0.1 that would answer.
  await new Promise<void>((resolve) => target.listen(0, '::', resolve));
  base = `http://127.0.0.2:${(target.address() as AddressInfo).port}`;
  check = await startCheckServer('127.0.0.2');
  proxy = await startForwardProxy({ host: '127.0.0.3', egress: '127.0.0.3', auth: PROXY_AUTH });
  app = await startTestApp({
    clock: systemClock,
    proxy: { upstreams: [{ name: 'a', types: ['datacenter'], url: `http://${PROXY_AUTH.username}:${PROXY_AUTH.password}@127.0.0.3:${proxy.port}` }] },
  });
  ({ http, id: projectId } = await newProject(app.tenant.http));
  const res = await http.post('/browsers', { headless: true });
  expect(res.status, res.text).toBe(200);
  sessionId = res.body.session_id;
  browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  context = browser.contexts()[0]!;
}, 120_000);
afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await app?.close();
  target?.closeAllConnections();
  await new Promise((resolve) => target?.close(resolve));
  await Promise.all([check?.close(), proxy?.close()]);
});

describe('POST /browsers/{id}/curl', () => {
  it('sends the method, headers and body given, with the browser cookie and user agent, and answers status, headers and body', async () => {
    await context.addCookies([{ name: 'session', value: 'from-the-browser', domain: '127.0.0.2', path: '/', sameSite: 'Strict' }]);
    const before = arrivals.length;
    const res = await curl({ url: `${base}/echo?q=1`, method: 'PUT', headers: { 'X-Custom': 'given', 'Content-Type': 'text/plain' }, body: 'payload ✓' });
    expect(res.status, res.text).toBe(200);
    const [arrival] = arrivals.slice(before);
    expect(arrival).toMatchObject({ method: 'PUT', path: '/echo', body: 'payload ✓' });
    expect(arrival!.headers['x-custom']).toBe('given');
    expect(arrival!.headers['content-type']).toBe('text/plain');
    expect(arrival!.headers.cookie).toContain('session=from-the-browser');
    expect(arrival!.headers['user-agent']).toMatch(/Chrome\/\d+/);
    expect(res.body.status).toBe(201);
    expect(res.body.body).toBe('héllo ✓');
    expect(res.body.headers['x-answer']).toEqual(['yes']);
    expect(res.body.headers['content-type']).toEqual(['text/plain; charset=utf-8']);
    expect(typeof res.body.duration_ms).toBe('number');
  });

  it('lets a given header replace the browser one of the same name (Cookie, User-Agent)', async () => {
    const before = arrivals.length;
    const res = await curl({ url: `${base}/echo`, headers: { cookie: 'only=mine', 'user-agent': 'curl-through-browser' } });
    expect(res.status, res.text).toBe(200);
    const [arrival] = arrivals.slice(before);
    expect(arrival!.headers.cookie).toBe('only=mine');
    expect(arrival!.headers['user-agent']).toBe('curl-through-browser');
  });

  it('returns both Set-Cookie headers as an array, and the browser keeps the cookies', async () => {
    const res = await curl({ url: `${base}/echo` });
    expect(res.status, res.text).toBe(200);
    expect(res.body.headers['set-cookie']).toEqual(['first=1; Path=/', 'second=2; Path=/']);
    const names = (await context.cookies(base)).map((cookie) => cookie.name);
    expect(names).toEqual(expect.arrayContaining(['first', 'second']));
  });

  it('round-trips a binary body with response_encoding base64', async () => {
    const res = await curl({ url: `${base}/binary`, response_encoding: 'base64' });
    expect(res.status, res.text).toBe(200);
    expect(Buffer.from(res.body.body as string, 'base64').equals(BINARY)).toBe(true);
  });

  it('sends HEAD and answers with headers and an empty body', async () => {
    const before = arrivals.length;
    const res = await curl({ url: `${base}/echo`, method: 'HEAD' });
    expect(res.status, res.text).toBe(200);
    expect(arrivals.slice(before).map((arrival) => arrival.method)).toEqual(['HEAD']);
    expect(res.body).toMatchObject({ status: 201, body: '' });
    expect(res.body.headers['x-answer']).toEqual(['yes']);
  });

  it('returns a redirect as it is, without following it', async () => {
    const res = await curl({ url: `${base}/redirect` });
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe(302);
    expect(res.body.headers.location).toEqual(['/after-redirect']);
    expect(arrivalsAt('/after-redirect')).toHaveLength(0);
  });

  it('gives up at timeout_ms with 504 curl_timeout and cancels the request', async () => {
    const res = await curl({ url: `${base}/hang`, timeout_ms: 1500 });
    expect(res.status, res.text).toBe(504);
    expect(res.body.code).toBe('curl_timeout');
    expect(res.headers.get('x-should-retry')).toBe('false');
    await expect.poll(() => arrivalsAt('/hang').every((arrival) => arrival.closed), { timeout: 30_000 }).toBe(true);
  });

  it('runs at most 4 requests at a time per browser: a fifth gets 429 until one ends', async () => {
    const hangsBefore = arrivalsAt('/hang').length;
    const running = Array.from({ length: 4 }, () => curl({ url: `${base}/hang`, timeout_ms: 120_000 }));
    await expect.poll(() => arrivalsAt('/hang').length, { timeout: 60_000 }).toBe(hangsBefore + 4);
    const fifth = await curl({ url: `${base}/echo` });
    expect(fifth.status, fifth.text).toBe(429);
    expect(fifth.body.code).toBe('too_many_requests');
    expect(fifth.headers.get('retry-after')).toBe('1');
    for (const response of hanging.splice(0)) response.end('late');
    for (const res of await Promise.all(running)) expect(res.status, res.text).toBe(200);
    expect((await curl({ url: `${base}/echo` })).status).toBe(200);
  }, 120_000);

  it('ends a request still running when the browser is reset for its next holder (409 browser_reset)', async () => {
    const res = await http.post('/browsers', { headless: true });
    expect(res.status, res.text).toBe(200);
    const id = res.body.session_id as string;
    // The agent's own POST /reset, as a pool release with reuse calls it.
    const row = await getSession(app.deps.db, { orgId: app.tenant.orgId, projectId }, id);
    const hangsBefore = arrivalsAt('/hang').length;
    const running = curl({ url: `${base}/hang`, timeout_ms: 120_000 }, id);
    await expect.poll(() => arrivalsAt('/hang').length, { timeout: 60_000 }).toBe(hangsBefore + 1);
    const reset = await fetch(`${row.agent_url}/reset`, { method: 'POST', headers: { authorization: `Bearer ${app.deps.agentTokens(id)}` } });
    expect(reset.status, await reset.text()).toBe(200);
    const answer = await running;
    expect(answer.status, answer.text).toBe(409);
    expect(answer.body.code).toBe('browser_reset');
    // The browser dropped the request: a late Set-Cookie can no longer reach the next holder.
    await expect.poll(() => arrivalsAt('/hang')[hangsBefore]!.closed, { timeout: 30_000 }).toBe(true);
    expect((await http.delete(`/browsers/${id}`)).status).toBe(204);
  }, 120_000);

  it('refuses an answer over 10 MiB with 413 response_too_large', async () => {
    const res = await curl({ url: `${base}/big`, timeout_ms: 60_000 });
    expect(res.status, res.text).toBe(413);
    expect(res.body.code).toBe('response_too_large');
    expect(res.body.message).toContain('10 MiB');
  });

  it('answers 502 curl_failed when the target cannot be reached', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.2', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const res = await curl({ url: `http://127.0.0.2:${port}/` });
    expect(res.status, res.text).toBe(502);
    expect(res.body.code).toBe('curl_failed');
    expect(res.body.message).toMatch(/Connection Refused|net::ERR_/);
  });

  it('is invisible to a Playwright client of the same browser', async () => {
    const opened: string[] = [];
    const listener = (page: { url(): string }) => opened.push(page.url());
    context.on('page', listener);
    const pagesBefore = context.pages().length;
    expect((await curl({ url: `${base}/echo` })).status).toBe(200);
    // A page Playwright had seen would have been reported by now: its own round trip after ours.
    await context.cookies();
    context.off('page', listener);
    expect(opened).toEqual([]);
    expect(context.pages()).toHaveLength(pagesBefore);
  });

  it("reaches the network even where a site's service worker would answer the page's loads", async () => {
    const page = await context.newPage();
    try {
      await page.goto(`${base}/sw-page`);
      await page.waitForFunction('navigator.serviceWorker.controller !== null', undefined, { timeout: 30_000 });
      // The worker answers the page's own loads...
      expect(await page.evaluate(`fetch('/echo').then((response) => response.text())`)).toBe('from the service worker');
      // ...but not curl's.
      const res = await curl({ url: `${base}/echo` });
      expect(res.status, res.text).toBe(200);
      expect(res.body.body).toBe('héllo ✓');
    } finally {
      await page.close();
    }
  }, 120_000);

  it('works in a headful browser too (its own display), and leaves it no new page', async () => {
    const res = await http.post('/browsers', { headless: false });
    expect(res.status, res.text).toBe(200);
    const headful = await chromium.connectOverCDP(res.body.cdp_ws_url);
    try {
      const pages = headful.contexts()[0]!.pages().length;
      const answer = await curl({ url: `${base}/echo` }, res.body.session_id as string);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.body).toMatchObject({ status: 201, body: 'héllo ✓' });
      expect(headful.contexts()[0]!.pages()).toHaveLength(pages);
    } finally {
      await headful.close().catch(() => undefined);
      await http.delete(`/browsers/${res.body.session_id}`);
    }
  }, 120_000);

  it('refuses bad input with 400 and every problem, and sends nothing', async () => {
    const before = arrivals.length;
    const bad: Record<string, unknown>[] = [
      {},
      { url: 'ftp://127.0.0.2/file' },
      { url: 'file:///etc/passwd' },
      { url: 'not a url' },
      { url: `${base}/echo`, method: 'TRACE' },
      { url: `${base}/echo`, headers: { Host: 'evil.example' } },
      { url: `${base}/echo`, headers: { 'Proxy-Authorization': 'Basic eDp5' } },
      { url: `${base}/echo`, headers: { 'X-Split': 'a\r\nInjected: yes' } },
      { url: `${base}/echo`, headers: { 'bad name': 'x' } },
      { url: `${base}/echo`, timeout_ms: 0 },
      { url: `${base}/echo`, timeout_ms: 120_001 },
      { url: `${base}/echo`, response_encoding: 'hex' },
      { url: `${base}/echo`, body: 42 },
      { url: `${base}/echo`, unknown_field: true },
    ];
    for (const body of bad) {
      const res = await curl(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code, JSON.stringify(body)).toBe('invalid_request');
      expect(res.body.details.length, JSON.stringify(body)).toBeGreaterThan(0);
    }
    expect(arrivals.length).toBe(before);
  });

  it('answers 404 for an unknown session and for a session of another project or org', async () => {
    const before = arrivals.length;
    expect((await curl({ url: `${base}/echo` }, 'no-such-session')).status).toBe(404);
    const { http: otherProject } = await newProject(app.tenant.http);
    expect((await curl({ url: `${base}/echo` }, sessionId, otherProject)).status).toBe(404);
    const otherOrg = await app.newTenant('curl-other');
    expect((await curl({ url: `${base}/echo` }, sessionId, otherOrg.http)).status).toBe(404);
    expect(arrivals.length).toBe(before);
  });

  it('goes through the session proxy, with its credentials', async () => {
    const created = await http.post('/proxies', { type: 'datacenter' });
    expect(created.status, created.text).toBe(200);
    const res = await http.post('/browsers', { headless: true, proxy_id: created.body.id });
    expect(res.status, res.text).toBe(200);
    const seen = proxy.credentialsSeen.length;
    const answer = await curl({ url: check.url }, res.body.session_id as string);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.status).toBe(200);
    expect((answer.body.body as string).trim()).toBe('127.0.0.3');
    expect(proxy.credentialsSeen.slice(seen)).toContain(`${PROXY_AUTH.username}:${PROXY_AUTH.password}`);
    // Without a proxy the same check server sees the browser itself.
    const direct = await curl({ url: check.url });
    expect((direct.body.body as string).trim()).not.toBe('127.0.0.3');
    expect((await http.delete(`/browsers/${res.body.session_id}`)).status).toBe(204);
  }, 120_000);
});

describe('with BROWSERPLANE_BLOCK_PRIVATE_NETWORKS on (127.0.0.2 allowed)', () => {
  let blocked: TestApp;
  let client: HttpClient;
  let id: string;
  beforeAll(async () => {
    blocked = await startTestApp({ clock: systemClock, egress: { blockPrivateNetworks: true, allowedNetworks: '127.0.0.2' } });
    ({ http: client } = await newProject(blocked.tenant.http));
    const res = await client.post('/browsers', { headless: true });
    expect(res.status, res.text).toBe(200);
    id = res.body.session_id;
  }, 120_000);
  afterAll(() => blocked?.close());

  it('refuses curl to loopback (403 destination_refused, 502 for https) and still reaches an allowed host', async () => {
    const port = (target.address() as AddressInfo).port;
    const before = arrivals.length;
    const plain = await curl({ url: `http://127.0.0.1:${port}/echo` }, id, client);
    expect(plain.status, plain.text).toBe(403);
    expect(plain.body.code).toBe('destination_refused');
    expect(plain.body.message).toContain('127.0.0.1');
    const named = await curl({ url: `http://localhost:${port}/echo` }, id, client);
    expect(named.status, named.text).toBe(403);
    const tls = await curl({ url: `https://127.0.0.1:${port}/echo` }, id, client);
    expect(tls.status, tls.text).toBe(502);
    expect(tls.body.code).toBe('curl_failed');
    expect(arrivals.length).toBe(before);
    const allowed = await curl({ url: `${base}/echo` }, id, client);
    expect(allowed.status, allowed.text).toBe(200);
    expect(allowed.body.status).toBe(201);
  });
});
