import { expect } from 'vitest';

/** One server-sent event: its `event:` name, if any, and its data parsed as JSON. */
export interface SseFrame<T = Record<string, any>> {
  name: string | undefined;
  data: T;
}

/** One event block as sent: its name and its data lines (comment lines dropped). */
export interface SseBlock {
  name: string | undefined;
  data: string[];
  text: string;
}

/** The blocks of an event-stream body as they arrive; a block with neither data nor a name (a comment, a keep-alive) is skipped. */
export async function* sseBlocks(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseBlock> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const text = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const lines = text.split('\n').filter((l) => !l.startsWith(':'));
      const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
      const name = lines.find((l) => l.startsWith('event:'))?.slice(6).trim();
      if (!data.length && name === undefined) continue;
      yield { name, data, text };
    }
  }
}

export interface SseStream<T> {
  res: Response;
  frames: SseFrame<T>[];
  /** The frames' data alone, in order. */
  payloads: T[];
  /** Waits for the n-th frame (1-based); fails at once if the stream ended before it. */
  frame(n: number, timeoutMs?: number): Promise<SseFrame<T>>;
  /** Settles when the stream has ended (or was aborted). */
  ended: Promise<void>;
  abort(): void;
}

export interface OpenSseOptions {
  /** Sent as `authorization: Bearer <key>`. */
  key?: string;
  headers?: Record<string, string>;
  /** Aborts the request too, as abort() does. */
  signal?: AbortSignal;
}

/**
 * A raw SSE reader, read the way a client does: every frame must carry one JSON data line
 * (what the SDK requires), asserted as it comes. A response that is not an event stream
 * (a JSON error) is left unread.
 */
export async function openSse<T = Record<string, any>>(url: string, options: OpenSseOptions = {}): Promise<SseStream<T>> {
  const controller = new AbortController();
  const signal = options.signal ? AbortSignal.any([controller.signal, options.signal]) : controller.signal;
  const res = await fetch(url, {
    headers: { ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }), accept: 'text/event-stream', ...options.headers },
    signal,
  });
  const frames: SseFrame<T>[] = [];
  const payloads: T[] = [];
  let notify = () => {};
  let done = false;
  const ended = (async () => {
    if (!res.body || !res.headers.get('content-type')?.startsWith('text/event-stream')) return;
    try {
      for await (const block of sseBlocks(res.body)) {
        expect(block.data, block.text).toHaveLength(1);
        const data = JSON.parse(block.data[0]!) as T;
        frames.push({ name: block.name, data });
        payloads.push(data);
        notify();
      }
    } catch (error) {
      if (!signal.aborted) throw error;
    } finally {
      done = true;
      notify();
    }
  })();
  const frame = async (n: number, timeoutMs = 5000): Promise<SseFrame<T>> => {
    const deadline = Date.now() + timeoutMs;
    while (frames.length < n) {
      if (done) throw new Error(`stream ended after ${frames.length} frames: ${JSON.stringify(frames)}`);
      if (Date.now() > deadline) throw new Error(`no frame ${n} within ${timeoutMs} ms: ${JSON.stringify(frames)}`);
      await new Promise<void>((resolve) => {
        notify = resolve;
        setTimeout(resolve, 50);
      });
    }
    return frames[n - 1]!;
  };
  return { res, frames, payloads, frame, ended, abort: () => controller.abort() };
}
