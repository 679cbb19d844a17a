import { existsSync, readdirSync, statSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createLogger } from '../../api/src/logger.js';
import { BrowserResetError, type BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { createLocalRuntime, type LocalRuntime } from '../../api/src/runtime/local-runtime.js';
import { AgentDirectory, testAgentTokens } from '../support/agent-access.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/**
 * The agent's reset for a pool release (agent/src/reset.ts), through the local runtime,
 * with real agents, real Chromium and Playwright as the previous and the next holder.
 */

const root = path.resolve(import.meta.dirname, '../..');
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');

let scratch: string;
let runtime: LocalRuntime;
/** Two servers, so two origins (the port is part of the origin); cookies are per host, shared. */
let siteA: TestPageServer;
let siteB: TestPageServer;
let archives: ArchiveServer;

beforeAll(async () => {
  assertAgentBuilt();
  // Short: Chromium's singleton socket path under the work dirs is limited to 107 bytes.
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-rs-'));
  await chmod(scratch, 0o711);
  runtime = createLocalRuntime({ stateDir: path.join(scratch, 'state'), workRoot: path.join(scratch, 'b'), log, agentTokens: testAgentTokens });
  siteA = await startTestPageServer();
  siteB = await startTestPageServer();
  archives = await startArchiveServer();
});

afterAll(async () => {
  await runtime?.terminateAll(2000);
  await siteA?.close();
  await siteB?.close();
  await archives?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

function assertAgentBuilt(): void {
  for (const source of readdirSync(path.join(root, 'agent/src')).filter((name) => name.endsWith('.ts'))) {
    const built = path.join(root, 'dist/agent/src', source.replace(/\.ts$/, '.js'));
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(path.join(root, 'agent/src', source)).mtimeMs) {
      throw new Error(`the agent build is missing or stale (${source}): run make build`);
    }
  }
}

function spec(browserId: string, extra: Partial<BrowserLaunchSpec> = {}): BrowserLaunchSpec {
  return {
    browserId,
    orgId: 'org-test',
    projectId: 'project-test',
    headless: true,
    stealth: false,
    kioskMode: false,
    viewport: { width: 800, height: 600 },
    chromePolicy: {},
    labels: {},
    ...extra,
  };
}

async function launch(browserSpec: BrowserLaunchSpec): Promise<string> {
  const observed = await runtime.launch(browserSpec, { signal: new AbortController().signal });
  expect(observed.phase, observed.reason).toBe('Ready');
  return agents.remember(observed.agentUrl!, browserSpec.browserId);
}

/** Every agent request carries its browser's token. */
const agents = new AgentDirectory();

const cdpUrl = (agentUrl: string) => `${agentUrl.replace(/^http/, 'ws')}/cdp`;
const connect = (agentUrl: string) => chromium.connectOverCDP(cdpUrl(agentUrl), { timeout: 30_000, headers: agents.auth(agentUrl) });
const disconnected = (browser: Browser) => new Promise<void>((resolve) => browser.once('disconnected', () => resolve()));

/** Resolves with the close code, or 'open' if the socket is still open after `ms`. */
const closeWithin = (socket: WebSocket, ms: number) =>
  new Promise<number | 'open'>((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve(-1);
    const timer = setTimeout(() => resolve('open'), ms);
    socket.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });

const openSocket = (url: string) =>
  new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(url, { perMessageDeflate: false, headers: agents.auth(url) });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_req, res) => reject(new Error(`upgrade of ${url} answered ${res.statusCode}`)));
    socket.once('error', reject);
  });

/** 101 when the upgrade is accepted (the socket is closed at once), else the status it was refused with. */
const upgradeStatus = (url: string) =>
  new Promise<number>((resolve, reject) => {
    const socket = new WebSocket(url, { perMessageDeflate: false, headers: agents.auth(url) });
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_req, res) => {
      res.resume();
      socket.terminate();
      resolve(res.statusCode ?? 0);
    });
    socket.once('error', reject);
  });

const health = async (agentUrl: string) => (await (await fetch(`${agentUrl}/health`, { headers: agents.auth(agentUrl) })).json()) as { status: string; connections: number };

const postReset = (agentUrl: string, body: string) => fetch(`${agentUrl}/reset`, { method: 'POST', headers: { 'content-type': 'application/json', ...agents.auth(agentUrl) }, body });

/** What the next holder sees: its pages' URLs, its contexts, and its cookies. */
async function nextHolderView(browser: Browser) {
  const contexts = browser.contexts();
  const pages = contexts.flatMap((context) => context.pages());
  return { contexts: contexts.length, pages: pages.length, cookies: await contexts[0]!.cookies() };
}

describe('a reset on release', () => {
  it('closes the previous holder, leaves one page at the start URL, no extra context, no lease cookies and no storage of the open origins', async () => {
    const agentUrl = await launch(spec('reset-plain'));
    const previous = await connect(agentUrl);
    const previousGone = disconnected(previous);
    const context = previous.contexts()[0]!;
    const onA = await context.newPage();
    await onA.goto(`${siteA.url}/a`);
    await onA.evaluate(`document.cookie = 'lease=1; max-age=86400; path=/'; localStorage.setItem('left', 'by the previous holder')`);
    const onB = await context.newPage();
    await onB.goto(`${siteB.url}/b`);
    await onB.evaluate(`localStorage.setItem('left', 'on B');
      new Promise((resolve) => { const open = indexedDB.open('left-db', 1); open.onsuccess = () => { open.result.close(); resolve(true); }; })`);
    // Playwright's own contexts go when its connection closes (disposeOnDetach), so the
    // context the reset must dispose is made by a raw CDP client, as other clients may.
    const raw = await RawCdp.open(cdpUrl(agentUrl));
    const { browserContextId } = await raw.send<{ browserContextId: string }>('Target.createBrowserContext');
    await raw.send('Target.createTarget', { url: `${siteB.url}/raw-context`, browserContextId });
    await (await (await previous.newContext()).newPage()).goto(`${siteB.url}/playwright-context`);
    // A WebDriver BiDi client of the previous holder is closed too.
    const bidi = await openSocket(`${agentUrl.replace(/^http/, 'ws')}/webdriver`);
    expect(await health(agentUrl)).toMatchObject({ connections: 3 });

    const started = Date.now();
    const report = await runtime.reset('reset-plain', { startUrl: `${siteA.url}/start` });
    log.info({ ms: Date.now() - started, report }, 'reset through the runtime');

    // about:blank of the launch, A, B, the raw context's page, and (if Chromium had not
    // disposed it yet) the Playwright context and its page.
    expect(report).toMatchObject({ closedConnections: 3, cookiesRestored: 0 });
    expect(report.closedTargets).toBeGreaterThanOrEqual(4);
    expect(report.disposedContexts).toBeGreaterThanOrEqual(1);
    await previousGone;
    expect(await closeWithin(bidi, 10_000)).not.toBe('open');
    expect(await closeWithin(raw.socket, 10_000)).not.toBe('open');

    const next = await connect(agentUrl);
    try {
      const view = await nextHolderView(next);
      expect(view).toMatchObject({ contexts: 1, pages: 1, cookies: [] });
      const cdp = await next.newBrowserCDPSession();
      expect(await cdp.send('Target.getBrowserContexts')).toMatchObject({ browserContextIds: [] });
      const { targetInfos } = await cdp.send('Target.getTargets');
      expect(targetInfos.filter((info) => info.type === 'page')).toHaveLength(1);
      await cdp.detach();
      const page = next.contexts()[0]!.pages()[0]!;
      await page.waitForURL(`${siteA.url}/start`, { timeout: 30_000 });
      expect(await page.evaluate('localStorage.length')).toBe(0);
      const backOnB = await next.contexts()[0]!.newPage();
      await backOnB.goto(`${siteB.url}/b`);
      expect(await backOnB.evaluate('localStorage.length')).toBe(0);
      expect(await backOnB.evaluate(`indexedDB.databases().then((dbs) => dbs.map((db) => db.name))`)).toEqual([]);
      expect(await health(agentUrl)).toMatchObject({ status: 'ready', connections: 1 });
    } finally {
      await next.close();
    }
    await runtime.terminate('reset-plain', { graceMs: 2000 });
  }, 120_000);

  it('leaves one about:blank page when no start URL is given, and a browser that is reset twice stays usable', async () => {
    const agentUrl = await launch(spec('reset-blank', { startUrl: `${siteA.url}/launch` }));
    expect(await runtime.reset('reset-blank', {})).toEqual({ closedConnections: 0, closedTargets: 1, disposedContexts: 0, cookiesRestored: 0 });
    const next = await connect(agentUrl);
    try {
      expect(next.contexts()[0]!.pages().map((page) => page.url())).toEqual(['about:blank']);
      const page = await next.contexts()[0]!.newPage();
      await page.goto(`${siteB.url}/again`);
    } finally {
      await next.close();
    }
    expect(await runtime.reset('reset-blank', {})).toMatchObject({ closedTargets: 2 });
    await runtime.terminate('reset-blank', { graceMs: 2000 });
  }, 120_000);

  it('refuses clients that connect while it runs with 503, and takes them again once it is done', async () => {
    const agentUrl = await launch(spec('reset-refuses'));
    let done = false;
    const reset = runtime.reset('reset-refuses', {}).finally(() => (done = true));
    const statuses = new Set<number>();
    while (!done) statuses.add(await upgradeStatus(cdpUrl(agentUrl)));
    await reset;
    expect([...statuses].filter((status) => status !== 101 && status !== 503)).toEqual([]);
    expect(statuses).toContain(503);
    expect(await upgradeStatus(cdpUrl(agentUrl))).toBe(101);
    await runtime.terminate('reset-refuses', { graceMs: 2000 });
  }, 120_000);

  it('refuses a bad body with 400 and changes nothing; a browser that is not running cannot be reset', async () => {
    const agentUrl = await launch(spec('reset-bad-body'));
    const holder = await connect(agentUrl);
    try {
      for (const body of ['{"start_url": "file:///etc/passwd"}', '{"start_url": 5}', 'not json', '{"startUrl": "http://x.test/"}', `{"start_url": "http://x.test/${'a'.repeat(2048)}"}`]) {
        const res = await postReset(agentUrl, body);
        expect(res.status, body).toBe(400);
        const answer = (await res.json()) as { code: string; message: string; details: unknown[] };
        expect(answer, body).toMatchObject({ code: 'invalid_request', message: expect.any(String) });
        expect(answer.details.length, body).toBe(1);
      }
      expect(holder.isConnected()).toBe(true);
      expect(await health(agentUrl)).toMatchObject({ connections: 1 });
    } finally {
      await holder.close();
    }
    // The client's close reaches the agent a moment later (a loaded host takes longer): the
    // reset below must find no connection to close, so wait until the agent counts none.
    await expect.poll(async () => (await health(agentUrl)).connections, { timeout: 10_000 }).toBe(0);
    const ok = await postReset(agentUrl, '{"start_url": "about:blank"}');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ closed_connections: 0, closed_targets: 1, disposed_contexts: 0, cookies_restored: 0 });
    await runtime.terminate('reset-bad-body', { graceMs: 2000 });
    await expect(runtime.reset('reset-bad-body', {})).rejects.toBeInstanceOf(BrowserResetError);
  }, 120_000);

  it('keeps a headful browser alive and closes its live view viewers', async () => {
    const agentUrl = await launch(spec('reset-headful', { headless: false }));
    const previous = await connect(agentUrl);
    const previousGone = disconnected(previous);
    await (await previous.contexts()[0]!.newPage()).goto(`${siteA.url}/headful`);
    const viewer = await openSocket(`${agentUrl.replace(/^http/, 'ws')}/vnc`);

    const report = await runtime.reset('reset-headful', { startUrl: `${siteB.url}/start` });
    expect(report).toMatchObject({ closedConnections: 2, closedTargets: 2 });
    await previousGone;
    expect(await closeWithin(viewer, 10_000)).not.toBe('open');

    expect(await health(agentUrl)).toMatchObject({ status: 'ready' });
    const next = await connect(agentUrl);
    try {
      const page = next.contexts()[0]!.pages()[0]!;
      expect(next.contexts()[0]!.pages()).toHaveLength(1);
      await page.waitForURL(`${siteB.url}/start`, { timeout: 30_000 });
    } finally {
      await next.close();
    }
    await runtime.terminate('reset-headful', { graceMs: 2000 });
  }, 120_000);
});

describe('a reset of a browser started with a profile', () => {
  it("puts the profile's cookies back and drops the lease's", async () => {
    const profile = { id: 'reset-profile', archiveUrl: `${archives.url}/reset-profile`, saveChanges: true };
    // A first browser writes the profile: one persistent cookie, saved when it closes.
    const writerUrl = await launch(spec('reset-profile-writer', { profile }));
    const writer = await connect(writerUrl);
    const page = await writer.contexts()[0]!.newPage();
    await page.goto(`${siteA.url}/profile`);
    await page.evaluate(`document.cookie = 'kept=from-profile; max-age=86400; path=/'`);
    await writer.close();
    await runtime.terminate('reset-profile-writer', { graceMs: 10_000 });
    expect(archives.stored.has('reset-profile')).toBe(true);

    const agentUrl = await launch(spec('reset-profile-reader', { profile: { ...profile, saveChanges: false } }));
    const holder = await connect(agentUrl);
    const cookiesOf = async (browser: Browser) => (await browser.contexts()[0]!.cookies()).map((c) => `${c.name}=${c.value}`).sort();
    expect(await cookiesOf(holder)).toEqual(['kept=from-profile']);
    const leased = await holder.contexts()[0]!.newPage();
    await leased.goto(`${siteA.url}/lease`);
    await leased.evaluate(`document.cookie = 'kept=changed-by-the-lease; max-age=86400; path=/'; document.cookie = 'lease=1; path=/'`);
    expect(await cookiesOf(holder)).toEqual(['kept=changed-by-the-lease', 'lease=1']);

    const report = await runtime.reset('reset-profile-reader', {});
    expect(report).toMatchObject({ closedConnections: 1, cookiesRestored: 1 });
    const next = await connect(agentUrl);
    try {
      expect(await cookiesOf(next)).toEqual(['kept=from-profile']);
      const again = await next.contexts()[0]!.newPage();
      await again.goto(`${siteA.url}/after`);
      expect(await again.evaluate('document.cookie')).toBe('kept=from-profile');
    } finally {
      await next.close();
    }
    await runtime.terminate('reset-profile-reader', { graceMs: 2000 });
  }, 180_000);
});

/** A bare CDP client: what any client other than Playwright may do. */
class RawCdp {
  private nextId = 0;
  private readonly pending = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id !== undefined) this.pending.get(message.id)?.(message);
    });
  }

  static async open(url: string): Promise<RawCdp> {
    return new RawCdp(await openSocket(url));
  }

  send<T = unknown>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, (message) => (message.error ? reject(new Error(message.error.message)) : resolve(message.result as T)));
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }
}

interface ArchiveServer {
  url: string;
  stored: Map<string, Buffer>;
  close(): Promise<void>;
}

/** The service's side of the profile archive URL: GET gives what a PUT stored (204 before). */
async function startArchiveServer(): Promise<ArchiveServer> {
  const stored = new Map<string, Buffer>();
  const server = http.createServer((request, response) => {
    const id = (request.url ?? '/').slice(1);
    if (request.method === 'GET') {
      const archive = stored.get(id);
      if (!archive) return void response.writeHead(204).end();
      response.writeHead(200, { 'content-type': 'application/x-tar', 'content-length': archive.length }).end(archive);
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      stored.set(id, Buffer.concat(chunks));
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ size_bytes: stored.get(id)!.length }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stored,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
