import type { TelemetryEvent } from '../../../contract/telemetry.js';
import { contextFields, type TargetContext } from './cdp-events.js';
import { CAPTCHA_PROVIDERS } from './captcha-script.js';
import { MAX_SELECTOR, MAX_TEXT } from './page-script.js';

/**
 * The injected page script's messages (page-script.ts) as telemetry events, in the SDK's
 * shapes: interaction_click / _key / _scroll_settled, page_layout_shift, page_lcp and
 * page_layout_settled, captcha_challenge_result. Pure. The script runs in a world the page cannot reach, but what it
 * reads (text, ids) is the page's: every field is type-checked and cut here again, and a
 * message that is not one of these is dropped (null).
 */

type Draft = Omit<TelemetryEvent, 'ts'>;
type Message = Record<string, unknown>;

const source = { kind: 'cdp' as const, event: 'Runtime.bindingCalled' };

const str = (value: unknown, max: number): string | undefined => (typeof value === 'string' ? value.slice(0, max) : undefined);
const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
const bool = (value: unknown): boolean | undefined => (typeof value === 'boolean' ? value : undefined);

/** Drops the absent fields, so an event carries only what the page gave. */
function defined(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** Parses a binding payload; anything but a JSON object is null. */
export function parseMessage(payload: unknown): Message | null {
  if (typeof payload !== 'string' || payload.length > 64 * 1024) return null;
  try {
    const parsed = JSON.parse(payload) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Message) : null;
  } catch {
    return null;
  }
}

function data(ctx: TargetContext, message: Message, fields: Record<string, unknown>): Record<string, unknown> {
  const url = str(message.url, 2048);
  return { ...contextFields(url === undefined ? ctx : { ...ctx, url }), ...defined(fields) };
}

export function pageMessageEvent(message: Message, ctx: TargetContext): Draft | null {
  switch (message.t) {
    case 'click':
      return {
        category: 'interaction',
        type: 'interaction_click',
        source,
        data: data(ctx, message, { selector: str(message.selector, MAX_SELECTOR), tag: str(message.tag, 32), text: str(message.text, MAX_TEXT), x: num(message.x), y: num(message.y) }),
      };
    case 'key':
      return { category: 'interaction', type: 'interaction_key', source, data: data(ctx, message, { key: str(message.key, 32), selector: str(message.selector, MAX_SELECTOR), tag: str(message.tag, 32) }) };
    case 'scroll':
      return {
        category: 'interaction',
        type: 'interaction_scroll_settled',
        source,
        data: data(ctx, message, {
          from_x: num(message.from_x),
          from_y: num(message.from_y),
          to_x: num(message.to_x),
          to_y: num(message.to_y),
          target_selector: str(message.target_selector, MAX_SELECTOR),
        }),
      };
    case 'layout_shift':
      return {
        category: 'page',
        type: 'page_layout_shift',
        source: { kind: 'cdp', event: 'PerformanceObserver.layout-shift' },
        data: data(ctx, message, {
          time: num(message.time),
          duration: num(message.duration),
          layout_shift_details: defined({ value: num(message.value), had_recent_input: bool(message.had_recent_input) }),
        }),
      };
    case 'lcp':
      return { category: 'page', type: 'page_lcp', source: { kind: 'cdp', event: 'PerformanceObserver.largest-contentful-paint' }, data: data(ctx, message, { time: num(message.time), lcp_details: lcpDetails(message) }) };
    case 'layout_settled':
      return { category: 'page', type: 'page_layout_settled', source, data: data(ctx, message, {}) };
    case 'captcha':
      return captchaEvent(message);
    default:
      return null;
  }
}

const CAPTCHA_STATUSES = ['solved', 'timeout', 'abandoned'];

/**
 * captcha_challenge_result, with Kernel's fields only (no page URL: its query is not the
 * challenge's business); null unless status and provider are ones the observer reports.
 */
function captchaEvent(message: Message): Draft | null {
  const status = str(message.status, 16);
  const provider = str(message.provider, 32);
  const challengeId = str(message.challenge_id, 64);
  if (!status || !CAPTCHA_STATUSES.includes(status) || !(CAPTCHA_PROVIDERS as readonly string[]).includes(provider ?? '') || !challengeId) return null;
  return {
    category: 'captcha',
    type: 'captcha_challenge_result',
    source: { kind: 'cdp', event: 'Runtime.bindingCalled' },
    data: defined({
      status,
      captcha_type: provider,
      captcha_provider: provider,
      challenge_id: challengeId,
      duration_ms: Math.max(0, num(message.duration_ms) ?? 0),
      website_host: str(message.website_host, 256),
      website_path: str(message.website_path, 2048),
    }),
  };
}

function lcpDetails(message: Message): Record<string, unknown> {
  const elementId = str(message.element_id, MAX_SELECTOR);
  const url = str(message.element_url, 2048);
  return defined({
    render_time: num(message.render_time),
    load_time: num(message.load_time),
    size: num(message.size),
    element_id: elementId === '' ? undefined : elementId,
    url: url === '' ? undefined : url,
  });
}

/** page_navigation_settled: the page loaded, the network went idle and the layout settled. */
export function navigationSettledEvent(ctx: TargetContext): Draft {
  return { category: 'page', type: 'page_navigation_settled', source: { kind: 'cdp', event: 'Page.loadEventFired' }, data: contextFields(ctx) };
}
