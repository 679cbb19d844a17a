import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { readLoginPage } from '../../api/src/modules/auth-connections/engine/page-model.js';
import type { LoginPageReading } from '../../api/src/modules/auth-connections/engine/page-types.js';

/**
 * What the page-model tests share: a scriptable site on loopback, page markup modelled on
 * real sites, a Chromium for the file, and the check that every selector of a reading
 * matches exactly one element.
 */

export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

export type Handler = (request: http.IncomingMessage, body: string, response: http.ServerResponse) => void | Promise<void>;
export interface Site {
  url: string;
  posts: Array<{ path: string; body: string }>;
  route(path: string, handler: Handler | string): void;
  close(): Promise<void>;
}

export async function startSite(): Promise<Site> {
  const routes = new Map<string, Handler>();
  const posts: Site['posts'] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const path = new URL(request.url ?? '/', 'http://site').pathname;
      if (request.method === 'POST') posts.push({ path, body });
      const handler = routes.get(`${request.method} ${path}`) ?? routes.get(path);
      if (!handler) {
        response.writeHead(404).end('not found');
        return;
      }
      void Promise.resolve(handler(request, body, response)).catch((error: unknown) => response.destroy(error as Error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    posts,
    route(path, handler) {
      routes.set(path, typeof handler === 'string' ? (_request, _body, response) => html(response, handler) : handler);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

export const html = (response: http.ServerResponse, body: string): void => {
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(body);
};
export const redirect = (response: http.ServerResponse, location: string): void => {
  response.writeHead(302, { location }).end();
};
export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const page$ = (title: string, body: string, style = '') =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title><style>
  body { font: 16px sans-serif; margin: 24px; } input, button { display: block; margin: 6px 0; padding: 6px; }
  .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  ${style}</style></head><body>${body}</body></html>`;

/** A reading with nothing on it, for tests to override. */
export const empty = (url: string, title: string): LoginPageReading => ({
  url,
  title,
  fields: [],
  submitSelector: null,
  mfaOptions: [],
  ssoButtons: [],
  signInOptions: [],
  errorText: null,
  signInLinkSelector: null,
  loggedInHints: false,
  isLoginStep: false,
});

/** Every selector in a reading must match exactly one element, the way the engine will use it. */
export async function expectSelectorsMatchOne(page: Page, reading: LoginPageReading): Promise<void> {
  const css = [
    ...reading.fields.map((f) => f.selector),
    ...reading.mfaOptions.map((o) => o.selector),
    ...reading.signInOptions.map((o) => o.selector),
    ...[reading.submitSelector, reading.signInLinkSelector].filter((s): s is string => s !== null),
  ];
  for (const selector of css) expect(await page.locator(`css=${selector}`).count(), selector).toBe(1);
  for (const button of reading.ssoButtons) expect(await page.locator(`xpath=${button.selector}`).count(), button.selector).toBe(1);
}

/**
 * The browser, page and site each test of a file that calls usePageModelBrowser() acts on:
 * one Chromium for the file, a fresh context and site for every test. Exported as live
 * bindings, so a test reads the current ones.
 */
export let browser: Browser;
export let context: BrowserContext;
export let page: Page;
export let site: Site;

export function usePageModelBrowser(): void {
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    site = await startSite();
    context = await browser.newContext();
    page = await context.newPage();
  });
  afterEach(async () => {
    await context?.close();
    await site?.close();
  });
}

export async function read(path: string, markup: string): Promise<LoginPageReading> {
  site.route(path, markup);
  await page.goto(`${site.url}${path}`);
  const reading = await readLoginPage(page);
  await expectSelectorsMatchOne(page, reading);
  return reading;
}

export const githubLogin = (error = '', login = '') =>
  page$(
    'Sign in to GitHub · GitHub',
    `<main><h1>Sign in to GitHub</h1>${error ? `<div class="flash flash-error" role="alert">${error}</div>` : ''}
    <form action="/session" method="post"><input type="hidden" name="authenticity_token" value="csrf-abc">
      <label for="login_field">Username or email address</label><input type="text" name="login" id="login_field" autocomplete="username" value="${login}">
      <label for="password">Password</label><input type="password" name="password" id="password" autocomplete="current-password">
      <input type="submit" name="commit" value="Sign in"></form></main>`,
  );
export const githubTwoFactor = page$(
  'Two-factor authentication · GitHub',
  `<main><h1>Two-factor authentication</h1><form action="/sessions/two-factor" method="post">
    <label for="app_totp">Authentication code</label><input type="text" name="app_otp" id="app_totp" inputmode="numeric" maxlength="6" autocomplete="one-time-code">
    <p>Open your two-factor authenticator (TOTP) app or browser extension to view your authentication code.</p>
    <button type="submit">Verify</button></form></main>`,
);
export const dashboard = page$('Dashboard', `<header><form action="/logout" method="post"><button>Sign out</button></form></header><main><h1>Dashboard</h1></main>`);
