import http from 'node:http';
import https from 'node:https';
import type { Logger } from 'pino';
import type { TelemetryCategory, TelemetryEvent, TelemetrySpec } from '../../../contract/telemetry.js';
import { capturedCategories, TELEMETRY_MAX_SCREENSHOT_BYTES } from '../../../contract/telemetry-capture.js';

/**
 * Where the agent's telemetry goes: events of the enabled categories are queued and POSTed
 * to the API's side door in batches (every FLUSH_MS or FLUSH_EVENTS events). The queue is
 * bounded: while the API cannot be reached, the oldest events are dropped and counted, and
 * the count goes with the next batch that gets through. One per agent (module state), so the
 * CDP bridge, the live view and the capture emit without being handed it; until configured,
 * every emit is a no-op.
 */

export const FLUSH_MS = 500;
export const FLUSH_EVENTS = 200;
/** Events held while the API is unreachable; the oldest go first. */
export const MAX_QUEUED = 5000;
const MAX_BATCH = 500;
/** Under the API's default body limit (1 MiB), whatever the events hold. */
const MAX_BATCH_BYTES = 768 * 1024;
const POST_TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 10_000;
/** Data larger than this (as JSON) is cut down: strings shortened, then the data replaced. */
const MAX_DATA_BYTES = 16 * 1024;
const MAX_STRING = 2048;

export type TelemetryPost = (url: string, body: string, signal: AbortSignal) => Promise<{ ok: boolean; status: number }>;

/** node:http, not fetch: the agent runs with --jitless, where fetch() throws. */
const httpPost: TelemetryPost = (url, body, signal) => {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(target, { method: 'POST', signal, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
      response.resume();
      response.once('end', () => resolve({ ok: (response.statusCode ?? 0) < 300, status: response.statusCode ?? 0 }));
      response.once('error', reject);
    });
    request.once('error', reject);
    request.end(body);
  });
};

export class TelemetrySink {
  private spec?: TelemetrySpec;
  private enabledSet = new Set<string>();
  private queue: TelemetryEvent[] = [];
  private dropped = 0;
  private timer?: NodeJS.Timeout;
  private sending?: Promise<void>;
  private failures = 0;
  /** Halved at each 413 (the API's body limit is a setting): batches stay under it from then on. */
  private batchCap = MAX_BATCH;
  private listeners: ((categories: ReadonlySet<string>) => void)[] = [];
  log?: Logger;

  constructor(private readonly post: TelemetryPost = httpPost) {}

  /** Replaces what is captured and where it goes (launch spec, then POST /settings). */
  configure(spec: TelemetrySpec | undefined): void {
    this.spec = spec;
    this.enabledSet = capturedCategories(spec?.categories ?? []);
    for (const listener of this.listeners) listener(this.enabledSet);
  }

  onConfigure(listener: (categories: ReadonlySet<string>) => void): void {
    this.listeners.push(listener);
  }

  enabled(category: TelemetryCategory): boolean {
    return this.enabledSet.has(category);
  }

  /** Queues an event of an enabled category (others are dropped here, never sent). */
  emit(event: Omit<TelemetryEvent, 'ts'> & { ts?: number }): void {
    if (!this.spec || !this.enabledSet.has(event.category)) return;
    const bounded = boundData({ ...event, ts: event.ts ?? nowMicros() });
    this.queue.push(bounded);
    if (this.queue.length > MAX_QUEUED) {
      this.queue.splice(0, this.queue.length - MAX_QUEUED);
      this.dropped += 1;
    }
    if (this.queue.length >= FLUSH_EVENTS) this.kick(0);
    else this.kick(FLUSH_MS);
  }

  /** Sends what is queued (one attempt per batch), for shutdown: bounded by `timeoutMs`. */
  async flush(timeoutMs = 3000): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0 && Date.now() < deadline) {
      await this.sending;
      if (!(await this.sendBatch(Math.max(100, deadline - Date.now())))) break;
    }
  }

  stats(): { queued: number; dropped: number } {
    return { queued: this.queue.length, dropped: this.dropped };
  }

  private kick(delayMs: number): void {
    if (this.timer || this.sending) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.sending = this.drain().finally(() => {
        this.sending = undefined;
        if (this.queue.length > 0) this.kick(this.failures > 0 ? Math.min(MAX_BACKOFF_MS, FLUSH_MS * 2 ** this.failures) : FLUSH_MS);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && (await this.sendBatch(POST_TIMEOUT_MS)));
  }

  /** One batch; true when it was taken (or refused for good), false to retry later. */
  private async sendBatch(timeoutMs: number): Promise<boolean> {
    const spec = this.spec;
    if (!spec) {
      this.queue = [];
      return true;
    }
    const batch = takeBatch(this.queue, this.batchCap);
    const dropped = this.dropped;
    try {
      const answer = await this.post(spec.ingestUrl, JSON.stringify({ events: batch, dropped }), AbortSignal.timeout(timeoutMs));
      if (answer.status === 413 && batch.length > 1) {
        this.batchCap = Math.max(1, Math.floor(batch.length / 2));
        return true;
      }
      // 4xx other than 429: this batch will never be taken (session ended, token refused); drop it.
      if (answer.ok || (answer.status >= 400 && answer.status < 500 && answer.status !== 429)) {
        if (!answer.ok) this.log?.warn({ status: answer.status, events: batch.length }, 'telemetry batch refused by the API: dropped');
        this.queue.splice(0, batch.length);
        this.dropped -= dropped;
        this.failures = 0;
        return true;
      }
      this.failures += 1;
      return false;
    } catch (error) {
      this.failures += 1;
      if (this.failures === 1) this.log?.warn({ err: error }, 'telemetry could not reach the API; holding events');
      return false;
    }
  }
}

function takeBatch(queue: TelemetryEvent[], cap: number): TelemetryEvent[] {
  let bytes = 0;
  let count = 0;
  while (count < queue.length && count < cap) {
    bytes += JSON.stringify(queue[count]).length + 1;
    if (bytes > MAX_BATCH_BYTES && count > 0) break;
    count += 1;
  }
  return queue.slice(0, count);
}

export function nowMicros(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/**
 * Keeps an event's data under MAX_DATA_BYTES: long strings are cut first, then the data is
 * dropped. A screenshot has its own bound (its producer keeps the PNG under it; a cut PNG
 * would be no image).
 */
export function boundData(event: TelemetryEvent): TelemetryEvent {
  if (event.data === undefined) return event;
  const limit = event.type === 'monitor_screenshot' ? TELEMETRY_MAX_SCREENSHOT_BYTES + 1024 : MAX_DATA_BYTES;
  if (JSON.stringify(event.data).length <= limit) return event;
  const cut = shorten(event.data) as Record<string, unknown>;
  if (JSON.stringify(cut).length <= MAX_DATA_BYTES) return { ...event, data: cut, truncated: true };
  const kept: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(cut)) if (typeof value !== 'object' || value === null) kept[key] = value;
  return { ...event, data: JSON.stringify(kept).length <= MAX_DATA_BYTES ? kept : {}, truncated: true };
}

function shorten(value: unknown): unknown {
  if (typeof value === 'string') return value.length > MAX_STRING ? value.slice(0, MAX_STRING) : value;
  if (Array.isArray(value)) return value.slice(0, 50).map(shorten);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shorten(v)]));
  return value;
}

/** The agent's one sink. */
export const telemetry = new TelemetrySink();
