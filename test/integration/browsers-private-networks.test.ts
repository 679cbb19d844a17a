import dgram from 'node:dgram';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { startForwardProxy, type ForwardProxy } from '../support/forward-proxy.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';

/**
 * BROWSERPLANE_BLOCK_PRIVATE_NETWORKS with real Chromium, through the API. There is no
 * internet here, so "a public site" is 127.0.0.2, put on the allow list on purpose: the
 * same server, on the same port, must load as 127.0.0.2 and be refused as 127.0.0.1,
 * localhost, [::1], 0.0.0.0 or ::ffff:127.0.0.1. The server listens on every address and
 * records each request with its Host, so "refused" means it never saw one.
 */

interface Hit {
  host: string;
  path: string;
  from: string;
}

let target: Server;
let sockets: WebSocketServer;
let port: number;
const hits: Hit[] = [];
let upstream: ForwardProxy;
let privateUpstream: ForwardProxy;
const browsers: Browser[] = [];

/** Requests that reached the target under any name but the allowed 127.0.0.2. */
const forbiddenHits = () => hits.filter((hit) => hit.host !== `127.0.0.2:${port}`);

beforeAll(async () => {
  target = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://target');
    hits.push({ host: request.headers.host ?? '', path: url.pathname, from: (request.socket.remoteAddress ?? '').replace(/^::ffff:/, '') });
    if (url.pathname === '/redirect') {
      response.writeHead(302, { location: `http://127.0.0.1:${port}/secret-after-redirect` });
      return response.end();
    }
    if (url.pathname === '/pixel.gif') {
      response.writeHead(200, { 'content-type': 'image/gif', 'access-control-allow-origin': '*' });
      return response.end(Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'));
    }
    response.writeHead(200, { 'content-type': 'text/html', 'access-control-allow-origin': '*' });
    response.end(`<title>target</title><p id="secret">secret of ${request.headers.host}</p>`);
  });
  sockets = new WebSocketServer({ server: target });
  sockets.on('connection', (socket, request) => {
    hits.push({ host: request.headers.host ?? '', path: 'websocket', from: request.socket.remoteAddress ?? '' });
    socket.send('hello from the target');
  });
  // Every address: 127.0.0.1, 127.0.0.2, ::1 and the rest reach this one server.
  await new Promise<void>((resolve) => target.listen(0, '::', resolve));
  port = (target.address() as AddressInfo).port;
  upstream = await startForwardProxy({ host: '127.0.0.3', egress: '127.0.0.3' });
  privateUpstream = await startForwardProxy({ host: '127.0.0.4', egress: '127.0.0.4' });
});
afterAll(async () => {
  await Promise.all(browsers.map((browser) => browser.close().catch(() => undefined)));
  for (const client of sockets?.clients ?? []) client.terminate();
  sockets?.close();
  target?.closeAllConnections();
  await new Promise((resolve) => target?.close(resolve));
  await Promise.all([upstream?.close(), privateUpstream?.close()]);
});

async function openPage(http: HttpClient, body: Record<string, unknown> = {}): Promise<{ id: string; page: Page }> {
  const res = await http.post('/browsers', { headless: true, ...body });
  expect(res.status, res.text).toBe(200);
  const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  browsers.push(browser);
  return { id: res.body.session_id as string, page: await browser.contexts()[0]!.newPage() };
}

/** What a page load ended in: the target's page, the forwarder's refusal, or a network error. */
async function load(page: Page, url: string): Promise<string> {
  try {
    const response = await page.goto(url, { timeout: 15_000 });
    const text = await page.innerText('body');
    if (text.includes('secret of')) return 'loaded';
    return response?.status() === 403 && text.includes('Browserplane refused') ? 'refused (403)' : `other: ${response?.status()} ${text.slice(0, 200)}`;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const net = /net::ERR_[A-Z_]+/.exec(message);
    return net ? `refused (${net[0]})` : `other: ${message.slice(0, 200)}`;
  }
}

/** fetch(), new WebSocket() and an <img> from a page at the allowed origin, each to `url`'s host. */
async function fromPage(page: Page, host: string): Promise<{ fetch: string; websocket: string; img: string }> {
  expect(await load(page, `http://127.0.0.2:${port}/`)).toBe('loaded');
  // Page code as text: this project's TypeScript has no DOM types.
  return page.evaluate(`(async (base) => {
    const fetched = await fetch('http://' + base + '/by-fetch').then(
      async (response) => ((await response.text()).includes('secret of') ? 'loaded' : 'status ' + response.status),
      () => 'failed',
    );
    const websocket = await new Promise((resolve) => {
      const socket = new WebSocket('ws://' + base + '/');
      socket.onmessage = (event) => resolve(String(event.data).includes('hello') ? 'loaded' : 'other');
      socket.onerror = () => resolve('failed');
    });
    const img = await new Promise((resolve) => {
      const image = document.createElement('img');
      image.onload = () => resolve('loaded');
      image.onerror = () => resolve('failed');
      image.src = 'http://' + base + '/pixel.gif';
      document.body.append(image);
    });
    return { fetch: fetched, websocket, img };
  })(${JSON.stringify(host)})`);
}

/**
 * WebRTC's own packets: a page names a remote ICE candidate at 127.0.0.1 (UDP and TCP),
 * and Chromium sends STUN binding requests to it by itself, outside any proxy. Resolves
 * with the datagrams and TCP connections the two listeners saw, and the page's candidates.
 */
async function webrtcProbe(page: Page): Promise<{ datagrams: number; tcpConnections: number; localCandidates: number }> {
  const udp = dgram.createSocket('udp4');
  let datagrams = 0;
  udp.on('message', () => (datagrams += 1));
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  const tcp = createServer();
  let tcpConnections = 0;
  tcp.on('connection', (socket) => {
    tcpConnections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  try {
    expect(await load(page, `http://127.0.0.2:${port}/`)).toBe('loaded');
    const udpPort = (udp.address()).port;
    const tcpPort = (tcp.address() as AddressInfo).port;
    const localCandidates = await page.evaluate<number>(`(async () => {
      const local = new RTCPeerConnection();
      const remote = new RTCPeerConnection();
      let candidates = 0;
      local.onicecandidate = (event) => (candidates += event.candidate ? 1 : 0);
      local.createDataChannel('probe');
      await local.setLocalDescription(await local.createOffer());
      await remote.setRemoteDescription(local.localDescription);
      await remote.setLocalDescription(await remote.createAnswer());
      await local.setRemoteDescription(remote.localDescription);
      await local.addIceCandidate({ candidate: 'candidate:1 1 udp 2122260223 127.0.0.1 ${udpPort} typ host', sdpMid: '0', sdpMLineIndex: 0 });
      await local.addIceCandidate({ candidate: 'candidate:2 1 tcp 1518280447 127.0.0.1 ${tcpPort} typ host tcptype passive', sdpMid: '0', sdpMLineIndex: 0 });
      // ICE checks start at once and repeat: 2 s is plenty for the first ones (none is a pass).
      await new Promise((resolve) => setTimeout(resolve, 2000));
      local.close();
      remote.close();
      return candidates;
    })()`);
    return { datagrams, tcpConnections, localCandidates };
  } finally {
    udp.close();
    tcp.close();
  }
}

/** The agent's log file (<stateDir>/<id>.log of this app's runtime). */
async function agentLog(sessionId: string): Promise<string> {
  for (const dir of await readdir(os.tmpdir())) {
    const file = path.join(os.tmpdir(), dir, 'browsers', `${sessionId}.log`);
    if (dir.startsWith('browserplane-test-profiles-') && existsSync(file)) return readFile(file, 'utf8');
  }
  throw new Error(`no agent log for ${sessionId}`);
}

describe('with BROWSERPLANE_BLOCK_PRIVATE_NETWORKS on (127.0.0.2 and the upstream 127.0.0.3 allowed)', () => {
  let app: TestApp;
  let http: HttpClient;
  beforeAll(async () => {
    app = await startTestApp({
      clock: systemClock,
      egress: { blockPrivateNetworks: true, allowedNetworks: '127.0.0.2, 127.0.0.3/32' },
      proxy: { upstreams: [{ name: 'a', types: ['datacenter'], url: `http://127.0.0.3:${upstream.port}` }] },
    });
    ({ http } = await newProject(app.tenant.http));
  });
  afterAll(() => app?.close());

  it('refuses page loads, redirects, fetch, WebSocket and images to loopback under every name, and allowed hosts still load', async () => {
    const { id, page } = await openPage(http);
    hits.length = 0;
    const outcomes: Record<string, string> = {};
    for (const host of ['127.0.0.1', 'localhost', 'app.localhost', '[::1]', '0.0.0.0', '[::ffff:127.0.0.1]', '127.1', '2130706433']) {
      outcomes[host] = await load(page, `http://${host}:${port}/secret`);
    }
    outcomes['redirect from 127.0.0.2'] = await load(page, `http://127.0.0.2:${port}/redirect`);
    const sub = await fromPage(page, `127.0.0.1:${port}`);
    console.log('outcomes with the block on:', { ...outcomes, ...sub });
    for (const [host, outcome] of Object.entries(outcomes)) expect(outcome, host).toMatch(/^refused/);
    expect(sub).toEqual({ fetch: 'failed', websocket: 'failed', img: 'failed' });
    expect(forbiddenHits()).toEqual([]);
    // The allowed name reached the same server: the redirect's first hop and the page above.
    expect(hits.map((hit) => hit.path)).toEqual(expect.arrayContaining(['/redirect', '/']));
    // And the allowed host works from a page for every kind of request.
    expect(await fromPage(page, `127.0.0.2:${port}`)).toEqual({ fetch: 'loaded', websocket: 'loaded', img: 'loaded' });

    const log = await agentLog(id);
    const refusals = log.split('\n').filter((line) => line.includes('proxy forwarder refused a private address'));
    expect(refusals.length).toBeGreaterThan(0);
    expect(JSON.parse(refusals[0]!)).toMatchObject({ level: 'info', host: '127.0.0.1', port, role: 'destination' });
    expect(log).toContain('"block_private_networks":true');
  }, 120_000);

  it("refuses a CDP client's browser context with a proxy of its own, which would bypass the forwarder", async () => {
    const { page } = await openPage(http);
    const browser = page.context().browser()!;
    hits.length = 0;
    // Found by an independent attack run: direct:// in a context of its own reached loopback.
    const cdp = await browser.newBrowserCDPSession();
    await expect(cdp.send('Target.createBrowserContext', { proxyServer: 'direct://' })).rejects.toThrow(/proxyServer is refused/);
    await expect(browser.newContext({ proxy: { server: `http://127.0.0.1:${port}` } })).rejects.toThrow(/proxyServer is refused/);
    // A context without a proxy of its own is still fine, and still behind the forwarder.
    const context = await browser.newContext();
    expect(await load(await context.newPage(), `http://127.0.0.1:${port}/secret`)).toMatch(/^refused/);
    await context.close();
    expect(forbiddenHits()).toEqual([]);
  }, 60_000);

  it('sends no WebRTC packet to loopback, and chrome_policy cannot turn WebRTC IP handling back (it overrides the flag)', async () => {
    const probe = await webrtcProbe((await openPage(http)).page);
    console.log('WebRTC probe with the block on:', probe);
    expect(probe).toMatchObject({ datagrams: 0, tcpConnections: 0 });
    for (const name of ['WebRtcIPHandling', 'WebRtcIPHandlingUrl']) {
      const res = await http.post('/browsers', { headless: true, chrome_policy: { [name]: name === 'WebRtcIPHandling' ? 'default' : [] } });
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(res.text).toContain(name);
    }
  }, 120_000);

  it('with an upstream proxy: refuses loopback destinations it can see and a proxy on a private address', async () => {
    const res = await http.post('/proxies', { type: 'datacenter' });
    expect(res.status, res.text).toBe(200);
    const { page } = await openPage(http, { proxy_id: res.body.id });
    hits.length = 0;
    const forwardedBefore = upstream.forwarded;
    expect(await load(page, `http://127.0.0.2:${port}/`)).toBe('loaded');
    expect(hits.at(-1)?.from).toBe('127.0.0.3');
    expect(upstream.forwarded).toBeGreaterThan(forwardedBefore);
    const viaUpstream = { ip: await load(page, `http://127.0.0.1:${port}/secret`), localhost: await load(page, `http://localhost:${port}/secret`) };
    const sub = await fromPage(page, `127.0.0.1:${port}`);
    console.log('outcomes through an allowed upstream:', { ...viaUpstream, ...sub });
    expect(viaUpstream).toEqual({ ip: expect.stringMatching(/^refused/), localhost: expect.stringMatching(/^refused/) });
    expect(sub).toEqual({ fetch: 'failed', websocket: 'failed', img: 'failed' });
    expect(forbiddenHits()).toEqual([]);

    // A custom proxy on a loopback address not allowed: nothing goes to it at all.
    const custom = await http.post('/proxies', { type: 'custom', config: { host: '127.0.0.4', port: privateUpstream.port } });
    expect(custom.status, custom.text).toBe(200);
    const { id, page: second } = await openPage(http, { proxy_id: custom.body.id });
    const before = privateUpstream.forwarded;
    expect(await load(second, `http://127.0.0.2:${port}/`)).toMatch(/^refused/);
    // Nor does the service's proxy check connect to it: 400, and its health stays unknown.
    const checked = await http.post(`/proxies/${custom.body.id}/check`, {});
    expect(checked.status, checked.text).toBe(400);
    expect(checked.body.details).toEqual([expect.objectContaining({ code: 'forbidden_address', field: 'config.host' })]);
    expect((await http.get(`/proxies/${custom.body.id}`)).body.last_checked).toBeUndefined();
    expect(privateUpstream.forwarded).toBe(before);
    await expect.poll(() => agentLog(id), { timeout: 10_000 }).toContain('"role":"upstream proxy"');
  }, 120_000);
});

describe('with BROWSERPLANE_BLOCK_PRIVATE_NETWORKS off (the default, for local use)', () => {
  let app: TestApp;
  let http: HttpClient;
  beforeAll(async () => {
    app = await startTestApp({ clock: systemClock, proxy: { upstreams: [{ name: 'a', types: ['datacenter'], url: `http://127.0.0.3:${upstream.port}` }] } });
    ({ http } = await newProject(app.tenant.http));
  });
  afterAll(() => app?.close());

  it("lets a CDP client give a context a proxy of its own (the control for the refusal with the block on)", async () => {
    const { page } = await openPage(http);
    const cdp = await page.context().browser()!.newBrowserCDPSession();
    const { browserContextId } = await cdp.send('Target.createBrowserContext', { proxyServer: 'direct://' });
    hits.length = 0;
    await cdp.send('Target.createTarget', { url: `http://127.0.0.1:${port}/secret`, browserContextId });
    await expect.poll(() => forbiddenHits().length, { timeout: 15_000 }).toBeGreaterThan(0);
    await cdp.send('Target.disposeBrowserContext', { browserContextId });
  }, 60_000);

  it('loads loopback pages, redirects, fetch, WebSocket and images', async () => {
    const { page } = await openPage(http);
    hits.length = 0;
    expect(await load(page, `http://127.0.0.1:${port}/secret`)).toBe('loaded');
    expect(await load(page, `http://localhost:${port}/secret`)).toBe('loaded');
    expect(await load(page, `http://127.0.0.2:${port}/redirect`)).toBe('loaded');
    expect(await fromPage(page, `127.0.0.1:${port}`)).toEqual({ fetch: 'loaded', websocket: 'loaded', img: 'loaded' });
    expect(forbiddenHits().length).toBeGreaterThanOrEqual(6);
    const probe = await webrtcProbe(page);
    console.log('WebRTC probe with the block off:', probe);
    expect(probe.datagrams).toBeGreaterThan(0);
  }, 120_000);

  it('serves its proxy forwarder with the upstream credentials to the browser alone: another local user (this test, root) is dropped', async () => {
    const proxy = await http.post('/proxies', { type: 'datacenter' });
    expect(proxy.status, proxy.text).toBe(200);
    const { id, page } = await openPage(http, { proxy_id: proxy.body.id });
    expect(await load(page, `http://127.0.0.2:${port}/`)).toBe('loaded');
    expect(hits.at(-1)?.from).toBe('127.0.0.3');
    const listening = (await agentLog(id)).split('\n').find((line) => line.includes('proxy forwarder listening'));
    const forwarderPort = (JSON.parse(listening!) as { port: number }).port;
    hits.length = 0;
    const forwarded = upstream.forwarded;
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(forwarderPort, '127.0.0.1', () => socket.write(`GET http://127.0.0.2:${port}/from-another-user HTTP/1.1\r\nHost: 127.0.0.2:${port}\r\nConnection: close\r\n\r\n`));
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => undefined);
    });
    console.log('forwarder answer to another user:', JSON.stringify(answer.slice(0, 60)));
    expect(answer).toBe('');
    expect(hits).toEqual([]);
    expect(upstream.forwarded).toBe(forwarded);
    // The agent writes its log asynchronously.
    await expect.poll(() => agentLog(id), { timeout: 10_000 }).toContain('proxy forwarder dropped a connection from another user than the browser');
    // The browser itself is still served.
    expect(await load(page, `http://127.0.0.2:${port}/`)).toBe('loaded');
  }, 120_000);
});
