import { expect, vi } from 'vitest';
import { sseBlocks } from '../support/sse.js';
import type { HttpClient } from '../support/http.js';

/** Telemetry's wire as the tests read it. */
export interface Envelope {
  seq: number;
  event: { category: string; type: string; ts: number; source: { kind: string; event?: string }; data?: Record<string, any>; truncated?: boolean };
}

export interface IdFrame {
  id: string | undefined;
  name: string | undefined;
  data: Envelope;
}

/** A raw reader of the telemetry stream that keeps each frame's id line and whether it had an event line. */
export async function openTelemetryStream(url: string, key: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const frames: IdFrame[] = [];
  const ended = (async () => {
    if (!res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) return;
    try {
      for await (const block of sseBlocks(res.body)) {
        expect(block.data, block.text).toHaveLength(1);
        const id = /^id: ?(.*)$/m.exec(block.text)?.[1];
        frames.push({ id, name: block.name, data: JSON.parse(block.data[0]!) as Envelope });
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  })();
  return { res, frames, ended, abort: () => controller.abort() };
}

/** All of a session's events (order asc, no since window: offset=0 turns it off), every page. */
export async function allEvents(client: HttpClient, sessionId: string, extra = ''): Promise<Envelope[]> {
  const out: Envelope[] = [];
  let offset = 0;
  for (;;) {
    const res = await client.get(`/browsers/${sessionId}/telemetry/events?limit=100&offset=${offset}${extra}`);
    expect(res.status, res.text).toBe(200);
    out.push(...(res.body as Envelope[]));
    if (res.headers.get('x-has-more') !== 'true') return out;
    offset = Number(res.headers.get('x-next-offset'));
  }
}

/** Waits until the session's stored events satisfy `check`, then returns them. */
export function eventuallyEvents(client: HttpClient, sessionId: string, check: (events: Envelope[]) => void, timeoutMs = 20_000): Promise<Envelope[]> {
  return vi.waitFor(
    async () => {
      const events = await allEvents(client, sessionId);
      check(events);
      return events;
    },
    { timeout: timeoutMs, interval: 200 },
  );
}

export const ofType = (events: Envelope[], type: string) => events.filter((e) => e.event.type === type);
