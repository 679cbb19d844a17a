import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CAPTCHA_BUDGET_MS, CAPTCHA_POLL_MS, CAPTCHA_SCAN_MS, captchaObserver } from '../../agent/src/telemetry/captcha-script.js';

/**
 * The captcha observer's script run as the page runs it, on a fake DOM (there is none in
 * Node) and fake timers: what real Chromium cannot show in a test's time, the 10-minute
 * timeout, and the order of its rules. Fake: elements match exactly the selectors they are
 * given (split on commas, as the script's lists are), and the MutationObserver fires when
 * the test says the DOM changed. Real Chromium runs it in browser-telemetry-captcha.test.ts.
 */

class El {
  parentElement: El | null = null;
  readonly children: El[] = [];
  value?: string;
  visible = true;
  constructor(
    readonly localName: string,
    private readonly selectors: string[],
  ) {}
  matches(selector: string): boolean {
    return selector.split(',').some((s) => this.selectors.includes(s));
  }
  closest(selector: string): El | null {
    return this.matches(selector) ? this : (this.parentElement?.closest(selector) ?? null);
  }
  querySelectorAll(selector: string): El[] {
    return this.children.flatMap((c) => [...(c.matches(selector) ? [c] : []), ...c.querySelectorAll(selector)]);
  }
  querySelector(selector: string): El | null {
    return this.querySelectorAll(selector)[0] ?? null;
  }
  checkVisibility(): boolean {
    return this.visible;
  }
  get isConnected(): boolean {
    return this.localName === '#root' || (this.parentElement?.isConnected ?? false);
  }
  append(...children: El[]): this {
    for (const child of children) {
      child.parentElement = this;
      this.children.push(child);
    }
    return this;
  }
  remove(): void {
    this.parentElement?.children.splice(this.parentElement.children.indexOf(this), 1);
    this.parentElement = null;
  }
}

let posted: Record<string, unknown>[];
let root: El;
let changed: () => void;
let pagehide: () => void;

beforeEach(() => {
  vi.useFakeTimers();
  posted = [];
  root = new El('#root', []);
  const sandbox = {
    post: (message: Record<string, unknown>) => posted.push(message),
    document: { querySelectorAll: (s: string) => root.querySelectorAll(s) },
    location: { hostname: 'shop.test', pathname: '/login' },
    performance: { now: () => Date.now() },
    crypto: globalThis.crypto,
    setTimeout,
    setInterval,
    clearInterval,
    __name: <T>(fn: T) => fn,
    MutationObserver: class {
      constructor(callback: () => void) {
        changed = callback;
      }
      observe() {}
    },
    addEventListener: (type: string, listener: () => void) => {
      if (type === 'pagehide') pagehide = listener;
    },
  };
  runInNewContext(`(() => {\n${captchaObserver()}\n})()`, sandbox);
});
afterEach(() => {
  vi.useRealTimers();
});

const turnstile = () => new El('div', ['.cf-turnstile']).append(new El('input', ['[name="cf-turnstile-response"]']));
const field = (widget: El) => widget.children[0]!;
const outcomes = () => posted.filter((m) => m.t === 'captcha');
function add(widget: El): void {
  root.append(widget);
  changed();
  vi.advanceTimersByTime(CAPTCHA_SCAN_MS);
}

describe('the captcha observer', () => {
  it('announces a widget, then reports it solved once its field holds a token, and only once', () => {
    const widget = turnstile();
    add(widget);
    expect(posted).toEqual([{ t: 'captcha_open', provider: 'turnstile', challenge_id: expect.stringMatching(/^[0-9a-f]{32}$/), website_host: 'shop.test', website_path: '/login' }]);
    vi.advanceTimersByTime(3000);
    field(widget).value = 'tok';
    vi.advanceTimersByTime(CAPTCHA_POLL_MS);
    widget.remove();
    vi.advanceTimersByTime(CAPTCHA_POLL_MS * 4);
    expect(outcomes()).toEqual([{ t: 'captcha', status: 'solved', provider: 'turnstile', challenge_id: posted[0]!.challenge_id, duration_ms: expect.any(Number), website_host: 'shop.test', website_path: '/login' }]);
    expect(outcomes()[0]!.duration_ms).toBeGreaterThanOrEqual(3000);
    expect(JSON.stringify(posted)).not.toContain('tok');
  });

  it('reports a widget removed without a token abandoned, and one still open at the budget timed out', () => {
    const gone = turnstile();
    const kept = turnstile();
    add(gone);
    add(kept);
    gone.remove();
    vi.advanceTimersByTime(CAPTCHA_POLL_MS);
    expect(outcomes().map((m) => m.status)).toEqual(['abandoned']);
    vi.advanceTimersByTime(CAPTCHA_BUDGET_MS - CAPTCHA_POLL_MS * 2);
    expect(outcomes()).toHaveLength(1);
    vi.advanceTimersByTime(CAPTCHA_POLL_MS * 2);
    expect(outcomes().map((m) => m.status)).toEqual(['abandoned', 'timeout']);
    expect(outcomes()[1]!.duration_ms).toBeGreaterThanOrEqual(CAPTCHA_BUDGET_MS);
    // Nothing more once every challenge has ended: the poll stopped.
    vi.advanceTimersByTime(CAPTCHA_BUDGET_MS);
    expect(outcomes()).toHaveLength(2);
  });

  it('waits for a hidden widget to be shown, and abandons what is open when the page is hidden away', () => {
    const widget = turnstile();
    widget.visible = false;
    add(widget);
    expect(posted).toEqual([]);
    widget.visible = true;
    vi.advanceTimersByTime(CAPTCHA_POLL_MS);
    expect(posted.map((m) => m.t)).toEqual(['captcha_open']);
    pagehide();
    expect(outcomes().map((m) => m.status)).toEqual(['abandoned']);
  });

  it('reports nothing for an unknown widget or an invisible reCAPTCHA badge', () => {
    add(new El('div', ['.some-captcha']).append(new El('input', ['[name="captcha"]'])));
    add(new El('div', ['.grecaptcha-badge']).append(new El('textarea', ['[name="g-recaptcha-response"]'])));
    vi.advanceTimersByTime(CAPTCHA_BUDGET_MS * 2);
    expect(posted).toEqual([]);
  });
});
