import { spawn } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { IdleReaper } from '../../api/src/modules/browsers/reaper.js';
import { freePort } from '../../api/src/runtime/agent-process.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { agentAuth, fakeChromiumDir, testAgentTokens } from '../support/agent-access.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * WebDriver BiDi end to end: a raw `ws` client speaks BiDi through the service's
 * webdriver_ws_url to the agent's chromium-bidi mapper and a real Chromium.
 */

let app: TestApp;
let http: HttpClient;
let pages: TestPageServer;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  http = app.tenant.http;
  pages = await startTestPageServer({
    '/bidi': '<title>BiDi page</title><p id="marker">only-on-the-bidi-page</p>',
    '/first': '<title>first</title><p id="marker">first-client</p>',
    '/second': '<title>second</title><p id="marker">second-client</p>',
  });
});
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

interface BidiMessage {
  type: 'success' | 'error' | 'event';
  id?: number | null;
  result?: any;
  error?: string;
  message?: string;
}

/** A minimal BiDi client: commands by id, and every message kept in order for the rest. */
class BidiClient {
  private nextId = 1;
  readonly received: BidiMessage[] = [];
  private readonly waiters: Array<{ match: (m: BidiMessage) => boolean; resolve: (m: BidiMessage) => void }> = [];
  readonly closed: Promise<number>;

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as BidiMessage;
      this.received.push(message);
      const i = this.waiters.findIndex((w) => w.match(message));
      if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(message);
    });
    this.closed = new Promise((resolve) => socket.once('close', (code) => resolve(code)));
  }

  static open(url: string): Promise<BidiClient> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
      socket.once('open', () => resolve(new BidiClient(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends a command and waits for the response with its id (success or error). */
  send(method: string, params: Record<string, unknown> = {}): Promise<BidiMessage> {
    const id = this.nextId++;
    return this.sendRaw(JSON.stringify({ id, method, params }), (m) => m.type !== 'event' && m.id === id);
  }

  /** Sends any frame and waits for the first message `match` accepts. */
  sendRaw(frame: string | Buffer, match: (m: BidiMessage) => boolean): Promise<BidiMessage> {
    const answered = new Promise<BidiMessage>((resolve) => this.waiters.push({ match, resolve }));
    this.socket.send(frame, { binary: Buffer.isBuffer(frame) });
    return answered;
  }

  async ok(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const response = await this.send(method, params);
    expect(response, `${method}: ${JSON.stringify(response).slice(0, 500)}`).toMatchObject({ type: 'success' });
    return response.result;
  }

  async newSession(): Promise<any> {
    return this.ok('session.new', { capabilities: {} });
  }

  close(): Promise<number> {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.close();
    return this.closed;
  }
}

/** The HTTP status of a refused upgrade, or 101 when it was accepted. */
function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      socket.terminate();
    });
    socket.once('open', () => {
      resolve(101);
      socket.close();
    });
    socket.once('error', (error) => reject(error));
  });
}

async function newBrowser(body: Record<string, unknown> = {}) {
  const { http: client } = await newProject(http);
  const res = await client.post('/browsers', { headless: true, ...body });
  expect(res.status, res.text).toBe(200);
  return { client, session: res.body as { session_id: string; cdp_ws_url: string; webdriver_ws_url: string } };
}

async function agentHealth(sessionId: string): Promise<{ connections_by_kind: Record<string, number> }> {
  const agentUrl = (await readyBrowser(app.runtime, sessionId)).agentUrl;
  expect(agentUrl).toBeDefined();
  return (await fetch(`${agentUrl}/health`, { headers: { authorization: `Bearer ${app.deps.agentTokens(sessionId)}` } })).json() as Promise<{ connections_by_kind: Record<string, number> }>;
}

const readMarker = (context: string) => ({
  expression: "document.getElementById('marker').textContent",
  target: { context },
  awaitPromise: false,
});

describe('WebDriver BiDi through webdriver_ws_url', () => {
  it('opens a session, navigates to a local page, reads what only that page has, and ends the session', async () => {
    const { client, session } = await newBrowser();
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    const created = await bidi.newSession();
    expect(created.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.capabilities.browserName).toEqual(expect.any(String));

    const tree = await bidi.ok('browsingContext.getTree');
    expect(tree.contexts.length).toBeGreaterThanOrEqual(1);
    const context = tree.contexts[0].context as string;
    const navigated = await bidi.ok('browsingContext.navigate', { context, url: `${pages.url}/bidi`, wait: 'complete' });
    expect(navigated.url).toBe(`${pages.url}/bidi`);
    expect(pages.requests).toContain('/bidi');
    const evaluated = await bidi.ok('script.evaluate', readMarker(context));
    expect(evaluated.result).toEqual({ type: 'string', value: 'only-on-the-bidi-page' });

    // session.end answers, then the connection closes; the browser stays for other clients.
    expect(await bidi.send('session.end')).toMatchObject({ type: 'success', result: {} });
    expect(await bidi.closed).toBe(1000);
    expect((await client.get(`/browsers/${session.session_id}`)).status).toBe(200);
    const again = await BidiClient.open(session.webdriver_ws_url);
    await again.newSession();
    expect((await again.ok('script.evaluate', readMarker(context))).result.value).toBe('only-on-the-bidi-page');
    await again.close();
    expect((await client.delete(`/browsers/${session.session_id}`)).status).toBe(204);
  });

  it('answers malformed messages with BiDi errors and keeps the connection usable', async () => {
    const { session } = await newBrowser();
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    const errorFor = (frame: string | Buffer) => bidi.sendRaw(frame, (m) => m.type === 'error' && m.id === null);

    expect(await errorFor('this is not json')).toMatchObject({ type: 'error', id: null, error: 'invalid argument' });
    expect(await errorFor('[1, 2, 3]')).toMatchObject({ error: 'invalid argument', message: expect.stringContaining('array') });
    expect(await errorFor(JSON.stringify({ id: -1, method: 'session.status', params: {} }))).toMatchObject({ error: 'invalid argument' });
    expect(await errorFor(Buffer.from('{"id":1}'))).toMatchObject({ error: 'invalid argument', message: expect.stringContaining('binary') });
    const noParams = await bidi.sendRaw(JSON.stringify({ id: 900, method: 'session.status' }), (m) => m.id === 900);
    expect(noParams).toMatchObject({ type: 'error', error: 'invalid argument' });

    // Nothing but session.new and session.status before a session exists.
    expect(await bidi.send('browsingContext.getTree')).toMatchObject({ type: 'error', error: 'invalid session id' });
    expect(await bidi.send('session.status')).toMatchObject({ type: 'success' });
    // A malformed session.new does not use up the connection's one session.
    expect(await bidi.send('session.new', { capabilities: 'all of them' })).toMatchObject({ type: 'error', error: 'invalid argument' });
    await bidi.newSession();
    expect(await bidi.send('session.new', { capabilities: {} })).toMatchObject({ type: 'error', error: 'session not created' });

    expect(await bidi.send('nothing.here')).toMatchObject({ type: 'error', error: 'unknown command' });
    expect(await bidi.send('browsingContext.navigate', { context: 42, url: 7 })).toMatchObject({ type: 'error', error: 'invalid argument' });
    expect(await bidi.send('browsingContext.navigate', { context: 'no-such-context', url: `${pages.url}/x` })).toMatchObject({
      type: 'error',
      error: 'no such frame',
    });

    const tree = await bidi.ok('browsingContext.getTree');
    expect(tree.contexts.length).toBeGreaterThanOrEqual(1);
    await bidi.close();
  });

  it('carries large messages both ways', async () => {
    const { session } = await newBrowser();
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    await bidi.newSession();
    const context = (await bidi.ok('browsingContext.getTree')).contexts[0].context as string;
    // An 8 MB command in, a 32 MB result out.
    const big = 'a'.repeat(8 * 1024 * 1024);
    const result = await bidi.ok('script.evaluate', { expression: `'${big}'.repeat(4)`, target: { context }, awaitPromise: false });
    expect(result.result.value.length).toBe(32 * 1024 * 1024);
    await bidi.close();
  }, 60_000);

  it('refuses an unknown token before any upgrade', async () => {
    const { session } = await newBrowser();
    const url = new URL(session.webdriver_ws_url);
    const expiry = url.searchParams.get('token')!.split('.')[0]!;
    const forged = new URL(url);
    forged.searchParams.set('token', `${expiry}.${'A'.repeat(43)}`);
    expect(await upgradeStatus(forged.href)).toBe(403);
    const garbled = new URL(url);
    garbled.searchParams.set('token', 'not-a-token');
    expect(await upgradeStatus(garbled.href)).toBe(401);
    const none = new URL(url);
    none.searchParams.delete('token');
    expect(await upgradeStatus(none.href)).toBe(401);
    // Refused at the service: the agent never saw a client.
    expect((await agentHealth(session.session_id)).connections_by_kind.webdriver).toBe(0);
    expect(await upgradeStatus(url.href)).toBe(101);
  });

  it('counts a connected BiDi client at the agent, so the session is not reaped as idle', async () => {
    const { client, session } = await newBrowser({ timeout_seconds: 10 });
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    await bidi.newSession();
    expect((await agentHealth(session.session_id)).connections_by_kind.webdriver).toBe(1);
    // No service-side counts: only the agent's report keeps the session alive.
    const reaper = new IdleReaper(app.deps);
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    await reaper.tick();
    expect((await client.get(`/browsers/${session.session_id}`)).status).toBe(200);
    expect((await bidi.ok('browsingContext.getTree')).contexts.length).toBeGreaterThanOrEqual(1);

    await bidi.close();
    await expect.poll(async () => (await agentHealth(session.session_id)).connections_by_kind.webdriver, { timeout: 10_000, interval: 100 }).toBe(0);
  }, 40_000);

  it('serves two BiDi clients at once, each with its own session, and survives one leaving mid-command', async () => {
    const { session } = await newBrowser();
    const [first, second] = await Promise.all([BidiClient.open(session.webdriver_ws_url), BidiClient.open(session.webdriver_ws_url)]);
    await Promise.all([first.newSession(), second.newSession()]);
    expect((await agentHealth(session.session_id)).connections_by_kind.webdriver).toBe(2);

    const [tabOne, tabTwo] = await Promise.all([first.ok('browsingContext.create', { type: 'tab' }), second.ok('browsingContext.create', { type: 'tab' })]);
    await Promise.all([
      first.ok('browsingContext.navigate', { context: tabOne.context, url: `${pages.url}/first`, wait: 'complete' }),
      second.ok('browsingContext.navigate', { context: tabTwo.context, url: `${pages.url}/second`, wait: 'complete' }),
    ]);
    expect((await first.ok('script.evaluate', readMarker(tabOne.context))).result.value).toBe('first-client');
    expect((await second.ok('script.evaluate', readMarker(tabTwo.context))).result.value).toBe('second-client');

    // The first client vanishes with a navigation in flight; the second carries on.
    void first.send('browsingContext.navigate', { context: tabOne.context, url: `${pages.url}/gone`, wait: 'complete' });
    first.socket.terminate();
    await first.closed;
    await second.ok('browsingContext.navigate', { context: tabTwo.context, url: `${pages.url}/still-here`, wait: 'complete' });
    expect((await second.ok('script.evaluate', { expression: 'document.title', target: { context: tabTwo.context }, awaitPromise: false })).result.value).toBe(
      'page /still-here',
    );
    await expect.poll(async () => (await agentHealth(session.session_id)).connections_by_kind.webdriver, { timeout: 10_000, interval: 100 }).toBe(1);
    await second.close();
  }, 60_000);

  it('browser.close ends the browser like CDP Browser.close, and the reaper then ends the session', async () => {
    const { client, session } = await newBrowser();
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    await bidi.newSession();
    expect(await bidi.send('browser.close')).toMatchObject({ type: 'success', result: {} });
    await bidi.closed;
    await expect.poll(async () => (await app.runtime.observe(session.session_id))?.phase, { timeout: 10_000, interval: 100 }).not.toBe('Ready');
    await new IdleReaper(app.deps).tick();
    expect((await client.get(`/browsers/${session.session_id}`)).status).toBe(404);
    const { rows } = await app.database.db.query<{ deleted_reason: string }>('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [
      session.session_id,
    ]);
    expect(rows[0]?.deleted_reason).toBe('browser_gone');
  }, 40_000);

  it('shares the browser with a Playwright CDP client: each sees the pages the other opened', async () => {
    const { session } = await newBrowser();
    const playwright = await chromium.connectOverCDP(session.cdp_ws_url);
    const bidi = await BidiClient.open(session.webdriver_ws_url);
    try {
      await bidi.newSession();
      const context = playwright.contexts()[0]!;
      const page = await context.newPage();
      await page.goto(`${pages.url}/first`);
      const tab = await bidi.ok('browsingContext.create', { type: 'tab' });
      await bidi.ok('browsingContext.navigate', { context: tab.context, url: `${pages.url}/second`, wait: 'complete' });

      const urls = ((await bidi.ok('browsingContext.getTree')).contexts as Array<{ url: string }>).map((c) => c.url);
      expect(urls).toEqual(expect.arrayContaining([`${pages.url}/first`, `${pages.url}/second`]));
      await expect.poll(() => context.pages().map((p) => p.url()), { timeout: 10_000, interval: 100 }).toContain(`${pages.url}/second`);
      expect(await page.title()).toBe('first');
    } finally {
      await bidi.close();
      await playwright.close();
    }
  }, 60_000);
});

describe('the agent on its own', () => {
  it('holds a /webdriver upgrade made while Chromium starts, and opens it once Chromium answers', async () => {
    const scratch = await fakeChromiumDir();
    // A Chromium that takes two seconds more to start keeps the agent in 'starting' a while:
    // the service answers a create at the spawn, so clients connect meanwhile.
    const slowChromium = path.join(scratch, 'slow-chromium.sh');
    await writeFile(slowChromium, `#!/bin/bash\nsleep 2\nexec ${process.env.CHROME_PATH ?? '/usr/lib/chromium/chromium'} "$@"\n`, { mode: 0o755 });
    const port = await freePort();
    const agent = spawn(process.execPath, [path.resolve(import.meta.dirname, '../../dist/agent/src/main.js')], {
      env: {
        PATH: process.env.PATH,
        AGENT_SPEC: JSON.stringify({ browserId: 'bidi-starting' }),
        AGENT_TOKEN: testAgentTokens('bidi-starting'),
        AGENT_PORT: String(port),
        // One level down: the work dir's parent is hidden from the browser (agent/src/isolation.ts), the script must not be.
        AGENT_WORK_DIR: path.join(scratch, 'browsers', 'work'),
        CHROME_PATH: slowChromium,
      },
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => agent.once('exit', resolve));
    try {
      await expect
        .poll(
          async () => (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json() as Promise<{ status?: string }>, () => ({ status: 'not listening' }))).status,
          { timeout: 10_000, interval: 100 },
        )
        .toBe('starting');
      expect(await upgradeStatus(`ws://127.0.0.1:${port}/webdriver`, agentAuth('bidi-starting'))).toBe(101);
    } finally {
      agent.kill('SIGTERM');
      await exited;
      await rm(scratch, { recursive: true, force: true });
    }
  });
});
