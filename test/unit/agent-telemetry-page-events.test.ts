import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { capturedCategories, TELEMETRY_MAX_SCREENSHOT_BYTES, TELEMETRY_TYPE_CATEGORY } from '../../contract/telemetry.js';
import type { TargetContext } from '../../agent/src/telemetry/cdp-events.js';
import { monitorEvent } from '../../agent/src/telemetry/monitor-events.js';
import { navigationSettledEvent, pageMessageEvent, parseMessage } from '../../agent/src/telemetry/page-events.js';
import { MAX_SELECTOR, MAX_TEXT, pageScript } from '../../agent/src/telemetry/page-script.js';
import { screenshotEvent } from '../../agent/src/telemetry/screenshot.js';
import { boundData } from '../../agent/src/telemetry/sink.js';

const ctx: TargetContext = { session_id: 'S1', target_id: 'T1', target_type: 'page', url: 'http://attached/', nav_seq: 2 };

describe('page script messages as telemetry events', () => {
  it('maps a click with the context fields and the page’s own url', () => {
    const event = pageMessageEvent({ t: 'click', selector: '#go', tag: 'BUTTON', text: 'Go', x: 12, y: 30, url: 'http://now/' }, ctx);
    expect(event).toEqual({
      category: 'interaction',
      type: 'interaction_click',
      source: { kind: 'cdp', event: 'Runtime.bindingCalled' },
      data: { session_id: 'S1', target_id: 'T1', target_type: 'page', nav_seq: 2, url: 'http://now/', selector: '#go', tag: 'BUTTON', text: 'Go', x: 12, y: 30 },
    });
  });

  it('cuts what the page controls and drops fields of the wrong type', () => {
    const event = pageMessageEvent({ t: 'click', selector: 's'.repeat(5000), tag: 7, text: 't'.repeat(5000), x: 'left', y: Number.NaN }, ctx)!;
    expect(String(event.data?.selector)).toHaveLength(MAX_SELECTOR);
    expect(String(event.data?.text)).toHaveLength(MAX_TEXT);
    expect(event.data).not.toHaveProperty('tag');
    expect(event.data).not.toHaveProperty('x');
    expect(event.data).not.toHaveProperty('y');
    expect(event.data?.url).toBe('http://attached/');
  });

  it('maps keys, scrolls, layout shifts, LCP and layout settled to their SDK types and categories', () => {
    const key = pageMessageEvent({ t: 'key', key: 'Enter', selector: '#name', tag: 'INPUT' }, ctx)!;
    expect(key.data).toMatchObject({ key: 'Enter', selector: '#name', tag: 'INPUT' });
    const scroll = pageMessageEvent({ t: 'scroll', from_x: 0, from_y: 10, to_x: 0, to_y: 500, target_selector: 'document' }, ctx)!;
    expect(scroll.data).toMatchObject({ from_x: 0, from_y: 10, to_x: 0, to_y: 500, target_selector: 'document' });
    const shift = pageMessageEvent({ t: 'layout_shift', value: 0.12, had_recent_input: false, time: 350.5, duration: 0 }, ctx)!;
    expect(shift.data).toMatchObject({ time: 350.5, duration: 0, layout_shift_details: { value: 0.12, had_recent_input: false } });
    const lcp = pageMessageEvent({ t: 'lcp', time: 80, render_time: 80, load_time: 0, size: 1200, element_id: '', element_url: 'http://img/' }, ctx)!;
    expect(lcp.data?.lcp_details).toEqual({ render_time: 80, load_time: 0, size: 1200, url: 'http://img/' });
    const settled = pageMessageEvent({ t: 'layout_settled' }, ctx)!;
    for (const event of [key, scroll, shift, lcp, settled, navigationSettledEvent(ctx)]) expect(TELEMETRY_TYPE_CATEGORY[event.type]).toBe(event.category);
    expect([key, scroll, shift, lcp, settled].map((e) => e.type)).toEqual(['interaction_key', 'interaction_scroll_settled', 'page_layout_shift', 'page_lcp', 'page_layout_settled']);
  });

  it('drops a message it does not know, and a payload that is not a JSON object', () => {
    expect(pageMessageEvent({ t: 'api_call' }, ctx)).toBeNull();
    expect(parseMessage('not json')).toBeNull();
    expect(parseMessage('[1]')).toBeNull();
    expect(parseMessage(42)).toBeNull();
    expect(parseMessage(JSON.stringify({ t: 'x', pad: 'p'.repeat(70_000) }))).toBeNull();
    expect(parseMessage('{"t":"click"}')).toEqual({ t: 'click' });
  });
});

describe('the page script', () => {
  it('holds only the parts of the enabled categories, and is valid JavaScript', () => {
    const both = pageScript({ binding: '__bp_x', interaction: true, metrics: true, captcha: false });
    const clicks = pageScript({ binding: '__bp_x', interaction: true, metrics: false, captcha: false });
    const metrics = pageScript({ binding: '__bp_x', interaction: false, metrics: true, captcha: false });
    const captcha = pageScript({ binding: '__bp_x', interaction: false, metrics: false, captcha: true });
    expect(clicks).toContain("'click'");
    expect(clicks).not.toContain('PerformanceObserver');
    expect(metrics).toContain('PerformanceObserver');
    expect(metrics).not.toContain("addEventListener('click'");
    for (const source of [both, clicks, metrics]) expect(source).not.toContain('MutationObserver');
    expect(captcha).toContain('MutationObserver');
    expect(captcha).not.toContain('PerformanceObserver');
    expect(captcha).not.toContain("addEventListener('click'");
    for (const source of [both, clicks, metrics, captcha]) expect(() => new Script(source)).not.toThrow();
    expect(both).toContain('"__bp_x"');
  });
});

describe('monitor and screenshot events', () => {
  it('shapes the monitor events in category monitor', () => {
    expect(monitorEvent('monitor_init_failed', { step: 'Target.setAutoAttach' })).toEqual({
      category: 'monitor',
      type: 'monitor_init_failed',
      source: { kind: 'local_process', event: 'cdp_monitor' },
      data: { step: 'Target.setAutoAttach' },
    });
    expect(monitorEvent('monitor_reconnected', { reconnect_duration_ms: 12 }).data).toEqual({ reconnect_duration_ms: 12 });
  });

  it('marks a screenshot without its PNG truncated, and keeps a PNG under its bound whole', () => {
    expect(screenshotEvent(undefined)).toMatchObject({ type: 'monitor_screenshot', truncated: true, data: {} });
    const png = 'A'.repeat(TELEMETRY_MAX_SCREENSHOT_BYTES);
    const bounded = boundData({ ...screenshotEvent(png), ts: 1 });
    expect(bounded.data?.png).toBe(png);
    expect(bounded.truncated).toBeUndefined();
  });

  it('turns monitor on with any CDP-backed category, and only then', () => {
    expect(capturedCategories(['interaction']).has('monitor')).toBe(true);
    expect(capturedCategories(['screenshot', 'control']).has('monitor')).toBe(true);
    expect(capturedCategories(['control', 'connection', 'system', 'captcha']).has('monitor')).toBe(false);
    expect(capturedCategories(['monitor']).has('monitor')).toBe(true);
  });
});
