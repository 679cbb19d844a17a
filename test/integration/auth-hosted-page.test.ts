import { Secret, TOTP } from 'otpauth';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { PAGE_SESSION_GRACE_MS } from '../../api/src/modules/auth-connections/hosted/routes.js';
import { PASSWORD, TOTP_SECRET, USERNAME, startLoginSites, type LoginSites, type SiteName } from '../fixtures/login-sites/server.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';

/**
 * The hosted login page used as an end user would: the service (real Postgres, real local
 * runtime, so the flow's own browser is a real headful Chromium) logs in to the fixture
 * sites, and a second, headless Chromium opens hosted_url, reads the step's fields and
 * choices, types, clicks, and sees the outcome, which the API then confirms.
 */

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
/** The flow's browser starts headful (Xvfb) and reads real pages on a busy shared machine. */
const STEP_TIMEOUT_MS = 90_000;
const TEST_TIMEOUT_MS = 240_000;

/** A login page whose label and error carry markup as text, as a hostile or careless site could. */
const MARKUP = '<img src=x onerror="document.title=\'pwned\';window.pwned=1">';
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const MARKUP_LOGIN = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head><body>
<h1>Sign in</h1>
<div role="alert">${escapeHtml(MARKUP)} is not a valid account</div>
<form method="post" action="/login">
<label for="username">Member ${escapeHtml(MARKUP)} name</label>
<input id="username" name="username" type="text" autocomplete="username" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form></body></html>`;

let app: TestApp;
let api: HttpClient;
let sites: LoginSites;
let markupSite: TestPageServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const connections: string[] = [];
let seq = 0;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  api = (await newProject(app.tenant.http)).http;
  sites = await startLoginSites();
  markupSite = await startTestPageServer({ '/login': MARKUP_LOGIN });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await sites?.close();
  await markupSite?.close();
});
afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close().catch(() => undefined);
  // Deleting cancels a flow still running, which closes its browser.
  for (const id of connections.splice(0)) await api.delete(`/auth/connections/${id}`);
});

interface Flow {
  connectionId: string;
  flowId: string;
  hostedUrl: string;
}

/** A connection to `domain` and a login started on it, through the public API. */
async function startLogin(domain: string, loginUrl: string): Promise<Flow> {
  const created = await api.post('/auth/connections', { domain, profile_name: `hosted-${++seq}-${Date.now()}`, login_url: loginUrl, health_checks: false });
  expect(created.status, created.text).toBe(200);
  connections.push(created.body.id);
  const login = await api.post(`/auth/connections/${created.body.id}/login`, {});
  expect(login.status, login.text).toBe(200);
  expect(login.body.hosted_url).toMatch(/#code=/);
  return { connectionId: created.body.id, flowId: login.body.id, hostedUrl: login.body.hosted_url };
}

const startSiteLogin = (site: SiteName) => startLogin(sites.domain(site), sites.url(site, '/login'));

/** A fresh browser profile (another person, or the same person on another device). */
async function newUserPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  return { context, page };
}

/** Waits until the page shows `state` (body[data-state]), reporting what it shows instead. */
async function waitForState(page: Page, state: string): Promise<void> {
  try {
    await page.locator(`body[data-state="${state}"]`).waitFor({ timeout: STEP_TIMEOUT_MS });
  } catch (error) {
    const shown = await page.evaluate<string>('document.body.dataset.state + ": " + document.body.innerText').catch(() => '?');
    throw new Error(`the hosted page never showed "${state}"; it shows ${shown}`, { cause: error });
  }
}

/** The fields of ManagedAuth these tests read. */
interface ConnectionView {
  status: string;
  flow_status?: string;
  flow_step?: string;
  browser_session_id?: string;
  fields?: Array<{ id: string; label?: string }>;
  error_message?: string;
  website_error?: string;
  [field: string]: unknown;
}

async function connection(id: string): Promise<ConnectionView> {
  const res = await api.get<ConnectionView>(`/auth/connections/${id}`);
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function signIn(page: Page, password: string): Promise<void> {
  await waitForState(page, 'input');
  await page.getByLabel('Username').fill(USERNAME);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Continue' }).click();
}

/** The label text of the focused element, or its own text (a button). */
const focusedLabel = (page: Page) => page.evaluate<string | undefined>('document.activeElement?.labels?.[0]?.textContent');
const focusedText = (page: Page) => page.evaluate<string | undefined>('document.activeElement?.textContent');

const totpNow = () => new TOTP({ secret: Secret.fromBase32(TOTP_SECRET), algorithm: 'SHA1', digits: 6, period: 30 }).generate();

describe('the hosted login page', () => {
  it('shows the fields, validates, embeds the browser, signs in, and the connection is AUTHENTICATED', async () => {
    const flow = await startSiteLogin('single');
    const { page } = await newUserPage();
    let loads = 0;
    page.on('load', () => loads++);
    const calls: string[] = [];
    page.on('request', (request) => {
      const path = new URL(request.url()).pathname;
      if (path.startsWith(`/auth/hosted/${flow.flowId}/`)) calls.push(path.slice(path.lastIndexOf('/') + 1));
    });
    await page.goto(flow.hostedUrl);
    await waitForState(page, 'input');
    // The handoff code has left the address bar (and the history entry).
    expect(new URL(page.url()).hash).toBe('');
    expect(await page.title()).toBe(`Sign in to ${sites.domain('single')}`);

    const username = page.getByLabel('Username');
    const password = page.getByLabel('Password');
    expect(await focusedLabel(page)).toBe('Username');
    expect(await username.getAttribute('autocomplete')).toBe('username');
    expect(await password.getAttribute('type')).toBe('password');
    expect(await password.getAttribute('autocomplete')).toBe('current-password');

    // The service's 400 details land next to the field they are about.
    await username.fill(USERNAME);
    await page.keyboard.press('Enter');
    const passwordError = page.locator(`#${await password.getAttribute('aria-describedby')}`);
    await expect.poll(() => passwordError.textContent()).toBe('Password is required');
    expect(await password.getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate<string | undefined>('document.activeElement?.getAttribute("type")')).toBe('password');

    // The flow's own browser, live, in the page (same origin, allowed by frame-src 'self').
    const toggle = page.getByRole('button', { name: 'Show the browser' });
    await toggle.click();
    expect(await page.getByRole('button', { name: 'Hide the browser' }).getAttribute('aria-expanded')).toBe('true');
    const src = await page.locator('#browser-frame iframe').getAttribute('src');
    const { browser_session_id: sessionId } = await connection(flow.connectionId);
    expect(new URL(src!).pathname).toBe(`/browsers/${sessionId}/live`);
    await page.frameLocator('#browser-frame iframe').locator('body[data-state="connected"]').waitFor({ timeout: STEP_TIMEOUT_MS });
    await page.getByRole('button', { name: 'Hide the browser' }).click();
    expect(await page.locator('#browser-frame iframe').count()).toBe(0);

    await password.fill(PASSWORD);
    await page.getByRole('button', { name: 'Continue' }).click();
    await waitForState(page, 'success');
    expect(await page.getByRole('status').textContent()).toBe(`You are signed in to ${sites.domain('single')}. You can close this page.`);
    // Live updates, not reloads and not polling: one load, one event stream.
    expect(loads).toBe(1);
    expect(calls).toContain('events');
    expect(calls.filter((c) => c === 'state').length).toBeLessThanOrEqual(3);

    const after = await connection(flow.connectionId);
    expect(after.status).toBe('AUTHENTICATED');
    expect(after.flow_status).toBe('SUCCESS');
    expect(sites.loginCount('single')).toBeGreaterThanOrEqual(1);
  }, TEST_TIMEOUT_MS);

  it('after a wrong password offers "try again" in the same flow, keeps the username, and signs in with the right one', async () => {
    const flow = await startSiteLogin('single');
    const { page } = await newUserPage();
    await page.goto(flow.hostedUrl);
    await signIn(page, 'not-the-password');
    await page.locator('body[data-retry="true"]').waitFor({ timeout: STEP_TIMEOUT_MS });
    expect(await page.getAttribute('body', 'data-state')).toBe('input');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Try again');
    expect(await page.getByRole('alert').textContent()).toBe('Incorrect username or password.');
    // The username stays, the password does not, and the cursor waits in the password field.
    expect(await page.getByLabel('Username').inputValue()).toBe(USERNAME);
    expect(await page.getByLabel('Password').inputValue()).toBe('');
    expect(await focusedLabel(page)).toBe('Password');
    const during = await connection(flow.connectionId);
    expect(during).toMatchObject({ flow_status: 'IN_PROGRESS', flow_step: 'AWAITING_INPUT', website_error: 'Incorrect username or password.' });

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Try again' }).click();
    await waitForState(page, 'success');
    const after = await connection(flow.connectionId);
    expect(after).toMatchObject({ status: 'AUTHENTICATED', flow_status: 'SUCCESS' });
    const timeline = await api.get<Array<{ id: string }>>(`/auth/connections/${flow.connectionId}/timeline`);
    expect(timeline.body.map((entry) => entry.id)).toEqual([flow.flowId]);
  }, TEST_TIMEOUT_MS);

  it('asks for the authenticator code after the password and signs in with it (totp shape)', async () => {
    const flow = await startSiteLogin('totp');
    const { page } = await newUserPage();
    await page.goto(flow.hostedUrl);
    await signIn(page, PASSWORD);
    const code = page.getByLabel('6-digit code from your authenticator app');
    await code.waitFor({ timeout: STEP_TIMEOUT_MS });
    expect(await code.getAttribute('inputmode')).toBe('numeric');
    expect(await code.getAttribute('autocomplete')).toBe('one-time-code');
    await expect.poll(() => focusedLabel(page)).toBe('6-digit code from your authenticator app');
    await page.keyboard.type(totpNow());
    await page.keyboard.press('Enter');
    await waitForState(page, 'success');
    expect((await connection(flow.connectionId)).status).toBe('AUTHENTICATED');
  }, TEST_TIMEOUT_MS);

  it('offers the second-factor methods as buttons; picking "Authenticator app" leads to the code (choice shape)', async () => {
    const flow = await startSiteLogin('choice');
    const { page } = await newUserPage();
    await page.goto(flow.hostedUrl);
    await signIn(page, PASSWORD);
    const authenticator = page.getByRole('button', { name: /^Authenticator app/ });
    await authenticator.waitFor({ timeout: STEP_TIMEOUT_MS });
    expect(await page.getByRole('button', { name: /^Text message/ }).count()).toBe(1);
    expect(await page.getByRole('heading', { level: 2 }).textContent()).toBe('Choose how to verify it’s you');
    // Keyboard only: the first choice has the focus; Tab moves to the next one.
    await expect.poll(() => focusedText(page)).toMatch(/^Text message/);
    await page.keyboard.press('Tab');
    expect(await focusedText(page)).toMatch(/^Authenticator app/);
    await page.keyboard.press('Enter');
    const code = page.getByLabel('6-digit code from your authenticator app');
    await code.waitFor({ timeout: STEP_TIMEOUT_MS });
    expect(sites.lastSmsCode('choice')).toBeNull();
    await code.fill(totpNow());
    await page.getByRole('button', { name: 'Continue' }).click();
    await waitForState(page, 'success');
    expect((await connection(flow.connectionId)).status).toBe('AUTHENTICATED');
  }, TEST_TIMEOUT_MS);

  it('refuses a used link elsewhere, answers 401 without the cookie, keeps the first browser’s session until a delete cancels it', async () => {
    const flow = await startSiteLogin('single');
    const first = await newUserPage();
    await first.page.goto(flow.hostedUrl);
    await waitForState(first.page, 'input');
    const cookie = (await first.context.cookies()).find((c) => c.name === 'bp_hosted');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: `/auth/hosted/${flow.flowId}` });
    expect(await first.page.evaluate<string>('document.cookie')).not.toContain('bp_hosted');
    const before = await connection(flow.connectionId);

    const other = await newUserPage();
    await other.page.goto(flow.hostedUrl);
    await waitForState(other.page, 'denied');
    expect(await other.page.getByRole('status').textContent()).toBe('This login link has expired or was already used. Ask for a new one.');
    expect(await other.page.locator('input').count()).toBe(0);
    // Without the page session the API of the page is closed to this browser.
    const refused = await other.page.evaluate(async (base) => {
      const get = async (path: string, init?: RequestInit) => {
        const res = await fetch(`${base}/${path}`, init);
        return [res.status, ((await res.json()) as { code: string }).code];
      };
      return {
        state: await get('state'),
        events: await get('events'),
        submit: await get('submit', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ field_values: { username: 'x' } }) }),
      };
    }, `/auth/hosted/${flow.flowId}`);
    expect(refused).toEqual({
      state: [401, 'hosted_session_required'],
      events: [401, 'hosted_session_required'],
      submit: [401, 'hosted_session_required'],
    });
    const after = await connection(flow.connectionId);
    for (const key of ['status', 'flow_status', 'flow_step', 'fields', 'choices', 'browser_session_id']) expect(after[key], key).toEqual(before[key]);
    expect(after.flow_step).toBe('AWAITING_INPUT');

    // The first browser keeps going: a reload (no code any more) and the link again both resume.
    await first.page.reload();
    await waitForState(first.page, 'input');
    await first.page.goto(flow.hostedUrl);
    await waitForState(first.page, 'input');
    await first.page.getByLabel('Username').fill(USERNAME);
    expect(await first.page.getByLabel('Password').count()).toBe(1);

    // Deleting the connection cancels the login: the open page hears it from the stream.
    expect((await api.delete(`/auth/connections/${flow.connectionId}`)).status).toBe(204);
    connections.splice(connections.indexOf(flow.connectionId), 1);
    await waitForState(first.page, 'ended');
    expect(await first.page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign-in canceled');
    expect(await first.page.locator('input').count()).toBe(0);
  }, TEST_TIMEOUT_MS);

  it('ends the page session on the server a while after the flow expires, whatever the browser does with its cookie', async () => {
    const flow = await startSiteLogin('single');
    const { page } = await newUserPage();
    await page.goto(flow.hostedUrl);
    await waitForState(page, 'input');
    const read = () => page.evaluate(async (base) => (await fetch(`${base}/state`)).status, `/auth/hosted/${flow.flowId}`);
    expect(await read()).toBe(200);
    // Expired just within the grace: the page still reads the outcome.
    const expire = (ago: number) => app.deps.db.query(`UPDATE auth_flows SET expires_at = now() - make_interval(secs => $2) WHERE id = $1`, [flow.flowId, ago]);
    await expire(PAGE_SESSION_GRACE_MS / 1000 - 30);
    expect(await read()).toBe(200);
    await expire(PAGE_SESSION_GRACE_MS / 1000 + 30);
    expect(await read()).toBe(401);
  }, TEST_TIMEOUT_MS);

  it('shows markup from the site as text: labels and errors never become HTML', async () => {
    const host = 'markup.localhost';
    const flow = await startLogin(host, `http://${host}:${new URL(markupSite.url).port}/login`);
    const { page } = await newUserPage();
    await page.goto(flow.hostedUrl);
    await waitForState(page, 'input');
    const reading = await connection(flow.connectionId);
    const label = reading.fields?.[0]?.label ?? '';
    expect(label).toContain('<img src=x');
    expect(await page.locator('label').first().textContent()).toBe(label);
    expect(await page.getByRole('alert').textContent()).toBe(reading.website_error);
    expect(reading.website_error).toContain('<img src=x');
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.evaluate<unknown>('window.pwned')).toBeUndefined();
    expect(await page.title()).toBe(`Sign in to ${host}`);
    // Trusted Types (from the CSP) is on: an HTML sink throws instead of parsing.
    const sink = `(() => { try { document.body.insertAdjacentHTML('beforeend', '<b>x</b>'); return 'parsed'; } catch (error) { return error.name; } })()`;
    expect(await page.evaluate<string>(sink)).toBe('TypeError');
  }, TEST_TIMEOUT_MS);
});

describe('steps the engine does not produce here', () => {
  // No fixture site needs a person outside the form (AWAITING_EXTERNAL_ACTION), and a flow
  // expires after 15 minutes: the page's own API answers for the service here, in the shape
  // the routes give it, so the page's rendering of those steps is still seen in a browser.
  it('shows the external action with the browser embedded, then the expiry from the state read after the stream ends', async () => {
    const { page } = await newUserPage();
    const base = `${app.url}/auth/hosted/maflow_fake`;
    const liveView = `${app.url}/browsers/browser_fake/live?token=t`;
    const external = {
      event: 'managed_auth_state',
      flow_status: 'IN_PROGRESS',
      flow_step: 'AWAITING_EXTERNAL_ACTION',
      flow_type: 'LOGIN',
      external_action_message: 'Approve the sign-in on your phone.',
      live_view_url: liveView,
      timestamp: new Date().toISOString(),
    };
    let releaseState = () => {};
    const stateAsked = new Promise<void>((resolve) => (releaseState = resolve));
    await page.route(`${base}/session`, (route) => route.fulfill({ json: { ...external, flow_id: 'maflow_fake', domain: 'bank.example' } }));
    await page.route(`${base}/events`, (route) =>
      route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: `event: managed_auth_state\ndata: ${JSON.stringify(external)}\n\n` }),
    );
    await page.route(`${base}/state`, async (route) => {
      await stateAsked;
      await route.fulfill({ json: { event: 'managed_auth_state', flow_status: 'EXPIRED', flow_step: 'COMPLETED', flow_id: 'maflow_fake', domain: 'bank.example' } });
    });
    await page.goto(`${base}#code=abc`);
    await waitForState(page, 'external');
    expect(await page.getByRole('status').textContent()).toBe('Approve the sign-in on your phone.');
    expect(await page.getByRole('button', { name: 'Hide the browser' }).getAttribute('aria-expanded')).toBe('true');
    expect(await page.locator('#browser-frame iframe').getAttribute('src')).toBe(liveView);
    expect(await page.locator('#browser-frame iframe').getAttribute('title')).toBe('The browser signing in to bank.example');

    releaseState();
    await waitForState(page, 'ended');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign-in expired');
    expect(await page.locator('#browser-frame iframe').count()).toBe(0);
    expect(await page.locator('#browser').isHidden()).toBe(true);
  }, TEST_TIMEOUT_MS);
});

describe('what the hosted page is served with', () => {
  it('sends a strict CSP and no-referrer, no-store, nosniff, and escapes the flow id', async () => {
    const res = await fetch(`${app.url}/auth/hosted/${encodeURIComponent('"><img src=x>')}`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    const directives = csp.split(';').map((d) => d.trim());
    for (const directive of [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      "connect-src 'self'",
      "frame-src 'self'",
      "img-src 'self' data:",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ]) {
      expect(directives).toContain(directive);
    }
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await res.text();
    expect(html).not.toContain('<img');
    expect(html).toContain('data-flow-id="&#34;&#62;&#60;img src=x&#62;"');

    for (const [file, type] of [
      ['hosted.js', 'text/javascript; charset=utf-8'],
      ['hosted.css', 'text/css; charset=utf-8'],
    ] as const) {
      const asset = await fetch(`${app.url}/auth/hosted-assets/${file}`);
      expect(asset.status, file).toBe(200);
      expect(asset.headers.get('content-type')).toBe(type);
      expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const script = await (await fetch(`${app.url}/auth/hosted-assets/hosted.js`)).text();
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    expect((await fetch(`${app.url}/auth/hosted-assets/nope.js`)).status).toBe(404);
  });

  it('tells a person plainly when the link is not valid (no code, no session)', async () => {
    const { page } = await newUserPage();
    await page.goto(`${app.url}/auth/hosted/maflow_does_not_exist#code=made-up`);
    await waitForState(page, 'denied');
    expect(await page.getByRole('status').textContent()).toBe('This login link has expired or was already used. Ask for a new one.');
    expect(new URL(page.url()).hash).toBe('');
  });
});
