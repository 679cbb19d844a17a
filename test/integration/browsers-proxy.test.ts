import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { CapturedLog } from '../support/captured-log.js';
import { startCheckServer, startForwardProxy, type CheckServer, type ForwardProxy } from '../support/forward-proxy.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';

/**
 * proxy_id with real Chromium: the agent's forwarder sends the browser's traffic through
 * the session's upstream proxy with its credentials, and PATCH changes it live. Each party
 * has its own loopback address, so the check server's answer (the caller's address) names
 * the route: 127.0.0.3 = proxy A, 127.0.0.4 = proxy B, anything else = direct.
 */

const A = { username: 'alice', password: 'pw-A-Through-Proxy-7c41' };
const B = { username: 'bob', password: 'pw-B-Through-Proxy-e93a' };
const WRONG_PASSWORD = 'pw-Wrong-Guess-55d0';

const log = new CapturedLog();
let app: TestApp;
let http: HttpClient;
let check: CheckServer;
let bypassed: CheckServer;
let proxyA: ForwardProxy;
let proxyB: ForwardProxy;
let sockets: WebSocketServer;
let socketsUrl: string;
const browsers: Browser[] = [];

beforeAll(async () => {
  check = await startCheckServer('127.0.0.2');
  bypassed = await startCheckServer('127.0.0.9');
  proxyA = await startForwardProxy({ host: '127.0.0.3', egress: '127.0.0.3', auth: A });
  proxyB = await startForwardProxy({ host: '127.0.0.4', egress: '127.0.0.4', auth: B });
  // A WebSocket server that greets with the caller's address, like the check server.
  sockets = new WebSocketServer({ host: '127.0.0.2', port: 0 });
  sockets.on('connection', (socket, request) => socket.send((request.socket.remoteAddress ?? '').replace(/^::ffff:/, '')));
  await new Promise((resolve) => sockets.once('listening', resolve));
  socketsUrl = `ws://127.0.0.2:${(sockets.address() as AddressInfo).port}/`;
  app = await startTestApp({
    clock: systemClock,
    log: log.logger(),
    proxy: {
      upstreams: [
        { name: 'a', types: ['datacenter'], url: `http://${A.username}:${A.password}@127.0.0.3:${proxyA.port}` },
        { name: 'b', types: ['isp'], url: `http://${B.username}:${B.password}@127.0.0.4:${proxyB.port}` },
      ],
    },
  });
  ({ http } = await newProject(app.tenant.http));
});
afterAll(async () => {
  await Promise.all(browsers.map((browser) => browser.close().catch(() => undefined)));
  await app?.close();
  for (const client of sockets?.clients ?? []) client.terminate();
  await new Promise((resolve) => sockets?.close(resolve));
  await Promise.all([check?.close(), bypassed?.close(), proxyA?.close(), proxyB?.close()]);
});

async function createProxy(body: Record<string, unknown>): Promise<string> {
  const res = await http.post('/proxies', body);
  expect(res.status, res.text).toBe(200);
  return res.body.id as string;
}

async function session(proxyId: string): Promise<{ id: string; page: Page }> {
  const res = await http.post('/browsers', { headless: true, proxy_id: proxyId });
  expect(res.status, res.text).toBe(200);
  expect(res.body.proxy_id).toBe(proxyId);
  const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  browsers.push(browser);
  return { id: res.body.session_id as string, page: await browser.contexts()[0]!.newPage() };
}

/** The address the check server saw, i.e. who connected to it. */
async function callerOf(page: Page, url = check.url): Promise<string> {
  const response = await page.goto(url);
  expect(response?.status()).toBe(200);
  return (await page.innerText('body')).trim();
}

/** Opens a WebSocket from the page; resolves with the server's greeting (the caller's address). */
function openSocket(page: Page): Promise<string> {
  return page.evaluate(
    (url) =>
      new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(url);
        (globalThis as unknown as { openSocket: WebSocket }).openSocket = socket;
        socket.onmessage = (event) => resolve(String(event.data));
        socket.onerror = () => reject(new Error('websocket failed'));
      }),
    socketsUrl,
  );
}

/** Agent log files of this app's runtime (<stateDir>/<id>.log), read before the session ends. */
async function agentLog(sessionId: string): Promise<string> {
  for (const dir of await readdir(os.tmpdir())) {
    const file = path.join(os.tmpdir(), dir, 'browsers', `${sessionId}.log`);
    if (dir.startsWith('browserplane-test-profiles-') && existsSync(file)) return readFile(file, 'utf8');
  }
  throw new Error(`no agent log for ${sessionId}`);
}

describe('a session with proxy_id', () => {
  it('sends pages and WebSockets through the proxy with its credentials, bypass hosts direct, and PATCH switches or removes it live', async () => {
    const proxyIdA = await createProxy({ type: 'datacenter', bypass_hosts: ['127.0.0.9'] });
    const proxyIdB = await createProxy({ type: 'isp' });
    const { id, page } = await session(proxyIdA);

    const seenA = proxyA.credentialsSeen.length;
    expect(await callerOf(page)).toBe('127.0.0.3');
    expect(proxyA.credentialsSeen.slice(seenA)).toContain(`${A.username}:${A.password}`);
    // The check server saw the browser itself, not a proxy. (Proxy A's request count is no
    // proof either way: Chromium fetches favicons and the like in the background.)
    expect(await callerOf(page, bypassed.url)).not.toMatch(/^127\.0\.0\.[34]$/);
    expect(await openSocket(page)).toBe('127.0.0.3');
    const logBefore = await agentLog(id);

    // Switch to B: the tunnel still open through A is closed, the next loads go through B.
    // The close is watched from before the PATCH (awaited): a handler installed by an
    // evaluate still in flight could miss a close that came first, and the wait would hang.
    await page.evaluate(() => {
      const page = globalThis as unknown as { openSocket: WebSocket; socketClosed?: boolean };
      page.socketClosed = false;
      page.openSocket.addEventListener('close', () => (page.socketClosed = true));
    });
    const patched = await http.patch(`/browsers/${id}`, { proxy_id: proxyIdB });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.proxy_id).toBe(proxyIdB);
    await page.waitForFunction(() => (globalThis as unknown as { socketClosed?: boolean }).socketClosed === true, undefined, { timeout: 30_000 });
    const seenB = proxyB.credentialsSeen.length;
    expect(await callerOf(page)).toBe('127.0.0.4');
    expect(proxyB.credentialsSeen.slice(seenB)).toContain(`${B.username}:${B.password}`);
    expect(await openSocket(page)).toBe('127.0.0.4');

    // Remove it: direct again.
    const removed = await http.patch(`/browsers/${id}`, { proxy_id: '' });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.proxy_id).toBeUndefined();
    expect(await callerOf(page)).not.toMatch(/^127\.0\.0\.[34]$/);

    const logs = `${log.text()}\n${logBefore}\n${await agentLog(id)}`;
    for (const secret of [A.password, B.password, Buffer.from(`${A.username}:${A.password}`).toString('base64')]) expect(logs).not.toContain(secret);
    expect(logs).toContain('proxy upstream changed');
  }, 120_000);

  it('routes the start URL through the proxy too, though it loads while the browser starts', async () => {
    const res = await http.post('/browsers', { headless: true, proxy_id: await createProxy({ type: 'datacenter' }), start_url: check.url });
    expect(res.status, res.text).toBe(200);
    const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
    browsers.push(browser);
    const first = browser.contexts()[0]!.pages().find((page) => page.url() === check.url);
    expect(first, 'the start page').toBeDefined();
    await first!.waitForLoadState();
    expect((await first!.innerText('body')).trim()).toBe('127.0.0.3');
  }, 60_000);

  it('fails pages with a proxy authentication error on wrong credentials, and the session keeps running', async () => {
    const wrong = await createProxy({ type: 'custom', config: { host: '127.0.0.3', port: proxyA.port, username: A.username, password: WRONG_PASSWORD } });
    const { id, page } = await session(wrong);
    const refusals = proxyA.refusals;
    const response = await page.goto(check.url);
    // A plain-HTTP load gets the forwarder's answer; a tunnel (CONNECT) fails in Chromium.
    expect(response?.status()).toBe(597);
    expect(await page.innerText('body')).toContain('Invalid upstream proxy credentials');
    await expect(openSocket(page)).rejects.toThrow(/websocket failed/);
    expect(proxyA.refusals).toBeGreaterThan(refusals);

    const agentLines = await agentLog(id);
    expect(agentLines).toContain('upstream proxy refused the credentials');
    expect((await http.get(`/browsers/${id}`)).status).toBe(200);
    expect((await app.runtime.observe(id))?.phase).toBe('Ready');
    // Still a working browser: a good proxy fixes it in place.
    const good = await createProxy({ type: 'datacenter' });
    expect((await http.patch(`/browsers/${id}`, { proxy_id: good })).status).toBe(200);
    expect(await callerOf(page)).toBe('127.0.0.3');
    expect(`${log.text()}\n${agentLines}\n${await agentLog(id)}`).not.toContain(WRONG_PASSWORD);
  }, 120_000);
});
