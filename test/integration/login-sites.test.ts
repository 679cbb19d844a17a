import http from 'node:http';
import { Secret, TOTP } from 'otpauth';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  EMAIL,
  PASSWORD,
  TOTP_SECRET,
  USERNAME,
  startLoginSites,
  type LoginSites,
  type SiteName,
} from '../fixtures/login-sites/server.js';

// The fixture sites driven by hand in real Chromium, the way the managed-auth engine will
// drive them: each shape works end to end, and its markup is what a person sees (labels,
// roles), so the engine's page reading is tested against pages that behave like real ones.

let browser: Browser;
let sites: LoginSites;
let context: BrowserContext;
let page: Page;

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
  });
});

afterAll(async () => {
  await browser?.close();
});

beforeEach(async () => {
  sites = await startLoginSites();
  context = await browser.newContext();
  page = await context.newPage();
  page.setDefaultTimeout(20_000);
});

afterEach(async () => {
  await context?.close();
  await sites?.close();
});

async function expectAt(site: SiteName, path: string): Promise<void> {
  await page.waitForURL((url) => url.hostname === sites.host(site) && url.pathname === path);
}

async function signIn(username: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

async function expectWelcome(site: SiteName): Promise<void> {
  await expectAt(site, '/account');
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(`Welcome, ${USERNAME}`);
  expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1);
}

async function alertText(): Promise<string | null> {
  return page.getByRole('alert').textContent();
}

/** A six-digit code that the authenticator does not accept around now (±2 steps, to be safe). */
function wrongTotpCode(): string {
  const secret = Secret.fromBase32(TOTP_SECRET);
  const valid = new Set([-2, -1, 0, 1, 2].map((step) => TOTP.generate({ secret, timestamp: Date.now() + step * 30_000 })));
  let candidate = 123456;
  while (valid.has(String(candidate))) candidate += 1;
  return String(candidate);
}

function currentTotpCode(): string {
  return TOTP.generate({ secret: Secret.fromBase32(TOTP_SECRET) });
}

/** A request from Node, which cannot resolve *.localhost: connect to 127.0.0.1, name the site in Host. */
function nodeGet(host: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port: sites.port, path, headers: { host: `${host}:${sites.port}` } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
  });
}

describe('single', () => {
  it('the home page links to the login form; the right password logs in with an HttpOnly cookie; sign-out logs out', async () => {
    await page.goto(sites.url('single'));
    expect(await page.locator('form').count()).toBe(0);
    await page.getByRole('link', { name: 'Sign in' }).click();
    await expectAt('single', '/login');
    expect(await page.getByLabel('Username').getAttribute('autocomplete')).toBe('username');
    expect(await page.getByLabel('Password').getAttribute('autocomplete')).toBe('current-password');

    await signIn(USERNAME, PASSWORD);
    await expectWelcome('single');
    expect(sites.loginCount('single')).toBe(1);
    const [sid] = (await context.cookies()).filter((cookie) => cookie.name === 'sid');
    expect(sid).toMatchObject({ domain: 'single.localhost', httpOnly: true, sameSite: 'Lax' });
    expect(sid!.expires * 1000).toBeGreaterThan(Date.now() + 29 * 24 * 3600_000);

    await page.goto(sites.url('single', '/'));
    await expectAt('single', '/account');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await expectAt('single', '/');
    await page.goto(sites.url('single', '/account'));
    await expectAt('single', '/login');
  });

  it('a wrong password shows the login page again with the error in role="alert" and logs nobody in', async () => {
    await page.goto(sites.url('single', '/login'));
    await signIn(USERNAME, 'wrong-password');
    expect(await alertText()).toBe('Incorrect username or password.');
    expect(new URL(page.url()).pathname).toBe('/login');
    expect(await page.getByLabel('Username').inputValue()).toBe(USERNAME);
    expect(await page.getByLabel('Password').inputValue()).toBe('');
    expect(sites.loginCount('single')).toBe(0);
    await page.goto(sites.url('single', '/account'));
    await expectAt('single', '/login');
  });
});

describe('twostep', () => {
  it('asks for the e-mail alone, then shows it read-only next to the password', async () => {
    await page.goto(sites.url('twostep', '/login'));
    expect(await page.locator('input[type=password]').count()).toBe(0);
    const email = page.getByLabel('Email address');
    expect(await email.getAttribute('type')).toBe('email');
    expect(await email.getAttribute('autocomplete')).toBe('username');

    await email.fill('bob@example.com');
    await page.getByRole('button', { name: 'Next' }).click();
    expect(await alertText()).toBe("We couldn't find an account with that email address.");

    await page.getByLabel('Email address').fill(EMAIL);
    await page.getByRole('button', { name: 'Next' }).click();
    await expectAt('twostep', '/login/password');
    expect(await page.getByLabel('Email address').inputValue()).toBe(EMAIL);
    expect(await page.getByLabel('Email address').getAttribute('readonly')).not.toBeNull();

    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await alertText()).toBe('Incorrect password. Try again.');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expectWelcome('twostep');
  });

  it('sends a visitor without an e-mail step back to page 1', async () => {
    await page.goto(sites.url('twostep', '/login/password'));
    await expectAt('twostep', '/login');
  });
});

describe('totp', () => {
  it('after the password asks for the authenticator code; refuses a wrong one and accepts the current one', async () => {
    await page.goto(sites.url('totp', '/login'));
    await signIn(USERNAME, PASSWORD);
    await expectAt('totp', '/login/verify/totp');
    const code = page.getByLabel(/authenticator app/);
    expect(await code.getAttribute('autocomplete')).toBe('one-time-code');
    expect(await code.getAttribute('inputmode')).toBe('numeric');
    expect(sites.loginCount('totp')).toBe(0);
    await page.goto(sites.url('totp', '/account'));
    await expectAt('totp', '/login');
    await page.goBack();

    await page.getByLabel(/authenticator app/).fill(wrongTotpCode());
    await page.getByRole('button', { name: 'Verify' }).click();
    expect(await alertText()).toBe("That code didn't work. Check the code and try again.");
    await page.getByLabel(/authenticator app/).fill(currentTotpCode());
    await page.getByRole('button', { name: 'Verify' }).click();
    await expectWelcome('totp');
  });

  it('does not show the code page to someone who has not passed the password step', async () => {
    await page.goto(sites.url('totp', '/login/verify/totp'));
    await expectAt('totp', '/login');
  });
});

describe('choice', () => {
  async function reachChoice(): Promise<void> {
    await page.goto(sites.url('choice', '/login'));
    await signIn(USERNAME, PASSWORD);
    await expectAt('choice', '/login/verify');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe("How do you want to verify it's you?");
  }

  it('text message: a fresh code per attempt "sent to •••• 1234" logs in; a wrong or stale one does not', async () => {
    await reachChoice();
    const sms = page.getByRole('button', { name: /Text message/ });
    expect(await sms.textContent()).toContain('•••• 1234');
    await sms.click();
    await expectAt('choice', '/login/verify/sms');
    expect(await page.getByText('we sent to •••• 1234').count()).toBe(1);
    const first = sites.lastSmsCode('choice');
    expect(first).toMatch(/^\d{6}$/);

    await page.getByLabel('Verification code').fill(first === '000000' ? '000001' : '000000');
    await page.getByRole('button', { name: 'Verify' }).click();
    expect(await alertText()).toBe("That code didn't work. Check the code and try again.");

    // "Try another way", then text message again: a new code, and only it works.
    await page.getByRole('link', { name: 'Try another way' }).click();
    await page.getByRole('button', { name: /Text message/ }).click();
    await expectAt('choice', '/login/verify/sms');
    const second = sites.lastSmsCode('choice')!;
    if (second !== first) {
      await page.getByLabel('Verification code').fill(first!);
      await page.getByRole('button', { name: 'Verify' }).click();
      expect(await alertText()).toBe("That code didn't work. Check the code and try again.");
    }
    await page.getByLabel('Verification code').fill(second);
    await page.getByRole('button', { name: 'Verify' }).click();
    await expectWelcome('choice');
    expect(sites.loginCount('choice')).toBe(1);
  });

  it('authenticator app: leads to the TOTP page, whose code logs in', async () => {
    await reachChoice();
    const app = page.getByRole('button', { name: /Authenticator app/ });
    await app.click();
    await expectAt('choice', '/login/verify/totp');
    expect(await page.getByLabel(/authenticator app/).getAttribute('autocomplete')).toBe('one-time-code');
    await page.getByLabel(/authenticator app/).fill(currentTotpCode());
    await page.getByRole('button', { name: 'Verify' }).click();
    await expectWelcome('choice');
    expect(sites.lastSmsCode('choice')).toBeNull();
  });
});

describe('sso', () => {
  it('signs in through the identity provider; the second login skips its form; a replayed callback is refused', async () => {
    await page.goto(sites.url('sso', '/login'));
    expect(await page.locator('input:not([type=hidden])').count()).toBe(0);
    await page.getByRole('button', { name: 'Sign in with Acme ID' }).click();
    await page.waitForURL((url) => url.hostname === sites.idpHost && url.pathname === '/authorize');
    const authorize = new URL(page.url()).searchParams;
    expect(authorize.get('client_id')).toBe('sso-store');
    expect(authorize.get('redirect_uri')).toBe(sites.url('sso', '/sso/callback'));
    expect(authorize.get('state')).toBeTruthy();

    await signIn(USERNAME, 'wrong-password');
    expect(await alertText()).toBe('Incorrect username or password.');
    await signIn(USERNAME, PASSWORD);
    await expectWelcome('sso');
    expect([sites.loginCount('idp'), sites.loginCount('sso')]).toEqual([1, 1]);
    const cookieHosts = (await context.cookies()).filter((c) => c.name === 'sid').map((c) => c.domain).sort();
    expect(cookieHosts).toEqual(['idp.localhost', 'sso.localhost']);
    const callback = sites.requests('sso.localhost').find((r) => r.path.startsWith('/sso/callback?'))!;
    expect(new URLSearchParams(callback.path.split('?')[1]).get('state')).toBe(authorize.get('state'));

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.goto(sites.url('sso', callback.path));
    expect(await alertText()).toBe('Signing in with Acme ID failed. Please try again.');
    expect(sites.loginCount('sso')).toBe(1);

    await page.goto(sites.url('sso', '/login'));
    await page.getByRole('button', { name: 'Sign in with Acme ID' }).click();
    await expectWelcome('sso');
    expect([sites.loginCount('idp'), sites.loginCount('sso')]).toEqual([1, 2]);
    const idpRequests = sites.requests(sites.idpHost).map((r) => `${r.method} ${r.path.split('?')[0]}`);
    expect(idpRequests.filter((r) => r === 'POST /authorize')).toHaveLength(2); // the wrong and the right password
    expect(idpRequests.filter((r) => r === 'GET /authorize')).toHaveLength(2); // first and second login
  });

  it('the identity provider refuses an authorize request for an unregistered redirect_uri', async () => {
    const forged = new URL(sites.url('idp', '/authorize'));
    forged.searchParams.set('client_id', 'sso-store');
    forged.searchParams.set('redirect_uri', sites.url('tracker', '/steal'));
    forged.searchParams.set('state', 'x');
    const response = await page.goto(forged.toString());
    expect(response!.status()).toBe(400);
    expect(await alertText()).toBe('This sign-in request is not valid.');
  });
});

describe('redirect', () => {
  it('after login sends the browser to tracker.localhost, and the request log shows it', async () => {
    await page.goto(sites.url('redirect', '/login'));
    await signIn(USERNAME, PASSWORD);
    await page.waitForURL(sites.url('tracker', '/welcome'));
    expect(sites.requests(sites.trackerHost)).toContainEqual({ host: 'tracker.localhost', method: 'GET', path: '/welcome' });
    await page.goto(sites.url('redirect', '/account'));
    await expectWelcome('redirect');
  });

  it('a browser that refuses the tracker leaves no request there and is still logged in', async () => {
    // page.route never sees a redirect's next hop (Playwright by design); CDP Fetch does.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: `*://${sites.trackerHost}:*` }] });
    const blocked: string[] = [];
    cdp.on('Fetch.requestPaused', (event) => {
      blocked.push(event.request.url);
      void cdp.send('Fetch.failRequest', { requestId: event.requestId, errorReason: 'BlockedByClient' });
    });
    await page.goto(sites.url('redirect', '/login'));
    // The refused hop ends on Chromium's error page; wait for it to commit before navigating on.
    const refused = page.waitForEvent('framenavigated', (frame) => frame.url().startsWith('chrome-error://'));
    await signIn(USERNAME, PASSWORD);
    await refused;
    expect(blocked).toEqual([sites.url('tracker', '/welcome')]);
    expect(sites.requests(sites.trackerHost)).toEqual([]);
    expect(sites.loginCount('redirect')).toBe(1);
    await page.goto(sites.url('redirect', '/account'));
    await expectWelcome('redirect');
  });
});

describe('landing', () => {
  it('has no /login; the home page\'s "Log in" button-link leads to the /signin form', async () => {
    const missing = await page.goto(sites.url('landing', '/login'));
    expect(missing!.status()).toBe(404);
    await page.goto(sites.url('landing'));
    expect(await page.locator('form').count()).toBe(0);
    await page.getByRole('link', { name: 'Log in' }).click();
    await expectAt('landing', '/signin');
    await signIn(USERNAME, PASSWORD);
    await expectWelcome('landing');
  });
});

describe('session expiry', () => {
  it('expireSessions drops the server sessions of one host: its cookie then leads from /account to /login', async () => {
    for (const site of ['single', 'landing'] as const) {
      await page.goto(sites.url(site, site === 'single' ? '/login' : '/signin'));
      await signIn(USERNAME, PASSWORD);
      await expectWelcome(site);
    }
    sites.expireSessions('single');
    await page.goto(sites.url('single', '/account'));
    await expectAt('single', '/login');
    expect((await context.cookies()).filter((c) => c.name === 'sid')).toHaveLength(2);
    await page.goto(sites.url('landing', '/account'));
    await expectWelcome('landing');
  });

  it('sessionTtlMs ends a login once that long has passed since it completed', async () => {
    let now = 1_000_000;
    const expiring = await startLoginSites({ sessionTtlMs: 60_000, now: () => now });
    try {
      await page.goto(expiring.url('single', '/login'));
      await signIn(USERNAME, PASSWORD);
      await page.waitForURL(expiring.url('single', '/account'));
      now += 59_000;
      await page.reload();
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(`Welcome, ${USERNAME}`);
      now += 1_000;
      await page.reload();
      await page.waitForURL(expiring.url('single', '/login'));
    } finally {
      await expiring.close();
    }
  });
});

describe('the server', () => {
  it('routes by Host header: each site by its name, unknown hosts get 404', async () => {
    expect(await nodeGet('single.localhost', '/login')).toBe(200);
    expect(await nodeGet('landing.localhost', '/login')).toBe(404);
    expect(await nodeGet('nowhere.localhost', '/login')).toBe(404);
    expect(await nodeGet('127.0.0.1', '/')).toBe(404);
    expect(sites.requests('nowhere.localhost')).toEqual([{ host: 'nowhere.localhost', method: 'GET', path: '/login' }]);
  });

  it('refuses a malformed TOTP secret or a non-positive TTL at start', async () => {
    await expect(startLoginSites({ totpSecret: 'not base32!' })).rejects.toThrow(/Invalid character/);
    await expect(startLoginSites({ sessionTtlMs: 0 })).rejects.toThrow(/sessionTtlMs/);
  });
});
