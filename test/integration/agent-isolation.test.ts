import http from 'node:http';
import { chromium, type Browser, type Page } from 'playwright-core';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { startTestApp, type TestApp, type Tenant } from '../support/test-app.js';
import { readFile, rawRequest, type FsSession } from './browser-fs.fixtures.js';

// Issue 16, item 1: a web page must never reach a browser's agent. Real Chromium, real
// agents, real service; the attacker is a page served by a local server (another origin
// than the agent), shown in session B's browser (another org's) and in A's own browser.

let app: TestApp;
let pages: TestPageServer;
let victimTenant: Tenant;
let attackerTenant: Tenant;
let victim: Session;
let attacker: Session;

interface Session {
  id: string;
  agentUrl: string;
  browser: Browser;
  page: Page;
  fs: FsSession;
}

const SECRET = 'secret-of-session-a';

async function session(tenant: Tenant): Promise<Session> {
  const res = await tenant.http.post('/browsers', { headless: true });
  expect(res.status, res.text).toBe(200);
  const id = res.body.session_id as string;
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [id]);
  const browser = await chromium.connectOverCDP(res.body.cdp_ws_url as string);
  const context = browser.contexts()[0]!;
  const page = context.pages()[0] ?? (await context.newPage());
  return { id, agentUrl: rows[0]!.agent_url, browser, page, fs: { id, client: tenant.http, hostRoot: '', cdpWsUrl: res.body.cdp_ws_url as string } };
}

/**
 * What a hostile page tries against the agent at `port`: read a file, write one (a
 * multipart POST, which needs no CORS preflight), and drive Chromium over /cdp (open a
 * tab, read every cookie). Returns what it could observe.
 */
async function attackFromPage(page: Page, port: number) {
  return page.evaluate(
    async ({ port, secret }) => {
      const base = `http://127.0.0.1:${port}`;
      const outcome: Record<string, unknown> = {};
      try {
        const res = await fetch(`${base}/fs/read_file?path=/home/secret.txt`);
        outcome.read = { status: res.status, text: await res.text() };
      } catch (error) {
        outcome.read = { error: String(error) };
      }
      const form = new FormData();
      form.append('files[0][dest_path]', '/home/planted.txt');
      form.append('files[0][file]', new Blob([`planted by a page, not ${secret}`]), 'planted.txt');
      await fetch(`${base}/fs/upload`, { method: 'POST', mode: 'no-cors', body: form }).catch(() => undefined);
      outcome.cdp = await new Promise((resolve) => {
        // The page's own WebSocket (the test file's `WebSocket` is the ws package's).
        const ws = new (globalThis as unknown as { WebSocket: typeof WebSocket }).WebSocket(`ws://127.0.0.1:${port}/cdp`);
        const answers: unknown[] = [];
        const timer = setTimeout(() => resolve({ opened: true, answers, timedOut: true }), 5000);
        ws.onerror = () => {
          clearTimeout(timer);
          resolve({ opened: false });
        };
        ws.onopen = () => {
          ws.send(JSON.stringify({ id: 1, method: 'Target.createTarget', params: { url: 'about:blank#opened-by-a-page' } }));
          ws.send(JSON.stringify({ id: 2, method: 'Storage.getCookies', params: {} }));
        };
        ws.onmessage = (event) => {
          answers.push(JSON.parse(event.data as string));
          if (answers.length === 2) {
            clearTimeout(timer);
            ws.close();
            resolve({ opened: true, answers });
          }
        };
      });
      return outcome;
    },
    { port, secret: SECRET },
  );
}

/** A's state the attacks must not change: its tabs, its cookies, its files. */
async function stateOf(target: Session) {
  const cdpSession = await target.browser.newBrowserCDPSession();
  try {
    const { targetInfos } = (await cdpSession.send('Target.getTargets')) as { targetInfos: { type: string; url: string }[] };
    const { cookies } = (await cdpSession.send('Storage.getCookies')) as { cookies: { name: string }[] };
    const planted = await readFile(target.fs, '/home/planted.txt');
    return { tabs: targetInfos.filter((t) => t.type === 'page').map((t) => t.url).sort(), cookies: cookies.map((c) => c.name).sort(), planted: planted.status };
  } finally {
    await cdpSession.detach();
  }
}

const portOf = (agentUrl: string) => Number(new URL(agentUrl).port);

beforeAll(async () => {
  app = await startTestApp();
  pages = await startTestPageServer({ '/attack': '<title>an untrusted site</title>' });
  victimTenant = app.tenant;
  attackerTenant = await app.newTenant('attacker');
  victim = await session(victimTenant);
  attacker = await session(attackerTenant);
  // A's secrets: a file, and an HttpOnly cookie no page script of another site could read.
  const written = await rawRequest(victimTenant.http, 'PUT', `/browsers/${victim.id}/fs/write_file?path=/home/secret.txt`, SECRET, { 'content-type': 'application/octet-stream' });
  expect(written.status, written.text).toBe(204);
  await victim.page.context().addCookies([{ name: 'session_a', value: SECRET, domain: 'bank.example', path: '/', httpOnly: true, secure: false }]);
}, 120_000);

afterAll(async () => {
  await victim?.browser.close().catch(() => undefined);
  await attacker?.browser.close().catch(() => undefined);
  await pages?.close();
  await app?.close();
});

describe('a web page against an agent', () => {
  it('in another session’s browser cannot read, write or drive session A through A’s agent port', async () => {
    const before = await stateOf(victim);
    expect(before.cookies).toContain('session_a');
    await attacker.page.goto(`${pages.url}/attack`);
    const outcome = await attackFromPage(attacker.page, portOf(victim.agentUrl));
    console.log('page in B against A’s agent:', JSON.stringify(outcome));
    expect(JSON.stringify(outcome)).not.toContain(SECRET);
    expect(outcome.cdp).toEqual({ opened: false });
    // A top-level navigation (what B's own CDP client can do) shows only the refusal.
    const response = await attacker.page.goto(`${victim.agentUrl}/fs/read_file?path=/home/secret.txt`);
    const shown = await attacker.page.content();
    console.log('B navigated to A’s agent:', response?.status(), shown.slice(0, 200));
    expect(response?.status()).toBe(403);
    expect(shown).not.toContain(SECRET);
    expect(await stateOf(victim)).toEqual(before);
    expect(before.planted).toBe(404);
  });

  it('in the browser itself cannot escape into its own agent', async () => {
    await victim.page.goto(`${pages.url}/attack`);
    const before = await stateOf(victim);
    const outcome = await attackFromPage(victim.page, portOf(victim.agentUrl));
    console.log('page in A against its own agent:', JSON.stringify(outcome));
    expect(JSON.stringify(outcome)).not.toContain(SECRET);
    expect(outcome.cdp).toEqual({ opened: false });
    expect(await stateOf(victim)).toEqual(before);
  });
});

/** One raw request to the agent, so the test sets every header itself (Host included). */
function agentRequest(agentUrl: string, path: string, headers: Record<string, string>, method = 'GET'): Promise<{ status: number; body: string }> {
  const url = new URL(agentUrl);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: url.hostname, port: url.port, path, method, headers: { host: url.host, ...headers } }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

/** The status a WebSocket upgrade to the agent is answered with (101: accepted). */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers, perMessageDeflate: false });
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_request, response) => {
      response.resume();
      socket.terminate();
      resolve(response.statusCode ?? 0);
    });
    socket.once('error', reject);
  });
}

describe('the agent’s own checks', () => {
  const token = () => ({ authorization: `Bearer ${app.deps.agentTokens(victim.id)}` });
  const cdpUrl = () => `${victim.agentUrl.replace(/^http/, 'ws')}/cdp`;

  it('answers 401 unauthorized without its token, or with another browser’s, on every route and WebSocket', async () => {
    const others: Record<string, string>[] = [{}, { authorization: 'Bearer nope' }, { authorization: `Bearer ${app.deps.agentTokens(attacker.id)}` }];
    for (const headers of others) {
      for (const path of ['/fs/read_file?path=/home/secret.txt', '/json/version', '/computer/screenshot']) {
        const res = await agentRequest(victim.agentUrl, path, headers);
        expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(JSON.parse(res.body)).toMatchObject({ code: 'unauthorized' });
        expect(res.body).not.toContain(SECRET);
      }
      expect(await upgradeStatus(cdpUrl(), headers)).toBe(401);
      expect((await agentRequest(victim.agentUrl, '/shutdown', headers, 'POST')).status).toBe(401);
    }
    // A probe without the token learns the phase and nothing else.
    const probe = await agentRequest(victim.agentUrl, '/health', {});
    expect(probe.status).toBe(200);
    expect(JSON.parse(probe.body)).toEqual({ status: 'ready' });
    // With it, the service's own calls work.
    const read = await agentRequest(victim.agentUrl, '/fs/read_file?path=/home/secret.txt', token());
    expect(read).toEqual({ status: 200, body: SECRET });
    expect(await upgradeStatus(cdpUrl(), token())).toBe(101);
  });

  it('refuses 403 whatever a web browser sends (Origin, Sec-Fetch-Site), even with the right token', async () => {
    const browserHeaders: Record<string, string>[] = [{ origin: pages.url }, { origin: 'null' }, { 'sec-fetch-site': 'none' }, { 'sec-fetch-site': 'cross-site' }];
    for (const headers of browserHeaders) {
      const res = await agentRequest(victim.agentUrl, '/fs/read_file?path=/home/secret.txt', { ...token(), ...headers });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'forbidden_origin' });
      expect(await upgradeStatus(cdpUrl(), { ...token(), ...headers })).toBe(403);
      expect((await agentRequest(victim.agentUrl, '/health', headers)).status).toBe(403);
    }
  });

  it('refuses 403 a Host that is not an IP literal or localhost (DNS rebinding), even with the right token', async () => {
    for (const host of ['attacker.example', `attacker.example:${portOf(victim.agentUrl)}`, '127.0.0.1.nip.io']) {
      const res = await agentRequest(victim.agentUrl, '/fs/read_file?path=/home/secret.txt', { ...token(), host });
      expect(res.status, host).toBe(403);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'forbidden_host' });
      expect(await upgradeStatus(cdpUrl(), { ...token(), host })).toBe(403);
    }
    for (const host of [new URL(victim.agentUrl).host, `localhost:${portOf(victim.agentUrl)}`]) {
      expect((await agentRequest(victim.agentUrl, '/fs/read_file?path=/home/secret.txt', { ...token(), host })).status, host).toBe(200);
    }
  });
});
