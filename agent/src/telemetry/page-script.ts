/**
 * The script the capture injects into every page's isolated world (never the page's own
 * world: the page cannot see it, call its binding, or remove its listeners). It reports
 * through the binding (Runtime.addBinding scoped to that world) as one JSON message per
 * call; page-events.ts turns the messages into telemetry events.
 *
 * - interaction: trusted clicks, keys and scrolls only (a page's dispatchEvent makes
 *   untrusted events; scroll events are always trusted, so a scroll counts only within
 *   USER_INPUT_MS of a trusted wheel, touch, pointer or scrolling key event). In an editable field
 *   a printable key is reported as "*" and a password field reports nothing at all.
 *   Scrolls are reported once settled (SCROLL_SETTLE_MS with no scroll).
 * - page metrics: layout shifts and LCP from PerformanceObserver, and layout settled
 *   (LAYOUT_SETTLE_MS after load with no layout shift, each shift restarting the wait).
 * - captcha: the outcome of a visible challenge widget (captcha-script.ts).
 *
 * Text and selectors are cut in the page too, so a huge DOM never crosses the binding.
 *
 * Chromium installs a binding scoped to a world name only into worlds that exist when it is
 * added (unless Runtime is enabled, which a page can detect, so it is not): the capture
 * re-adds it at each navigation, and until it is there the script holds its messages.
 */

import { captchaObserver } from './captcha-script.js';

export const SCROLL_SETTLE_MS = 150;
export const LAYOUT_SETTLE_MS = 1000;
export const USER_INPUT_MS = 1000;
export const MAX_TEXT = 100;
export const MAX_SELECTOR = 256;
/** Messages held in the page until the agent has installed the binding in a new document's world. */
const MAX_QUEUED = 100;
const BINDING_WAIT_MS = 10_000;

export interface PageScriptOptions {
  binding: string;
  interaction: boolean;
  metrics: boolean;
  /** The captcha observer (captcha-script.ts). */
  captcha: boolean;
}

export function pageScript(options: PageScriptOptions): string {
  const parts = [common(options.binding)];
  if (options.interaction) parts.push(INTERACTION);
  // Page metrics are the top document's; interactions are any frame's.
  if (options.metrics) parts.push(`  if (window === top) {\n${METRICS}\n  }`);
  if (options.captcha) parts.push(captchaObserver());
  return `(() => {
  if (globalThis.__bpTelemetry) return;
  globalThis.__bpTelemetry = true;
${parts.join('\n')}
})();`;
}

function common(binding: string): string {
  return `  const name = ${JSON.stringify(binding)};
  const queue = [];
  let poll;
  const send = () => {
    const binding = globalThis[name];
    if (typeof binding !== 'function') return false;
    while (queue.length > 0) binding(queue.shift());
    return true;
  };
  const post = (message) => {
    if (queue.length < ${MAX_QUEUED}) queue.push(JSON.stringify({ ...message, url: location.href }));
    if (send() || poll) return;
    let tries = 0;
    poll = setInterval(() => {
      if (send() || ++tries > ${BINDING_WAIT_MS / 50}) { clearInterval(poll); poll = undefined; queue.length = 0; }
    }, 50);
  };
  const cut = (s, n) => (s.length > n ? s.slice(0, n) : s);
  const selectorOf = (el) => {
    if (!el || el.nodeType !== 1) return el === document || el === window ? 'document' : '';
    const parts = [];
    for (let node = el; node && node.nodeType === 1 && parts.length < 5; node = node.parentElement) {
      if (node.id) { parts.unshift('#' + CSS.escape(node.id)); break; }
      let part = node.localName;
      const parent = node.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((c) => c.localName === node.localName);
        if (same.length > 1) part += ':nth-of-type(' + (same.indexOf(node) + 1) + ')';
      }
      parts.unshift(part);
    }
    return cut(parts.join(' > '), ${MAX_SELECTOR});
  };`;
}

const INTERACTION = `  const opts = { capture: true, passive: true };
  const editable = (el) => !!el && (el.isContentEditable || el.localName === 'textarea' || el.localName === 'select' || el.localName === 'input');
  let lastInput = -Infinity;
  const scrollKeys = new Set([' ', 'PageUp', 'PageDown', 'Home', 'End', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight']);
  const userInput = (e) => { if (e.isTrusted && (e.type !== 'keydown' || scrollKeys.has(e.key))) lastInput = performance.now(); };
  for (const type of ['wheel', 'touchmove', 'pointerdown', 'keydown']) addEventListener(type, userInput, opts);
  addEventListener('click', (e) => {
    if (!e.isTrusted) return;
    const el = e.target instanceof Element ? e.target : null;
    const text = el && !editable(el) ? cut((el.innerText ?? el.textContent ?? '').replace(/\\s+/g, ' ').trim(), ${MAX_TEXT}) : '';
    post({ t: 'click', selector: selectorOf(el), tag: el ? el.tagName.toUpperCase() : '', text, x: Math.round(e.clientX), y: Math.round(e.clientY) });
  }, opts);
  addEventListener('keydown', (e) => {
    if (!e.isTrusted || typeof e.key !== 'string') return;
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (el && el.localName === 'input' && el.type === 'password') return;
    const key = editable(el) && [...e.key].length === 1 ? '*' : cut(e.key, 32);
    post({ t: 'key', key, selector: selectorOf(el), tag: el ? el.tagName.toUpperCase() : '' });
  }, opts);
  const scrolls = new Map();
  const settled = new WeakMap();
  const position = (target) => (target === document ? [scrollX, scrollY] : [target.scrollLeft, target.scrollTop]);
  addEventListener('scroll', (e) => {
    const target = e.target === window || e.target === document.documentElement ? document : e.target;
    // A scroll the page made is no gesture, but where the next one starts from.
    if (performance.now() - lastInput > ${USER_INPUT_MS}) return void (scrolls.has(target) || settled.set(target, position(target)));
    let gesture = scrolls.get(target);
    if (!gesture) {
      const from = settled.get(target) ?? position(target);
      gesture = { from };
      scrolls.set(target, gesture);
    }
    clearTimeout(gesture.timer);
    gesture.timer = setTimeout(() => {
      scrolls.delete(target);
      const to = position(target);
      settled.set(target, to);
      post({ t: 'scroll', from_x: Math.round(gesture.from[0]), from_y: Math.round(gesture.from[1]), to_x: Math.round(to[0]), to_y: Math.round(to[1]), target_selector: selectorOf(target) });
    }, ${SCROLL_SETTLE_MS});
  }, opts);
  const remember = () => settled.set(document, [scrollX, scrollY]);
  if (document.readyState === 'loading') addEventListener('DOMContentLoaded', remember, { once: true }); else remember();`;

const METRICS = `  let settleTimer;
  let loaded = false;
  const armSettle = () => {
    if (!loaded) return;
    clearTimeout(settleTimer);
    settleTimer = setTimeout(() => post({ t: 'layout_settled' }), ${LAYOUT_SETTLE_MS});
  };
  const observe = (type, onEntry) => {
    try { new PerformanceObserver((list) => list.getEntries().forEach(onEntry)).observe({ type, buffered: true }); } catch {}
  };
  observe('layout-shift', (entry) => {
    post({ t: 'layout_shift', value: entry.value, had_recent_input: entry.hadRecentInput, time: entry.startTime, duration: entry.duration });
    armSettle();
  });
  observe('largest-contentful-paint', (entry) => {
    const el = entry.element;
    post({ t: 'lcp', time: entry.startTime, render_time: entry.renderTime, load_time: entry.loadTime, size: entry.size, element_id: entry.id || (el && el.id) || '', element_url: entry.url || '' });
  });
  const onLoad = () => { loaded = true; armSettle(); };
  if (document.readyState === 'complete') onLoad(); else addEventListener('load', onLoad, { once: true });`;
