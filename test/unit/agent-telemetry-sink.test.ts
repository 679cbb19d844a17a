import { describe, expect, it } from 'vitest';
import { boundData, MAX_QUEUED, TelemetrySink, type TelemetryPost } from '../../agent/src/telemetry/sink.js';

/** The agent's telemetry queue with its POST replaced by a recorder (no API here: unit tier). */

const SPEC = { ingestUrl: 'http://api.test/internal/browsers/bs_1/telemetry?token=t', categories: ['console' as const] };
const log = (text: string) => ({ category: 'console' as const, type: 'console_log', source: { kind: 'cdp' as const }, data: { text } });

function recorder(answer: (batch: unknown[]) => number) {
  const batches: { events: { data: { text: string } }[]; dropped: number }[] = [];
  const post: TelemetryPost = (_url, body) => {
    const parsed = JSON.parse(body) as (typeof batches)[number];
    const status = answer(parsed.events);
    if (status < 300) batches.push(parsed);
    return Promise.resolve({ ok: status < 300, status });
  };
  return { batches, post };
}

describe('the agent telemetry sink', () => {
  it('sends only enabled categories, and nothing before it is configured', async () => {
    const { batches, post } = recorder(() => 200);
    const sink = new TelemetrySink(post);
    sink.emit(log('early'));
    sink.configure(SPEC);
    sink.emit(log('kept'));
    sink.emit({ category: 'network', type: 'network_idle', source: { kind: 'cdp' } });
    await sink.flush();
    expect(batches.flatMap((b) => b.events.map((e) => e.data.text))).toEqual(['kept']);
  });

  it('drops the oldest past its bound while the API is unreachable, and reports how many', async () => {
    let up = false;
    const { batches, post } = recorder(() => (up ? 200 : 503));
    const sink = new TelemetrySink(post);
    sink.configure(SPEC);
    for (let i = 0; i < MAX_QUEUED + 10; i++) sink.emit(log(`e${i}`));
    expect(sink.stats()).toEqual({ queued: MAX_QUEUED, dropped: 10 });
    up = true;
    await sink.flush(10_000);
    const texts = batches.flatMap((b) => b.events.map((e) => e.data.text));
    expect(texts[0]).toBe('e10');
    expect(texts).toHaveLength(MAX_QUEUED);
    expect(batches[0]!.dropped).toBe(10);
    expect(sink.stats()).toEqual({ queued: 0, dropped: 0 });
  });

  it('halves its batches when the API answers 413, so they fit from then on', async () => {
    const { batches, post } = recorder((events) => (events.length > 50 ? 413 : 200));
    const sink = new TelemetrySink(post);
    sink.configure(SPEC);
    for (let i = 0; i < 150; i++) sink.emit(log(`e${i}`));
    await sink.flush(10_000);
    expect(batches.every((b) => b.events.length <= 50)).toBe(true);
    expect(batches.flatMap((b) => b.events)).toHaveLength(150);
  });

  it('cuts data larger than 16 KiB and flags it truncated', () => {
    const big = boundData({ ...log('x'.repeat(40_000)), ts: 1 });
    expect(big.truncated).toBe(true);
    expect(JSON.stringify(big.data).length).toBeLessThanOrEqual(16 * 1024);
    expect(boundData({ ...log('small'), ts: 1 }).truncated).toBeUndefined();
  });
});
