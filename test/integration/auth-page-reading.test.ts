import { describe, expect, it } from 'vitest';
import { site, usePageModelBrowser, page$, empty, read } from './auth-page-model.fixtures.js';

/**
 * The login-page reader against real Chromium, on pages modelled on real sites' markup
 * (Google, GitHub, Microsoft, Okta, shops with honeypots, single-page apps). Each test
 * asserts the whole reading, then checks that every selector it returned matches
 * exactly one element as Playwright resolves it.
 */

usePageModelBrowser();

describe('readLoginPage', () => {
  it('reads a Google-style identifier step and ignores the aria-hidden password kept for autofill', async () => {
    const reading = await read(
      '/signin/identifier',
      page$(
        'Sign in – Google Accounts',
        `<div class="card"><h1 id="headingText">Sign in</h1><div>to continue to Gmail</div>
        <form id="identifier-form" novalidate>
          <input type="email" id="identifierId" name="identifier" autocomplete="username webauthn" aria-labelledby="id-label" required>
          <div id="id-label">Email or phone</div>
          <input type="password" name="hiddenPassword" aria-hidden="true" tabindex="-1" class="visually-hidden">
          <button type="button">Forgot email?</button>
          <div>Not your computer? Use Guest mode to sign in privately. <a href="/guest">Learn more about using Guest mode</a></div>
          <button type="button">Create account</button><button type="button" id="identifierNext"><span>Next</span></button>
        </form></div>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/signin/identifier`, 'Sign in – Google Accounts'),
      fields: [{ label: 'Email or phone', name: 'identifier', selector: '#identifierId', type: 'email', required: true }],
      submitSelector: '#identifierNext',
      isLoginStep: true,
    });
  });

  it('reads a GitHub-style form: username, password, the submit input and "Sign in with a passkey" as a sign-in option', async () => {
    const reading = await read(
      '/login',
      page$(
        'Sign in to GitHub · GitHub',
        `<main><div class="auth-form"><h1>Sign in to GitHub</h1>
        <form action="/session" method="post">
          <input type="hidden" name="authenticity_token" value="csrf-abc">
          <label for="login_field">Username or email address</label>
          <input type="text" name="login" id="login_field" autocapitalize="off" autocomplete="username" autofocus>
          <div><label for="password">Password</label><a href="/password_reset">Forgot password?</a></div>
          <input type="password" name="password" id="password" autocomplete="current-password">
          <input type="hidden" name="webauthn-support" value="supported">
          <input type="submit" name="commit" value="Sign in" class="btn btn-primary">
        </form>
        <div class="login-callout"><button type="button" class="btn-link">Sign in with a passkey</button></div>
        <p>New to GitHub? <a href="/signup">Create an account</a></p></div></main>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/login`, 'Sign in to GitHub · GitHub'),
      fields: [
        { label: 'Username or email address', name: 'login', selector: '#login_field', type: 'text' },
        { label: 'Password', name: 'password', selector: '#password', type: 'password' },
      ],
      submitSelector: 'input[name="commit"]',
      signInOptions: [{ id: 'sign-in-with-a-passkey', label: 'Sign in with a passkey', description: null, selector: 'html > body > main > div > div > button' }],
      isLoginStep: true,
    });
  });

  it('reads a Microsoft-style "Verify your identity" page: one MFA option per tile, with masked targets', async () => {
    const tile = (value: string, text: string) =>
      `<div role="listitem"><div class="tile" role="button" tabindex="0" data-value="${value}"><img src="data:," alt=""><div class="content">${text}</div></div></div>`;
    const reading = await read(
      '/common/login',
      page$(
        'Sign in to your account',
        `<div id="lightbox"><div class="identity">alice@contoso.com</div>
        <div role="heading" aria-level="1">Verify your identity</div>
        <div class="tiles" role="list">
          ${tile('OneWaySMS', '<div>Text +XX XXXXXXXX34</div>')}
          ${tile('TwoWayVoiceMobile', '<div>Call +XX XXXXXXXX34</div>')}
          ${tile('PhoneAppOTP', '<div>Use a verification code</div>')}
          ${tile('PhoneAppNotification', '<div>Approve a request on my Microsoft Authenticator app</div>')}
          ${tile('Email', '<div>Email a•••@example.com</div><div class="small">We will send a code to this address</div>')}
        </div>
        <div><a href="#" id="cantUse">I can't use my Microsoft Authenticator app right now</a></div>
        <div><a href="/more">More information</a></div><div><a id="cancelLink" href="#">Cancel</a></div></div>`,
        '.tile { padding: 8px; border: 1px solid #ccc; margin: 4px; }',
      ),
    );
    const tileSelector = (n: number) => `#lightbox > div:nth-of-type(3) > div:nth-of-type(${n}) > div`;
    expect(reading).toEqual({
      ...empty(`${site.url}/common/login`, 'Sign in to your account'),
      mfaOptions: [
        { label: 'Text +XX XXXXXXXX34', type: 'sms', description: null, target: '+XX XXXXXXXX34', selector: tileSelector(1) },
        { label: 'Call +XX XXXXXXXX34', type: 'call', description: null, target: '+XX XXXXXXXX34', selector: tileSelector(2) },
        { label: 'Use a verification code', type: 'totp', description: null, target: null, selector: tileSelector(3) },
        { label: 'Approve a request on my Microsoft Authenticator app', type: 'push', description: null, target: null, selector: tileSelector(4) },
        { label: 'Email a•••@example.com', type: 'email', description: 'We will send a code to this address', target: 'a•••@example.com', selector: tileSelector(5) },
        { label: "I can't use my Microsoft Authenticator app right now", type: 'switch', description: null, target: null, selector: '#cantUse' },
      ],
      isLoginStep: true,
    });
  });

  it('reads an Okta-style TOTP page: the code is a totp field and "Verify with something else" a switch', async () => {
    const reading = await read(
      '/signin/verify/google/token:software:totp',
      page$(
        'Acme - Sign In',
        `<main class="okta-sign-in"><form class="o-form" action="/idp/idx/challenge/answer" method="post">
          <div class="okta-form-title"><h2>Verify with Google Authenticator</h2></div>
          <div class="okta-form-subtitle">Enter the temporary code generated in your Google Authenticator app</div>
          <div class="o-form-fieldset"><label for="input58">Enter code</label>
            <input type="text" name="credentials.passcode" id="input58" autocomplete="off" aria-describedby="code-hint">
            <p id="code-hint">Codes refresh every 30 seconds</p></div>
          <input class="button button-primary" type="submit" value="Verify">
        </form>
        <div class="auth-footer"><a href="/select-authenticator">Verify with something else</a> <a href="/login">Back to sign in</a></div></main>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/signin/verify/google/token:software:totp`, 'Acme - Sign In'),
      fields: [
        { label: 'Enter code', name: 'credentials.passcode', selector: '#input58', type: 'totp', linked_mfa_type: 'totp', hint: 'Codes refresh every 30 seconds' },
      ],
      submitSelector: 'html > body > main > form > input',
      mfaOptions: [{ label: 'Verify with something else', type: 'switch', description: null, target: null, selector: 'a[href="/select-authenticator"]' }],
      isLoginStep: true,
    });
  });

  it('reads a radio choice between text message, authenticator app and a call, with the Continue button as submit', async () => {
    const reading = await read(
      '/ap/mfa',
      page$(
        'Two-Step Verification',
        `<h1>Two-Step Verification</h1><form action="/ap/mfa/choose" method="post"><p>Choose how you want to receive your code</p>
        <label><input type="radio" name="method" value="sms" checked> Text me at •••-•••-1234</label>
        <label><input type="radio" name="method" value="totp"> Use my authenticator app</label>
        <label><input type="radio" name="method" value="voice"> Call me at •••-•••-1234</label>
        <button type="submit">Continue</button></form>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/ap/mfa`, 'Two-Step Verification'),
      submitSelector: 'html > body > form > button',
      mfaOptions: [
        { label: 'Text me at •••-•••-1234', type: 'sms', description: null, target: '•••-•••-1234', selector: 'input[name="method"][value="sms"]' },
        { label: 'Use my authenticator app', type: 'totp', description: null, target: null, selector: 'input[name="method"][value="totp"]' },
        { label: 'Call me at •••-•••-1234', type: 'call', description: null, target: '•••-•••-1234', selector: 'input[name="method"][value="voice"]' },
      ],
      isLoginStep: true,
    });
  });

  it('reads an e-mailed code as a code field linked to email', async () => {
    const reading = await read(
      '/verify-email',
      page$(
        'Check your inbox',
        `<main><h1>Check your inbox</h1><p>We sent a 6-digit code to a•••@example.com.</p>
        <form method="post" action="/verify-email"><input name="code" inputmode="numeric" maxlength="6" aria-label="6-digit code" autocomplete="one-time-code">
        <button>Verify</button></form><a href="/resend">Resend code</a></main>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/verify-email`, 'Check your inbox'),
      fields: [{ label: '6-digit code', name: 'code', selector: 'input[name="code"]', type: 'code', linked_mfa_type: 'email' }],
      submitSelector: 'html > body > main > form > button',
      isLoginStep: true,
    });
  });

  it('skips honeypots (off-screen, display:none, transparent), hidden CSRF inputs and the remember-me checkbox', async () => {
    const reading = await read(
      '/account/login',
      page$(
        'Log in | Shop',
        `<h1>Log in to your account</h1><form id="login" action="/account/login" method="post">
          <input type="hidden" name="csrf_token" value="x">
          <div style="position:absolute; left:-10000px; top:auto"><label for="website">Website</label><input type="text" id="website" name="website" tabindex="-1" autocomplete="off"></div>
          <input type="text" name="fax_number" style="display:none">
          <input type="email" name="contact_me" style="opacity:0; position:absolute; top:0">
          <input type="text" name="nickname" style="visibility:hidden">
          <label>Email <input type="email" name="email" required></label>
          <label>Password * <input type="password" name="password" required minlength="8"></label>
          <label><input type="checkbox" name="remember"> Remember me</label>
          <button>Log in</button></form>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/account/login`, 'Log in | Shop'),
      fields: [
        { label: 'Email', name: 'email', selector: 'input[name="email"]', type: 'email', required: true },
        { label: 'Password', name: 'password', selector: 'input[name="password"]', type: 'password', required: true },
      ],
      submitSelector: '#login > button',
      isLoginStep: true,
    });
  });

  it('skips a read-only e-mail and labels the password from aria-labelledby, with its aria-describedby hint', async () => {
    const reading = await read(
      '/password',
      page$(
        'Enter your password',
        `<h1>Enter your password</h1><form action="/session" method="post">
          <input type="email" name="username" value="alice@example.com" readonly aria-label="Email">
          <span id="pw-label">Password</span> <span id="pw-help">At least 12 characters</span>
          <input type="password" id="current-password" name="pwd" aria-labelledby="pw-label" aria-describedby="pw-help">
          <button type="submit" id="signin">Sign in</button></form>
        <a href="/login?switch=1">Use a different account</a>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/password`, 'Enter your password'),
      fields: [{ label: 'Password', name: 'pwd', selector: '#current-password', type: 'password', hint: 'At least 12 characters' }],
      submitSelector: '#signin',
      isLoginStep: true,
    });
  });

  it('gives a structural selector when another input (a hidden mobile copy of the form) has the same name', async () => {
    const form = `<form action="/session" method="post"><h2>Sign in</h2><input type="email" name="email" placeholder="Email">
      <input type="password" name="password" placeholder="Password"><button>Sign in</button></form>`;
    const reading = await read('/m', page$('Sign in', `<div class="mobile" style="display:none">${form}</div><div class="desktop">${form}</div>`));
    expect(reading).toEqual({
      ...empty(`${site.url}/m`, 'Sign in'),
      fields: [
        { label: 'Email', name: 'email', selector: 'html > body > div:nth-of-type(2) > form > input:nth-of-type(1)', type: 'email', placeholder: 'Email' },
        { label: 'Password', name: 'password', selector: 'html > body > div:nth-of-type(2) > form > input:nth-of-type(2)', type: 'password', placeholder: 'Password' },
      ],
      submitSelector: 'html > body > div:nth-of-type(2) > form > button',
      isLoginStep: true,
    });
  });

  it('reads only the first of two visible login forms whose inputs share names, with selectors that tell them apart', async () => {
    const form = (heading: string) => `<form action="/session" method="post"><h2>${heading}</h2>
      <label>Username <input name="user"></label><label>Password <input type="password" name="pass"></label><button>Log in</button></form>`;
    const reading = await read(
      '/bank',
      page$('Acme Bank', `<header>${form('Quick login')}</header><main><h1>Online banking</h1>${form('Sign in to online banking')}</main>`),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/bank`, 'Acme Bank'),
      fields: [
        { label: 'Username', name: 'user', selector: 'html > body > header > form > label:nth-of-type(1) > input', type: 'text' },
        { label: 'Password', name: 'pass', selector: 'html > body > header > form > label:nth-of-type(2) > input', type: 'password' },
      ],
      submitSelector: 'html > body > header > form > button',
      isLoginStep: true,
    });
  });

  it('reads SSO buttons by text and by identity-provider link, and the other sign-in options', async () => {
    const reading = await read(
      '/login',
      page$(
        'Log in | Acme',
        `<main><h1>Log in</h1><div class="sso">
          <a href="https://accounts.google.com/o/oauth2/v2/auth?client_id=1"><img alt="" src="data:,">Continue with Google</a>
          <button type="button" id="apple-btn">Continue with Apple</button>
          <a href="https://login.microsoftonline.com/common/oauth2/v2.0/authorize?client_id=2">Sign in with Microsoft</a>
          <button type="button" aria-label="Sign in with Acme ID"><svg width="20" height="20"><circle cx="10" cy="10" r="8"/></svg></button>
          <a href="https://acme.okta.com/oauth2/v1/authorize?client_id=3">Company account</a></div>
        <form action="/login/email" method="post"><label for="email">Email</label><input id="email" type="email" name="email" autocomplete="email">
          <button type="submit">Continue with email</button></form>
        <button type="button">Log in with SSO</button> <a href="/passkey">Use a passkey</a> <a href="/magic">Email me a sign-in link</a>
        <footer><a href="https://www.facebook.com/acme">Facebook</a> <a href="https://github.com/acme">GitHub</a></footer></main>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/login`, 'Log in | Acme'),
      fields: [{ label: 'Email', name: 'email', selector: '#email', type: 'email' }],
      submitSelector: 'html > body > main > form > button',
      ssoButtons: [
        { label: 'Continue with Google', provider: 'google', selector: '//a[normalize-space(.)="Continue with Google"]' },
        { label: 'Continue with Apple', provider: 'apple', selector: '//*[@id="apple-btn"]' },
        { label: 'Sign in with Microsoft', provider: 'microsoft', selector: '//a[normalize-space(.)="Sign in with Microsoft"]' },
        { label: 'Sign in with Acme ID', provider: 'acme-id', selector: '//button[@aria-label="Sign in with Acme ID"]' },
        { label: 'Company account', provider: 'okta', selector: '//a[normalize-space(.)="Company account"]' },
      ],
      signInOptions: [
        { id: 'log-in-with-sso', label: 'Log in with SSO', description: null, selector: 'html > body > main > button' },
        { id: 'use-a-passkey', label: 'Use a passkey', description: null, selector: 'a[href="/passkey"]' },
        { id: 'email-me-a-sign-in-link', label: 'Email me a sign-in link', description: null, selector: 'a[href="/magic"]' },
      ],
      isLoginStep: true,
    });
  });

  it('reads the error the site shows, but not field hints or a cookie banner', async () => {
    const reading = await read(
      '/session',
      page$(
        'Sign in',
        `<main><h1>Sign in</h1>
        <div class="flash flash-error" role="alert"><button class="close" aria-label="Dismiss">×</button> Incorrect username or password. </div>
        <form action="/session" method="post">
          <label for="u">Username</label><input id="u" name="username" value="alice" aria-describedby="u-hint"><small id="u-hint">Your username, not your e-mail</small>
          <label for="p">Password</label><input id="p" type="password" name="password" aria-invalid="true" aria-describedby="p-err">
          <div id="p-err" class="field-error">Check your password</div><div aria-live="polite"></div>
          <button type="submit">Sign in</button></form></main>
        <div class="cookie-alert">We use cookies to keep you signed in.</div>`,
      ),
    );
    expect(reading).toEqual({
      ...empty(`${site.url}/session`, 'Sign in'),
      fields: [
        { label: 'Username', name: 'username', selector: '#u', type: 'text', hint: 'Your username, not your e-mail' },
        { label: 'Password', name: 'password', selector: '#p', type: 'password', hint: 'Check your password' },
      ],
      submitSelector: 'html > body > main > form > button',
      errorText: 'Incorrect username or password. Check your password',
      isLoginStep: true,
    });
  });

  it('sees a logged-in dashboard: a Sign out in the closed account menu, no fields for the search or invite boxes', async () => {
    const reading = await read(
      '/dashboard',
      page$(
        'Dashboard · Acme',
        `<header><form role="search" action="/search"><input type="text" name="q" placeholder="Search or jump to…" aria-label="Search"></form>
        <nav><a href="/settings">Settings</a><button aria-label="Open user menu" aria-expanded="false">A</button>
        <div class="menu" hidden><a href="/logout">Sign out</a></div></nav></header>
        <main><h1>Welcome back, Alice</h1><form><label for="invite">Invite a teammate</label><input id="invite" type="email" name="invite_email">
        <button>Send invite</button></form></main>`,
      ),
    );
    expect(reading).toEqual({ ...empty(`${site.url}/dashboard`, 'Dashboard · Acme'), loggedInHints: true });
  });

  it('finds the "Log in" link on a landing page, ignoring its newsletter box and social links', async () => {
    const reading = await read(
      '/',
      page$(
        'Acme — Project management for teams',
        `<header><a href="/">Acme</a><nav><a href="/pricing">Pricing</a> <a href="/login">Log in</a> <a href="/signup">Get started</a></nav></header>
        <main><h1>Plan, track, ship.</h1><form class="newsletter"><input type="email" name="email" placeholder="Work email"><button>Get started</button></form></main>
        <footer><a href="https://www.facebook.com/acme">Facebook</a> <a href="https://github.com/acme">GitHub</a></footer>`,
      ),
    );
    expect(reading).toEqual({ ...empty(`${site.url}/`, 'Acme — Project management for teams'), signInLinkSelector: 'a[href="/login"]' });
  });
});
