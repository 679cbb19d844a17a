import { readdir, readFile, readlink } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { processGroupMembers } from '../../lib/process-group.js';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * Chromium speaks CDP to its agent over --remote-debugging-pipe and nothing else: no
 * process of the browser listens on a TCP port, and every client of the service's
 * cdp_ws_url gets a virtual connection of its own over that one pipe (agent/src/cdp/).
 * Real agents, real Chromium, through the app's own local runtime and CDP proxy.
 */

let app: TestApp;
let http: HttpClient;
let pages: TestPageServer;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  http = app.tenant.http;
  pages = await startTestPageServer({ '/page': '<title>a page</title><p>hi</p>' });
});
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

async function newBrowser(): Promise<{ id: string; cdpWsUrl: string; agentUrl: string; client: HttpClient }> {
  const { http: client } = await newProject(http);
  const res = await client.post('/browsers', { headless: true });
  expect(res.status, res.text).toBe(200);
  const observed = await readyBrowser(app.runtime, res.body.session_id);
  return { id: res.body.session_id, cdpWsUrl: res.body.cdp_ws_url, agentUrl: observed.agentUrl!, client };
}

/** The agent's whole /health answer: only the service's token gets more than {status}. */
const agentHealth = async (browser: { id: string; agentUrl: string }): Promise<any> =>
  (await fetch(`${browser.agentUrl}/health`, { headers: { authorization: `Bearer ${app.deps.agentTokens(browser.id)}` } })).json();

/** Inodes of LISTEN sockets (state 0A) in the network namespace `pid` is in. */
async function listeningInodes(pid: number): Promise<Map<string, string>> {
  const inodes = new Map<string, string>();
  for (const table of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A') inodes.set(fields[9]!, `${table} ${fields[1]}`);
    }
  }
  return inodes;
}

/** Every TCP port a process of the group listens on, as "pid tcp <hex address:port>". */
async function listenersOf(pgid: number): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await processGroupMembers(pgid)) {
    const listening = await listeningInodes(pid);
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      const inode = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''))?.[1];
      if (inode && listening.has(inode)) found.push(`${pid} ${listening.get(inode)}`);
    }
  }
  return found;
}

/** A bare CDP client on the service's cdp_ws_url, to see exactly what reaches a connection. */
class RawCdp {
  private nextId = 0;
  readonly received: any[] = [];
  private readonly waiters = new Map<number, (message: any) => void>();

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8'));
      this.received.push(message);
      if (message.id !== undefined) this.waiters.get(message.id)?.(message);
    });
  }

  static async open(url: string): Promise<RawCdp> {
    const socket = new WebSocket(url, { maxPayload: 256 * 1024 * 1024 });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    return new RawCdp(socket);
  }

  /** The whole answer (result or error). */
  call(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<any> {
    const id = ++this.nextId;
    return new Promise((resolve) => {
      this.waiters.set(id, resolve);
      this.socket.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  async close(): Promise<void> {
    this.socket.close();
    await new Promise((resolve) => this.socket.once('close', resolve));
  }
}

describe('Chromium without a DevTools port', () => {
  it('has no process of the browser listening on any TCP port', async () => {
    const browser = await newBrowser();
    const { browser: info } = await agentHealth(browser);
    const members = await processGroupMembers(info.pid);
    expect(members.length).toBeGreaterThan(2);
    expect(await listenersOf(info.pid)).toEqual([]);
    expect((await browser.client.delete(`/browsers/${browser.id}`)).status).toBe(204);
  });

  it('serves Playwright and puppeteer at once, each with its own pages and events; one leaving keeps the other working', async () => {
    const browser = await newBrowser();
    const pw = await chromium.connectOverCDP(browser.cdpWsUrl);
    const pp = await puppeteer.connect({ browserWSEndpoint: browser.cdpWsUrl, defaultViewport: null });
    try {
      expect((await agentHealth(browser)).connections_by_kind.cdp).toBe(2);
      const pwContext = await pw.newContext();
      const pwPage = await pwContext.newPage();
      const ppContext = await pp.createBrowserContext();
      const ppPage = await ppContext.newPage();
      const pwConsole: string[] = [];
      const ppConsole: string[] = [];
      pwPage.on('console', (message) => pwConsole.push(message.text()));
      ppPage.on('console', (message) => ppConsole.push(message.text()));
      await Promise.all([pwPage.goto(`${pages.url}/page`), ppPage.goto(`${pages.url}/page`)]);
      await Promise.all([pwPage.evaluate('console.log("from-playwright")'), ppPage.evaluate('console.log("from-puppeteer")')]);
      await expect.poll(() => pwConsole).toContain('from-playwright');
      await expect.poll(() => ppConsole).toContain('from-puppeteer');
      expect(pwConsole).not.toContain('from-puppeteer');
      expect(ppConsole).not.toContain('from-playwright');

      // puppeteer leaves mid-way: Playwright goes on as if nothing happened.
      await pp.disconnect();
      await expect.poll(async () => Number((await agentHealth(browser)).connections_by_kind.cdp)).toBe(1);
      await pwPage.goto(`${pages.url}/page?again`);
      expect(await pwPage.title()).toBe('a page');
      await pwPage.evaluate('console.log("still-here")');
      await expect.poll(() => pwConsole).toContain('still-here');
      const extra = await pwContext.newPage();
      expect(await extra.evaluate('1 + 1')).toBe(2);
    } finally {
      await pp.disconnect().catch(() => undefined);
      await pw.close().catch(() => undefined);
    }
    expect((await browser.client.delete(`/browsers/${browser.id}`)).status).toBe(204);
  }, 60_000);

  it("refuses a connection's commands to another connection's session, and never shows it the other's events", async () => {
    const browser = await newBrowser();
    const a = await RawCdp.open(browser.cdpWsUrl);
    const b = await RawCdp.open(browser.cdpWsUrl);
    try {
      const { result: created } = await a.call('Target.createTarget', { url: 'about:blank' });
      const { result: attached } = await a.call('Target.attachToTarget', { targetId: created.targetId, flatten: true });
      const session = attached.sessionId as string;
      expect((await a.call('Runtime.enable', {}, session)).error).toBeUndefined();
      const evaluated = await a.call('Runtime.evaluate', { expression: 'console.log("a-only"); 6 * 7' }, session);
      expect(evaluated.result.result.value).toBe(42);
      await expect.poll(() => a.received.some((m) => m.method === 'Runtime.consoleAPICalled' && m.sessionId === session)).toBe(true);

      // B names A's session: refused, and nothing of A's reaches B.
      const refused = await b.call('Runtime.evaluate', { expression: 'document.title = "b was here"' }, session);
      expect(refused.error).toMatchObject({ code: -32001, message: 'Session with given id not found.' });
      expect((await b.call('Target.detachFromTarget', { sessionId: session })).error).toBeDefined();
      expect((await a.call('Runtime.evaluate', { expression: 'document.title' }, session)).result.result.value).toBe('');
      expect(b.received.filter((m) => m.sessionId === session)).toEqual([]);

      // B's own browser-level view works, and its ids are its own (both started at 1).
      const version = await b.call('Browser.getVersion');
      expect(version.result.product).toMatch(/^Chrome\//);
      expect(version.sessionId).toBeUndefined();

      // A leaves: its session is gone with it, B is untouched.
      await a.close();
      expect((await b.call('Runtime.evaluate', { expression: '1' }, session)).error).toMatchObject({ code: -32001 });
      expect((await b.call('Target.getTargets')).result.targetInfos.length).toBeGreaterThan(0);
    } finally {
      await b.close();
    }
    expect((await browser.client.delete(`/browsers/${browser.id}`)).status).toBe(204);
  });

  it('carries messages of tens of MiB both ways', async () => {
    const browser = await newBrowser();
    const raw = await RawCdp.open(browser.cdpWsUrl);
    try {
      const { result: created } = await raw.call('Target.createTarget', { url: 'about:blank' });
      const { result: attached } = await raw.call('Target.attachToTarget', { targetId: created.targetId, flatten: true });
      const big = 'a'.repeat(24 * 1024 * 1024);
      const up = await raw.call('Runtime.evaluate', { expression: `"${big}".length` }, attached.sessionId);
      expect(up.result.result.value).toBe(big.length);
      const down = await raw.call('Runtime.evaluate', { expression: `"\\u00e9".repeat(${16 * 1024 * 1024})`, returnByValue: true }, attached.sessionId);
      const value = down.result.result.value as string;
      expect(value.length).toBe(16 * 1024 * 1024);
      expect(value.slice(0, 3)).toBe('ééé');
    } finally {
      await raw.close();
    }
    expect((await browser.client.delete(`/browsers/${browser.id}`)).status).toBe(204);
  }, 60_000);
});
