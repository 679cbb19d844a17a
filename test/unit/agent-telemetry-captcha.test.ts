import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { TELEMETRY_TYPE_CATEGORY } from '../../contract/telemetry.js';
import type { TargetContext } from '../../agent/src/telemetry/cdp-events.js';
import { MAX_OPEN_CHALLENGES, OpenChallenges } from '../../agent/src/telemetry/captcha-events.js';
import { captchaObserver, captchaProviderOf, type WidgetLike } from '../../agent/src/telemetry/captcha-script.js';
import { pageMessageEvent } from '../../agent/src/telemetry/page-events.js';

/**
 * The captcha observer's pure parts: which widget roots are which provider (on a fake
 * element that answers the exact selectors the detection asks: there is no DOM here), and
 * its messages as captcha_challenge_result events. The observer itself runs in real
 * Chromium in test/integration/browser-telemetry-captcha.test.ts.
 */

/** own: selectors the root matches; inside: selectors of its descendants; above: of its ancestors. */
function widget(own: string[], inside: string[] = [], above: string[] = []): WidgetLike {
  const any = (list: string[]) => (selector: string) => selector.split(',').some((s) => list.includes(s));
  return { matches: any(own), querySelector: (s) => (any(inside)(s) ? {} : null), closest: (s) => (any([...own, ...above])(s) ? {} : null) };
}

describe('captcha provider detection', () => {
  it('knows each provider by its container or its response field', () => {
    expect(captchaProviderOf(widget(['.g-recaptcha']))).toBe('recaptcha_v2');
    expect(captchaProviderOf(widget(['div'], ['[name="g-recaptcha-response"]', 'iframe[title="reCAPTCHA"]']))).toBe('recaptcha_v2');
    expect(captchaProviderOf(widget(['iframe[src*="/recaptcha/enterprise/anchor"]']))).toBe('recaptcha_v2');
    expect(captchaProviderOf(widget(['.h-captcha']))).toBe('hcaptcha');
    expect(captchaProviderOf(widget(['.cf-turnstile']))).toBe('turnstile');
    expect(captchaProviderOf(widget(['div'], ['[name="cf-turnstile-response"]']))).toBe('turnstile');
    expect(captchaProviderOf(widget(['.geetest_holder']))).toBe('geetest');
    expect(captchaProviderOf(widget(['div'], ['[name="captcha_output"]']))).toBe('geetest');
  });

  it('takes hCaptcha for hCaptcha although it also renders a g-recaptcha-response field', () => {
    expect(captchaProviderOf(widget(['div'], ['[name="g-recaptcha-response"]', '[name="h-captcha-response"]']))).toBe('hcaptcha');
  });

  it('reports no visible challenge for reCAPTCHA v3 or invisible v2, an invisible widget, or an unknown one', () => {
    expect(captchaProviderOf(widget(['div'], ['[name="g-recaptcha-response"]'], ['.grecaptcha-badge']))).toBeNull();
    expect(captchaProviderOf(widget(['.g-recaptcha'], ['iframe[src*="size=invisible"]']))).toBeNull();
    expect(captchaProviderOf(widget(['.h-captcha', '[data-size="invisible"]']))).toBeNull();
    expect(captchaProviderOf(widget(['.some-captcha'], ['[name="captcha"]']))).toBeNull();
  });

  it('is embedded in an observer that is valid JavaScript', () => {
    expect(() => new Script(`(() => { const post = () => {}; ${captchaObserver()} })`)).not.toThrow();
  });
});

describe('captcha messages as events', () => {
  const ctx: TargetContext = { session_id: 'S1', target_id: 'T1', target_type: 'page', url: 'http://attached/?q=1', nav_seq: 1 };
  const message = { t: 'captcha', status: 'solved', provider: 'hcaptcha', challenge_id: 'ab12', duration_ms: 1234, website_host: 'shop.test', website_path: '/login', url: 'http://shop.test/login?secret=1' };

  it('maps an outcome to captcha_challenge_result with Kernel’s fields only', () => {
    const event = pageMessageEvent(message, ctx);
    expect(event).toEqual({
      category: 'captcha',
      type: 'captcha_challenge_result',
      source: { kind: 'cdp', event: 'Runtime.bindingCalled' },
      data: { status: 'solved', captcha_type: 'hcaptcha', captcha_provider: 'hcaptcha', challenge_id: 'ab12', duration_ms: 1234, website_host: 'shop.test', website_path: '/login' },
    });
    expect(TELEMETRY_TYPE_CATEGORY[event!.type]).toBe('captcha');
  });

  it('drops an outcome or provider the observer never reports, and a message without a challenge id', () => {
    expect(pageMessageEvent({ ...message, status: 'failure' }, ctx)).toBeNull();
    expect(pageMessageEvent({ ...message, provider: 'arkose' }, ctx)).toBeNull();
    expect(pageMessageEvent({ ...message, challenge_id: undefined }, ctx)).toBeNull();
    expect(pageMessageEvent({ ...message, duration_ms: 'long' }, ctx)?.data?.duration_ms).toBe(0);
  });
});

describe('open challenges on the agent’s side', () => {
  const ctx: TargetContext = { session_id: 'S1', target_id: 'T1', target_type: 'page', nav_seq: 1 };
  const opened = (id: string) => ({ t: 'captcha_open', provider: 'turnstile', challenge_id: id, website_host: 'h', website_path: '/p' });

  it('emits an announced challenge’s outcome once, and none for a challenge never announced', () => {
    const open = new OpenChallenges();
    open.announce(opened('a'), 1000);
    const outcome = { t: 'captcha', status: 'solved', provider: 'turnstile', challenge_id: 'a', duration_ms: 5 };
    expect(open.finish(outcome, ctx)?.data).toMatchObject({ status: 'solved', challenge_id: 'a', duration_ms: 5 });
    expect(open.finish(outcome, ctx)).toBeNull();
    expect(open.finish({ ...outcome, challenge_id: 'b' }, ctx)).toBeNull();
  });

  it('abandons what is still open when the document goes away, timed by the agent, then forgets it', () => {
    const open = new OpenChallenges();
    open.announce(opened('a'), 1000);
    open.announce(opened('b'), 1500);
    open.finish({ t: 'captcha', status: 'solved', provider: 'turnstile', challenge_id: 'b', duration_ms: 1 }, ctx);
    const abandoned = open.abandonAll(ctx, 4000);
    expect(abandoned.map((e) => e.data)).toEqual([{ status: 'abandoned', captcha_type: 'turnstile', captcha_provider: 'turnstile', challenge_id: 'a', duration_ms: 3000, website_host: 'h', website_path: '/p' }]);
    expect(open.abandonAll(ctx, 5000)).toEqual([]);
    // The page's own pagehide report, arriving after the navigation, is not a second outcome.
    expect(open.finish({ t: 'captcha', status: 'abandoned', provider: 'turnstile', challenge_id: 'a', duration_ms: 1 }, ctx)).toBeNull();
  });

  it('holds at most MAX_OPEN_CHALLENGES per tab', () => {
    const open = new OpenChallenges();
    for (let i = 0; i < MAX_OPEN_CHALLENGES + 10; i++) open.announce(opened(`c${i}`), 0);
    expect(open.abandonAll(ctx, 1)).toHaveLength(MAX_OPEN_CHALLENGES);
  });
});
