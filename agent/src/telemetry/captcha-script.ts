/**
 * The captcha observer of the injected page script (page-script.ts: same isolated world,
 * same binding). Browserplane solves nothing: it watches for a visible challenge widget of
 * a known provider and reports its terminal outcome once (captcha_challenge_result):
 *
 * - solved: the widget's response field got a non-empty token (the token is never read
 *   beyond "not empty", never sent), also when it had one by the time it was first seen
 *   (a check that passes at once can fill it within a scan's wait). A page can set that field itself, as the vendor's own
 *   script does: this is an observation of the page, not proof the site accepted anything.
 * - abandoned: the widget left the DOM, or the page unloaded (pagehide), without a token.
 *   Each challenge is announced when it appears (captcha_open), so the agent ends those
 *   still open when their tab navigates or closes, should the page's own word not arrive.
 * - timeout: CAPTCHA_BUDGET_MS passed with the widget still there and no token.
 *
 * Idle cost: one MutationObserver (child lists only) that schedules at most one selector
 * scan per CAPTCHA_SCAN_MS; a timer runs only while a widget is open or waits to be shown.
 */

/** A challenge still open this long after it appeared ends as `timeout`. */
export const CAPTCHA_BUDGET_MS = 10 * 60 * 1000;
/** DOM changes are looked at for widgets at most this often. */
export const CAPTCHA_SCAN_MS = 250;
/** While a widget is open (or present but not yet shown), its field is checked this often. */
export const CAPTCHA_POLL_MS = 500;

export type CaptchaProvider = 'recaptcha_v2' | 'hcaptcha' | 'turnstile' | 'geetest';
export const CAPTCHA_PROVIDERS: readonly CaptchaProvider[] = ['recaptcha_v2', 'hcaptcha', 'turnstile', 'geetest'];

/** Elements that may be (part of) a widget: the vendors' containers, their iframes, their response fields. */
export const CAPTCHA_CANDIDATES = [
  '.g-recaptcha',
  '.h-captcha',
  '.cf-turnstile',
  '.geetest_holder',
  '.geetest_captcha',
  'iframe[title="reCAPTCHA"]',
  'iframe[src*="/recaptcha/api2/anchor"]',
  'iframe[src*="/recaptcha/enterprise/anchor"]',
  'iframe[data-hcaptcha-widget-id]',
].join(',');
export const CAPTCHA_FIELDS = '[name="g-recaptcha-response"],[name="h-captcha-response"],[name="cf-turnstile-response"],[name="geetest_validate"],[name="captcha_output"]';

/** The part of an Element the detection reads (so it is testable without a DOM). */
export interface WidgetLike {
  matches(selector: string): boolean;
  closest(selector: string): unknown;
  querySelector(selector: string): unknown;
}

/**
 * The provider of a widget root, by the DOM the vendors' scripts render; null for anything
 * else and for what is no visible challenge: reCAPTCHA v3 and invisible v2 (the badge, an
 * anchor of size=invisible), widgets of data-size="invisible". hCaptcha is checked before
 * reCAPTCHA: it also renders a g-recaptcha-response field. Pure and self-contained: the
 * page script embeds its source.
 */
export function captchaProviderOf(root: WidgetLike): CaptchaProvider | null {
  const is = (selector: string) => root.matches(selector) || root.querySelector(selector) !== null;
  if (root.closest('.grecaptcha-badge') !== null || root.matches('[data-size="invisible"]') || is('iframe[src*="size=invisible"]')) return null;
  if (is('.h-captcha') || is('[name="h-captcha-response"]') || is('iframe[data-hcaptcha-widget-id]')) return 'hcaptcha';
  if (is('.cf-turnstile') || is('[name="cf-turnstile-response"]')) return 'turnstile';
  if (is('.geetest_holder') || is('.geetest_captcha') || is('[name="geetest_validate"]') || is('[name="captcha_output"]')) return 'geetest';
  const recaptchaFrame = 'iframe[title="reCAPTCHA"],iframe[src*="/recaptcha/api2/anchor"],iframe[src*="/recaptcha/enterprise/anchor"]';
  if (is('.g-recaptcha') || is('[name="g-recaptcha-response"]') || is(recaptchaFrame)) return 'recaptcha_v2';
  return null;
}

/** The response field a provider's script fills with its token. */
export const CAPTCHA_FIELD_OF: Record<CaptchaProvider, string> = {
  recaptcha_v2: '[name="g-recaptcha-response"]',
  hcaptcha: '[name="h-captcha-response"]',
  turnstile: '[name="cf-turnstile-response"]',
  geetest: '[name="geetest_validate"],[name="captcha_output"]',
};

/** The observer, as script text for the page script (inside its closure: uses `post`). */
export function captchaObserver(): string {
  return `  const captchaProviderOf = ${captchaProviderOf.toString()};
  const fieldOf = ${JSON.stringify(CAPTCHA_FIELD_OF)};
  const open = new Map();
  const waiting = new Set();
  const seen = new WeakSet();
  let scanTimer;
  let pollTimer;
  const randomId = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  const shown = (el) => (typeof el.checkVisibility === 'function' ? el.checkVisibility({ visibilityProperty: true }) : el.getClientRects().length > 0);
  const tokenIn = (root, provider) => {
    const field = root.localName === 'iframe' ? root.parentElement?.querySelector(fieldOf[provider]) : root.querySelector(fieldOf[provider]);
    return !!field && typeof field.value === 'string' && field.value.length > 0;
  };
  const finish = (root, challenge, status) => {
    open.delete(root);
    post({ t: 'captcha', status, provider: challenge.provider, challenge_id: challenge.id, duration_ms: Math.round(performance.now() - challenge.started), website_host: challenge.host, website_path: challenge.path });
  };
  const begin = (root) => {
    const provider = captchaProviderOf(root);
    if (!provider) return;
    const challenge = { provider, id: randomId(), started: performance.now(), host: location.hostname, path: location.pathname };
    open.set(root, challenge);
    post({ t: 'captcha_open', provider, challenge_id: challenge.id, website_host: challenge.host, website_path: challenge.path });
  };
  const check = () => {
    for (const root of [...waiting]) {
      if (!root.isConnected) waiting.delete(root);
      else if (shown(root)) { waiting.delete(root); begin(root); }
    }
    const now = performance.now();
    for (const [root, challenge] of [...open]) {
      if (!root.isConnected) finish(root, challenge, 'abandoned');
      else if (tokenIn(root, challenge.provider)) finish(root, challenge, 'solved');
      else if (now - challenge.started >= ${CAPTCHA_BUDGET_MS}) finish(root, challenge, 'timeout');
    }
    if (open.size === 0 && waiting.size === 0) { clearInterval(pollTimer); pollTimer = undefined; }
  };
  const candidates = ${JSON.stringify(CAPTCHA_CANDIDATES)};
  const fields = ${JSON.stringify(CAPTCHA_FIELDS)};
  const scan = () => {
    scanTimer = undefined;
    const found = new Set(document.querySelectorAll(candidates));
    for (const field of document.querySelectorAll(fields)) if (field.parentElement) found.add(field.parentElement);
    for (const el of found) {
      const root = el.parentElement?.closest(candidates) ?? el;
      if (seen.has(root)) continue;
      seen.add(root);
      if (captchaProviderOf(root)) waiting.add(root);
    }
    if (waiting.size > 0) check();
    if ((open.size > 0 || waiting.size > 0) && !pollTimer) pollTimer = setInterval(check, ${CAPTCHA_POLL_MS});
  };
  new MutationObserver(() => { if (!scanTimer) scanTimer = setTimeout(scan, ${CAPTCHA_SCAN_MS}); }).observe(document, { childList: true, subtree: true });
  scan();
  addEventListener('pagehide', () => { for (const [root, challenge] of [...open]) finish(root, challenge, 'abandoned'); }, { capture: true });`;
}
