import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { clickAndSettle, clickTarget, fillField, readLoginPage, submitStep, waitForSettled } from '../../api/src/modules/auth-connections/engine/page-model.js';
import type { LoginPageReading } from '../../api/src/modules/auth-connections/engine/page-types.js';
import { Secret, TOTP } from 'otpauth';
import { EMAIL, PASSWORD, TOTP_SECRET, USERNAME, startLoginSites, type LoginShape, type LoginSites } from '../fixtures/login-sites/server.js';
import { page, usePageModelBrowser, empty, expectSelectorsMatchOne } from './auth-page-model.fixtures.js';

/** The login-sites fixture's shapes, read and driven through the page model in real Chromium. */

usePageModelBrowser();

describe('the login-sites fixture, read and driven through the page model', () => {
  let sites: LoginSites;
  beforeEach(async () => {
    sites = await startLoginSites();
  });
  afterEach(async () => {
    await sites?.close();
  });
  const title = (page: string, site: string) => `${page} · ${site}`;
  const usernamePassword = [
    { label: 'Username', name: 'username', selector: '#username', type: 'text', required: true },
    { label: 'Password', name: 'password', selector: '#password', type: 'password', required: true },
  ];
  const formButton = 'html > body > main > form > button';

  async function readHere(): Promise<LoginPageReading> {
    const reading = await readLoginPage(page);
    await expectSelectorsMatchOne(page, reading);
    return reading;
  }
  async function signInWithPassword(reading: LoginPageReading): Promise<void> {
    await fillField(page, '#username', USERNAME);
    await fillField(page, '#password', PASSWORD);
    expect((await submitStep(page, reading)).settled).toBe(true);
  }
  async function expectAccountPage(site: LoginShape, siteTitle: string): Promise<void> {
    expect(await readHere()).toEqual({ ...empty(sites.url(site, '/account'), title('Your account', siteTitle)), loggedInHints: true });
  }

  it('single: username and password on one page', async () => {
    await page.goto(sites.url('single', '/login'));
    const login = await readHere();
    expect(login).toEqual({
      ...empty(sites.url('single', '/login'), title('Sign in', 'Single Store')),
      fields: usernamePassword,
      submitSelector: formButton,
      isLoginStep: true,
    });
    await signInWithPassword(login);
    await expectAccountPage('single', 'Single Store');
  });

  it('landing: no login step on the home page, only its "Log in" button to follow', async () => {
    await page.goto(sites.url('landing', '/'));
    const home = await readHere();
    expect(home).toEqual({ ...empty(sites.url('landing', '/'), title('Home', 'Landing Outfitters')), signInLinkSelector: 'a[href="/signin"]' });
    await clickTarget(page, home.signInLinkSelector!);
    await waitForSettled(page);
    const login = await readHere();
    expect(login).toMatchObject({ url: sites.url('landing', '/signin'), fields: usernamePassword, isLoginStep: true });
    await signInWithPassword(login);
    await expectAccountPage('landing', 'Landing Outfitters');
  });

  it('twostep: the e-mail first, then the password with the e-mail shown read-only', async () => {
    await page.goto(sites.url('twostep', '/login'));
    const identify = await readHere();
    expect(identify).toEqual({
      ...empty(sites.url('twostep', '/login'), title('Sign in', 'Twostep Bank')),
      fields: [{ label: 'Email address', name: 'email', selector: '#email', type: 'email', required: true }],
      submitSelector: formButton,
      isLoginStep: true,
    });
    await fillField(page, '#email', EMAIL);
    expect(await submitStep(page, identify)).toEqual({ settled: true, url: sites.url('twostep', '/login/password') });
    const password = await readHere();
    expect(password).toEqual({
      ...empty(sites.url('twostep', '/login/password'), title('Enter your password', 'Twostep Bank')),
      fields: [{ label: 'Password', name: 'password', selector: '#password', type: 'password', required: true }],
      submitSelector: formButton,
      isLoginStep: true,
    });
    await fillField(page, '#password', 'not-the-password');
    await submitStep(page, password);
    expect(await readHere()).toMatchObject({ errorText: 'Incorrect password. Try again.', isLoginStep: true });
    await fillField(page, '#password', PASSWORD);
    await submitStep(page, password);
    await expectAccountPage('twostep', 'Twostep Bank');
  });

  it('totp: password, then an authenticator code', async () => {
    await page.goto(sites.url('totp', '/login'));
    await signInWithPassword(await readHere());
    const code = await readHere();
    expect(code).toEqual({
      ...empty(sites.url('totp', '/login/verify/totp'), title('Two-step verification', 'Totp Cloud')),
      fields: [{ label: '6-digit code from your authenticator app', name: 'code', selector: '#code', type: 'totp', linked_mfa_type: 'totp', required: true }],
      submitSelector: formButton,
      isLoginStep: true,
    });
    await fillField(page, '#code', new TOTP({ secret: Secret.fromBase32(TOTP_SECRET), digits: 6, period: 30 }).generate());
    await submitStep(page, code);
    await expectAccountPage('totp', 'Totp Cloud');
  });

  it('choice: password, a choice between SMS and the authenticator app, then the texted code', async () => {
    await page.goto(sites.url('choice', '/login'));
    await signInWithPassword(await readHere());
    const choose = await readHere();
    expect(choose).toEqual({
      ...empty(sites.url('choice', '/login/verify'), title('Verify it’s you', 'Choice Health')),
      mfaOptions: [
        { label: 'Text message', type: 'sms', description: 'Get a code at •••• 1234', target: '•••• 1234', selector: 'button[name="method"][value="sms"]' },
        { label: 'Authenticator app', type: 'totp', description: 'Use the code from your authenticator app', target: null, selector: 'button[name="method"][value="totp"]' },
      ],
      isLoginStep: true,
    });
    expect(await clickAndSettle(page, choose.mfaOptions[0]!.selector)).toEqual({ settled: true, url: sites.url('choice', '/login/verify/sms') });
    const sms = await readHere();
    expect(sms).toEqual({
      ...empty(sites.url('choice', '/login/verify/sms'), title('Check your phone', 'Choice Health')),
      fields: [{ label: 'Verification code', name: 'code', selector: '#code', type: 'code', linked_mfa_type: 'sms', required: true }],
      submitSelector: formButton,
      mfaOptions: [{ label: 'Try another way', type: 'switch', description: null, target: null, selector: 'a[href="/login/verify"]' }],
      isLoginStep: true,
    });
    await fillField(page, '#code', sites.lastSmsCode('choice')!);
    await submitStep(page, sms);
    await expectAccountPage('choice', 'Choice Health');
  });

  it('sso: a "Sign in with Acme ID" button, the identity provider\'s form, and back', async () => {
    await page.goto(sites.url('sso', '/login'));
    const login = await readHere();
    expect(login).toEqual({
      ...empty(sites.url('sso', '/login'), title('Sign in', 'Sso Store')),
      ssoButtons: [{ label: 'Sign in with Acme ID', provider: 'acme-id', selector: '//button[normalize-space(.)="Sign in with Acme ID"]' }],
      isLoginStep: true,
    });
    await clickTarget(page, login.ssoButtons[0]!.selector);
    await waitForSettled(page);
    const idp = await readHere();
    expect(idp).toMatchObject({ title: title('Sign in', 'Acme ID'), fields: usernamePassword, submitSelector: formButton, isLoginStep: true });
    expect(new URL(idp.url).host).toBe(`${sites.idpHost}:${sites.port}`);
    await signInWithPassword(idp);
    await expectAccountPage('sso', 'Sso Store');
  });

  it('redirect: the login page reads like single, and the off-site landing page is neither login nor logged in', async () => {
    await page.goto(sites.url('redirect', '/login'));
    const login = await readHere();
    expect(login).toMatchObject({ fields: usernamePassword, submitSelector: formButton, isLoginStep: true });
    await signInWithPassword(login);
    expect(await readHere()).toEqual(empty(sites.url('tracker', '/welcome'), title('Welcome', 'Tracker Ads')));
  });
});
