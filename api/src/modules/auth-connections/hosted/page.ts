/**
 * The hosted login page (hosted_url) and its own script and style, inlined here so the
 * build copies nothing but compiled TypeScript. The page is opened as
 * /auth/hosted/{flow_id}#code=… and everything it loads or calls is relative to that
 * address, so it also works behind a reverse proxy that mounts the service under a prefix.
 *
 * Every label, error and choice it shows was read from a third-party website, so the
 * script builds the DOM with createElement and textContent only; the CSP backs that up
 * with Trusted Types, under which an innerHTML assignment would throw instead of parsing.
 * `body[data-state]` (loading, working, input, external, success, failed, ended, denied,
 * offline) is there for embedding pages and tests. After the site refused an answer (a
 * wrong password) the flow asks again: the page says so, keeps the username, and its
 * button reads "Try again" (`body[data-retry="true"]`).
 */

import { HOSTED_CSS } from './page-style.js';

const escapeAttribute = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function hostedPageHtml(flowId: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Sign in</title>
<link rel="stylesheet" href="../hosted-assets/hosted.css">
<script type="module" src="../hosted-assets/hosted.js"></script>
</head>
<body data-state="loading" data-flow-id="${escapeAttribute(flowId)}">
<main>
<h1 id="title">Sign in</h1>
<p id="status" role="status" aria-live="polite">Loading…</p>
<div id="step"></div>
<div id="browser" hidden>
<button type="button" id="browser-toggle" aria-expanded="false" aria-controls="browser-frame">Show the browser</button>
<div id="browser-frame" hidden></div>
</div>
</main>
</body>
</html>
`;
}

// Plain browser JS. No template literals: this file is itself one.
const HOSTED_SCRIPT = `const body = document.body;
const flowId = body.dataset.flowId;
const title = document.getElementById('title');
const status = document.getElementById('status');
const step = document.getElementById('step');
const browserBox = document.getElementById('browser');
const browserToggle = document.getElementById('browser-toggle');
const browserFrame = document.getElementById('browser-frame');

const LINK_GONE = 'This login link has expired or was already used. Ask for a new one.';
const GROUPS = ['mfa_method', 'sso_provider', 'sign_in_method'];
const groupHeading = (type, hasFields) =>
  type === 'mfa_method' ? 'Choose how to verify it’s you' : type === 'sso_provider' ? (hasFields ? 'Or sign in with' : 'Sign in with') : 'Other ways to sign in';

let current = null;      // the last page state
let domain = null;       // the site, from /session and /state (events leave it out)
let renderedKey = '';    // what #step shows, so a repeated state keeps what was typed
let events = null;       // the EventSource while following
let retryMs = 1000;
let showBrowser = null;  // the person's own choice; null follows the step
let answered = null;     // after an accepted answer: what was typed in plain fields (never a password or code)

// /prefix/auth/hosted/{id} -> /prefix/auth/hosted/{id}/{path}
const api = (path) => new URL(encodeURIComponent(flowId) + '/' + path, location.href).href;

async function call(path, init) {
  const response = await fetch(api(path), { cache: 'no-store', credentials: 'same-origin', ...init });
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    payload = null;
  }
  return { status: response.status, body: payload };
}
const post = (path, data) => call(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(data) });

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === false || value === null || value === undefined) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const site = () => domain || 'the site';

function show(state, heading, message) {
  body.dataset.state = state;
  title.textContent = heading;
  status.textContent = message || '';
}

function replaceStep(key, ...nodes) {
  renderedKey = key;
  step.replaceChildren(...nodes);
}

// ---- rendering -------------------------------------------------------------------

function render(state) {
  current = state;
  if (state.domain) domain = state.domain;
  document.title = 'Sign in to ' + site();
  const key = JSON.stringify([state.flow_status, state.flow_step, state.fields, state.choices, state.website_error, state.error_message]);
  if (state.flow_status === 'SUCCESS') {
    show('success', 'Signed in', 'You are signed in to ' + site() + '. You can close this page.');
    replaceStep(key);
  } else if (state.flow_status === 'FAILED') {
    show('failed', 'Sign-in failed', state.error_message || 'The sign-in did not succeed.');
    replaceStep(key, state.website_error ? el('div', { class: 'alert', role: 'alert' }, 'The site said: ' + state.website_error) : null);
  } else if (state.flow_status === 'EXPIRED') {
    show('ended', 'Sign-in expired', 'This sign-in expired before it was finished. Ask for a new link.');
    replaceStep(key);
  } else if (state.flow_status === 'CANCELED') {
    show('ended', 'Sign-in canceled', 'This sign-in was canceled. Ask for a new link if you still need to sign in.');
    replaceStep(key);
  } else if (state.flow_step === 'AWAITING_INPUT') {
    if (key !== renderedKey) renderInput(state, key);
  } else if (state.flow_step === 'AWAITING_EXTERNAL_ACTION') {
    show('external', 'Sign in to ' + site(), state.external_action_message || 'Finish this step in the browser below.');
    replaceStep(key);
  } else {
    const message = state.flow_step === 'SUBMITTING' ? 'Signing in…' : 'Opening the sign-in page of ' + site() + '…';
    show('working', 'Sign in to ' + site(), message);
    replaceStep(key);
  }
  renderBrowser(state);
}

const INPUTS = {
  identifier: { type: 'text', autocomplete: 'username', label: 'Username or email' },
  password: { type: 'password', autocomplete: 'current-password', label: 'Password' },
  code: { type: 'text', autocomplete: 'one-time-code', inputmode: 'numeric', label: 'Verification code' },
  totp_code: { type: 'text', autocomplete: 'one-time-code', inputmode: 'numeric', label: 'Code from your authenticator app' },
  text: { type: 'text', autocomplete: 'off', label: 'Answer' },
};

const SECRET_TYPES = ['password', 'code', 'totp_code'];

function renderInput(state, key) {
  // The site refused what was sent (a wrong password): the same flow asks again.
  const retry = answered !== null && Boolean(state.website_error);
  body.dataset.retry = String(retry);
  if (retry) show('input', 'Try again', 'The site did not accept that. Check what you entered and try again.');
  else show('input', 'Sign in to ' + site(), '');
  const fields = state.fields || [];
  const choices = state.choices || [];
  const form = el('form', { novalidate: true });
  form.append(el('div', { class: 'alert', role: 'alert', id: 'site-error' }, state.website_error || ''));
  const inputs = fields.map((field, n) => {
    const kind = INPUTS[field.type] || INPUTS.text;
    const id = 'field-' + n;
    const input = el('input', {
      id,
      name: id,
      type: kind.type,
      autocomplete: kind.autocomplete,
      inputmode: kind.inputmode,
      autocapitalize: 'off',
      spellcheck: 'false',
      'aria-required': field.required === false ? null : 'true',
      'aria-describedby': id + '-error',
    });
    if (retry && !SECRET_TYPES.includes(field.type) && answered[field.id]) input.value = answered[field.id];
    const error = el('p', { class: 'field-error', id: id + '-error' });
    form.append(el('div', { class: 'field' }, el('label', { for: id }, field.label || kind.label), input, error));
    return { field, input, error };
  });
  const formError = el('p', { class: 'field-error', id: 'form-error', 'aria-live': 'assertive' });
  form.append(formError);
  if (inputs.length > 0) form.append(el('button', { type: 'submit', class: 'primary' }, retry ? 'Try again' : 'Continue'));
  for (const type of GROUPS) {
    // Kinds the page has no words for (account, other…) go with the sign-in options.
    const group = choices.filter((choice) => choice.type === type || (type === 'sign_in_method' && !GROUPS.includes(choice.type)));
    if (group.length === 0) continue;
    form.append(el('h2', {}, groupHeading(type, inputs.length > 0)));
    for (const choice of group) {
      const button = el('button', { type: 'button', class: 'choice' }, choice.label, choice.description ? el('span', {}, choice.description) : null);
      button.addEventListener('click', () => submit(form, { selected_choice_id: choice.id }, inputs, formError));
      form.append(button);
    }
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const values = {};
    for (const { field, input } of inputs) if (input.value !== '') values[field.id] = input.value;
    submit(form, { field_values: values }, inputs, formError);
  });
  replaceStep(key, form);
  const first = [...form.querySelectorAll('input')].find((input) => input.value === '') || form.querySelector('input, button');
  if (first) first.focus();
}

function setBusy(form, busy) {
  for (const control of form.querySelectorAll('input, button')) control.disabled = busy;
}

/** Posts an answer; the page then follows the step the flow moves to. */
async function submit(form, answer, inputs, formError) {
  if (form.dataset.busy) return;
  form.dataset.busy = '1';
  setBusy(form, true);
  formError.textContent = '';
  for (const { input, error } of inputs) {
    error.textContent = '';
    input.removeAttribute('aria-invalid');
  }
  status.textContent = 'Sending…';
  let result;
  try {
    result = await post('submit', answer);
  } catch {
    result = { status: 0, body: null };
  }
  const stillShown = step.contains(form);
  delete form.dataset.busy;
  if (result.status === 200 && result.body && result.body.accepted) {
    answered = {};
    for (const { field, input } of inputs) if (!SECRET_TYPES.includes(field.type)) answered[field.id] = input.value;
    if (stillShown) status.textContent = 'Signing in…';
    return; // stays disabled until the flow's next step arrives
  }
  if (!stillShown) return;
  setBusy(form, false);
  status.textContent = '';
  if (result.status === 400 && result.body) {
    const left = [];
    for (const detail of result.body.details || []) {
      const match = inputs.find((i) => detail.field === 'body.field_values.' + i.field.id);
      if (match) {
        match.error.textContent = detail.message;
        match.input.setAttribute('aria-invalid', 'true');
      } else left.push(detail.message);
    }
    formError.textContent = [result.body.message, ...left].join(': ');
    const invalid = form.querySelector('[aria-invalid="true"]');
    if (invalid) invalid.focus();
  } else if (result.status === 401) {
    denied();
  } else if (result.status === 200 || result.status === 409) {
    formError.textContent = 'The sign-in page changed before your answer arrived. Check this page and try again.';
    refresh();
  } else {
    formError.textContent = 'Your answer could not be sent. Check your connection and try again.';
  }
}

function renderBrowser(state) {
  const url = state.live_view_url;
  const usable = typeof url === 'string' && /^https?:/.test(url) && state.flow_status === 'IN_PROGRESS';
  browserBox.hidden = !usable;
  const visible = usable && (showBrowser !== null ? showBrowser : state.flow_step === 'AWAITING_EXTERNAL_ACTION');
  browserToggle.textContent = visible ? 'Hide the browser' : 'Show the browser';
  browserToggle.setAttribute('aria-expanded', String(visible));
  browserFrame.hidden = !visible;
  const frame = browserFrame.querySelector('iframe');
  if (!visible) {
    if (frame) frame.remove();
    return;
  }
  // A fresh token each state: reload the view only when it shows another browser.
  if (frame && new URL(frame.src).pathname === new URL(url).pathname) return;
  browserFrame.replaceChildren(el('iframe', { src: url, title: 'The browser signing in to ' + site() }));
}

browserToggle.addEventListener('click', () => {
  showBrowser = browserToggle.getAttribute('aria-expanded') !== 'true';
  if (current) renderBrowser(current);
});

// ---- session and live updates ------------------------------------------------------

function denied() {
  if (events) events.close();
  events = null;
  show('denied', 'Link not valid', LINK_GONE);
  replaceStep('denied');
  browserBox.hidden = true;
}

const finished = (state) => state.flow_status !== 'IN_PROGRESS';

/** Reads the state once; true while the flow is still running. */
async function refresh() {
  let result;
  try {
    result = await call('state');
  } catch {
    show('offline', title.textContent, 'The connection to the service was lost. Retrying…');
    return true;
  }
  if (result.status === 401 || result.status === 403) {
    denied();
    return false;
  }
  if (result.status !== 200 || !result.body) {
    status.textContent = 'The sign-in state could not be read. Retrying…';
    return true;
  }
  render(result.body);
  return !finished(result.body);
}

function follow() {
  const source = new EventSource(api('events'));
  events = source;
  source.addEventListener('managed_auth_state', (event) => {
    retryMs = 1000;
    render(JSON.parse(event.data));
  });
  // Fires for the stream ending or breaking, and for the server's own 'error' frames.
  source.addEventListener('error', async () => {
    source.close();
    if (events !== source) return;
    events = null;
    if (current && finished(current)) return;
    const running = await refresh();
    if (!running) return;
    setTimeout(follow, retryMs);
    retryMs = Math.min(retryMs * 2, 15000);
  });
}

async function start() {
  const code = new URLSearchParams(location.hash.slice(1)).get('code');
  let result;
  try {
    if (code) {
      result = await post('session', { code });
      // Answered: the code is spent either way, so it leaves the address bar and history.
      history.replaceState(null, '', location.pathname + location.search);
      // Opened again in the browser that already holds this page's session: carry on.
      if (result.status === 403) result = await call('state');
    } else {
      result = await call('state');
    }
  } catch {
    show('offline', 'Sign in', 'The service could not be reached. Check your connection and reload this page.');
    return;
  }
  if (result.status === 401 || result.status === 403) return denied();
  if (result.status !== 200 || !result.body) {
    show('offline', 'Sign in', 'The sign-in could not be loaded (' + result.status + '). Reload this page to try again.');
    return;
  }
  render(result.body);
  if (!finished(result.body)) follow();
}

start();
`;

export const HOSTED_ASSETS: Record<string, { contentType: string; body: string }> = {
  'hosted.js': { contentType: 'text/javascript; charset=utf-8', body: HOSTED_SCRIPT },
  'hosted.css': { contentType: 'text/css; charset=utf-8', body: HOSTED_CSS },
};

/**
 * Only what the page needs: its own files, its own API, and the live view (same origin).
 * Trusted Types with no policy turns any HTML sink into an error. Never framed, so a
 * hostile page cannot overlay it to harvest what a person types.
 */
export const HOSTED_PAGE_HEADERS: Record<string, string> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; frame-src 'self'; img-src 'self' data:; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'",
  // The handoff code is in the fragment (never sent), the flow id in the path: send neither on.
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};
