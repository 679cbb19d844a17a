import type { Response } from 'express';

/**
 * The end of an event stream, as both writers (sse.ts, sse-resumable.ts) keep it: it ends
 * once, whoever ends it (client, server, shutdown); then its timer stops, its shutdown
 * listener goes and its close listeners run, each once.
 */
export interface StreamLife {
  readonly closed: boolean;
  /** Ends the response (idempotent). */
  close(): void;
  /** Runs once when the stream ends; at once if it has. */
  onClose(listener: () => void): void;
  /** For the transport's own disconnect event: the stream ended without close(). */
  finish(this: void): void;
}

export function streamLife(res: Response, shutdown: AbortSignal, onShutdown: () => void, beat: { everyMs: number; run: () => void }): StreamLife {
  const listeners: Array<() => void> = [];
  let closed = false;
  const timer = setInterval(beat.run, beat.everyMs);
  const life: StreamLife = {
    get closed() {
      return closed;
    },
    close() {
      if (!res.writableEnded) res.end();
      life.finish();
    },
    onClose(listener) {
      if (closed) listener();
      else listeners.push(listener);
    },
    finish() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      shutdown.removeEventListener('abort', onShutdown);
      for (const listener of listeners.splice(0)) listener();
    },
  };
  shutdown.addEventListener('abort', onShutdown, { once: true });
  return life;
}
