import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { Parser, type ReadEntry } from 'tar';
import type { HttpClient } from '../support/http.js';

/**
 * Helpers for the profile tests: a page on its own loopback host (so its cookies and
 * storage belong to that origin alone), reading and writing that state through Playwright
 * over cdp_ws_url, and the agent's archive route called by hand.
 */

const PAGE = '<!doctype html><title>profile page</title><p>state lives here</p>';

export interface StatePage {
  url: string;
  close(): Promise<void>;
}

export async function startStatePage(host: string): Promise<StatePage> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(PAGE);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface PageState {
  cookie: string;
  stored: string | null;
}

/** Opens the page in the session's browser, reads its cookie and localStorage, and writes new values when given. */
export async function visit(cdpWsUrl: string, pageUrl: string, write?: string): Promise<PageState> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = await context.newPage();
    await page.goto(pageUrl);
    // Strings, not functions: the tests compile without the DOM library.
    const before = await page.evaluate<PageState>("({ cookie: document.cookie, stored: localStorage.getItem('who') })");
    if (write !== undefined) {
      // A persistent cookie: session cookies are not written to disk by design.
      const value = JSON.stringify(write);
      await page.evaluate(`document.cookie = 'who=' + ${value} + '; max-age=86400; path=/'; localStorage.setItem('who', ${value});`);
    }
    await page.close();
    return before;
  } finally {
    await browser.close().catch(() => undefined);
  }
}

/** GET /profiles/{id}/download?format=tar as the entries' paths (directories end in "/"). */
export async function downloadedPaths(client: HttpClient, profileId: string): Promise<string[]> {
  const headers: Record<string, string> = { ...client.extraHeaders, accept: 'application/octet-stream' };
  if (client.key) headers.authorization = `Bearer ${client.key}`;
  const res = await fetch(`${client.baseUrl}/profiles/${profileId}/download?format=tar`, { headers });
  if (res.status !== 200) throw new Error(`download answered ${res.status}`);
  const paths: string[] = [];
  const parser = new Parser({ strict: true });
  parser.on('entry', (entry: ReadEntry) => {
    paths.push(entry.path);
    entry.resume();
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    parser.end(bytes);
  });
  return paths;
}

/** The agent's side of the archive route, by hand. */
export async function archiveRequest(
  baseUrl: string,
  sessionId: string,
  token: string | undefined,
  init: { method: 'GET' | 'PUT'; body?: Buffer },
): Promise<{ status: number; body: { code?: string; message?: string } | Buffer }> {
  const query = token === undefined ? '' : `?token=${encodeURIComponent(token)}`;
  const res = await fetch(`${baseUrl}/internal/browsers/${sessionId}/profile${query}`, {
    method: init.method,
    ...(init.body ? { body: init.body, headers: { 'content-type': 'application/x-tar' } } : {}),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
  return { status: res.status, body: isJson ? (JSON.parse(bytes.toString('utf8')) as { code?: string; message?: string }) : bytes };
}
