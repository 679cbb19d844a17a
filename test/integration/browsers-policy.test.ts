import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * chrome_policy through the real local runtime: the policy reaches one browser alone (its
 * own mount namespace over /etc/chromium/policies/managed), and nothing stays mounted.
 */

const MANAGED = '/etc/chromium/policies/managed';
const JS_PAGE = '<!doctype html><title>no-js</title><script>document.title = "js-ran"</script>';

let app: TestApp;
let http: HttpClient;
const servers: Server[] = [];

/** A page server on its own loopback address, so a host rule can tell it apart. */
async function pageServer(host: string): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' });
    res.end(JS_PAGE);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return `http://${host}:${(server.address() as AddressInfo).port}/`;
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http } = await newProject(app.tenant.http));
});
afterAll(async () => {
  await app?.close();
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

async function health(sessionId: string): Promise<{ browser: { pid: number; sandbox: boolean } }> {
  const agentUrl = (await readyBrowser(app.runtime, sessionId)).agentUrl;
  return (await fetch(`${agentUrl}/health`, { headers: { authorization: `Bearer ${app.deps.agentTokens(sessionId)}` } })).json() as Promise<{ browser: { pid: number; sandbox: boolean } }>;
}

async function openPage(cdpWsUrl: string) {
  const browser = await chromium.connectOverCDP(cdpWsUrl);
  const page = await browser.contexts()[0]!.newPage();
  return { browser, page };
}

const navigationError = (promise: Promise<unknown>) => promise.then(() => 'loaded', (error: Error) => /net::ERR_[A-Z_]+/.exec(error.message)?.[0] ?? error.message);
const policyMounts = (mountinfo: string) => mountinfo.split('\n').filter((line) => line.split(' ')[4] === MANAGED);

describe('chrome_policy', () => {
  it('applies to that browser alone, echoes in the response, keeps the sandbox and leaves nothing mounted', async () => {
    const blockedUrl = await pageServer('127.0.0.5');
    const openUrl = await pageServer('127.0.0.6');
    const policy = { URLBlocklist: ['127.0.0.5'], DefaultJavaScriptSetting: 2 };
    const [withPolicy, without] = await Promise.all([
      http.post('/browsers', { headless: true, chrome_policy: policy }),
      http.post('/browsers', { headless: true }),
    ]);
    expect(withPolicy.status, withPolicy.text).toBe(200);
    expect(without.status, without.text).toBe(200);
    expect(withPolicy.body.chrome_policy).toEqual(policy);
    expect((await http.get(`/browsers/${withPolicy.body.session_id}`)).body.chrome_policy).toEqual(policy);
    expect(without.body.chrome_policy).toBeUndefined();

    const browsers: Browser[] = [];
    try {
      const a = await openPage(withPolicy.body.cdp_ws_url);
      const b = await openPage(without.body.cdp_ws_url);
      browsers.push(a.browser, b.browser);
      // DefaultJavaScriptSetting 2: the page's own script does not run there, and does in the other.
      await a.page.goto(openUrl);
      await b.page.goto(openUrl);
      expect(await a.page.title()).toBe('no-js');
      expect(await b.page.title()).toBe('js-ran');
      // URLBlocklist: the policy browser refuses the host, the other one loads it at the same time.
      expect(await navigationError(a.page.goto(blockedUrl))).toBe('net::ERR_BLOCKED_BY_ADMINISTRATOR');
      expect(await navigationError(b.page.goto(blockedUrl))).toBe('loaded');

      // Chromium runs as the unprivileged user, inside its own mount namespace, sandboxed.
      const { browser: info } = await health(withPolicy.body.session_id);
      expect(info.sandbox).toBe(true);
      const status = await readFile(`/proc/${info.pid}/status`, 'utf8');
      expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).not.toBe('0');
      expect(policyMounts(await readFile(`/proc/${info.pid}/mountinfo`, 'utf8'))).toHaveLength(1);
      expect(policyMounts(await readFile('/proc/self/mountinfo', 'utf8'))).toHaveLength(0);
      expect(existsSync(`${MANAGED}/browserplane-session.json`)).toBe(false);
      const sandboxPage = await a.browser.contexts()[0]!.newPage();
      await sandboxPage.goto('chrome://sandbox');
      expect(await sandboxPage.locator('body').innerText()).toContain('You are adequately sandboxed');
    } finally {
      await Promise.all(browsers.map((browser) => browser.close().catch(() => undefined)));
    }

    const { browser: info } = await health(withPolicy.body.session_id);
    expect((await http.delete(`/browsers/${withPolicy.body.session_id}`)).status).toBe(204);
    expect((await http.delete(`/browsers/${without.body.session_id}`)).status).toBe(204);
    expect(existsSync(`/proc/${info.pid}`)).toBe(false);
    expect(policyMounts(await readFile('/proc/self/mountinfo', 'utf8'))).toHaveLength(0);
  }, 120_000);

  it('refuses a policy that would break the service with 400 and launches nothing', async () => {
    const before = (await app.runtime.list()).length;
    const res = await http.post('/browsers', { headless: true, chrome_policy: { ProxySettings: { ProxyMode: 'direct' } } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('ProxySettings');
    expect((await app.runtime.list()).length).toBe(before);
  });
});
