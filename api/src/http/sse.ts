import type { Request, Response } from 'express';
import { Session } from 'better-sse';
import { streamLife } from './sse-life.js';

/**
 * Server-Sent Events as the SDK decodes them (CONTRACT §12.5): every frame is
 * `event: <name>` plus one `data:` line holding a JSON object whose own `event` field
 * names it; heartbeats are JSON frames too; the server ends the stream by closing the
 * response, never with a `[DONE]` sentinel. better-sse does the framing, headers and
 * disconnect detection; its comment keep-alive and `retry:` preamble are turned off,
 * since these streams declare JSON heartbeats.
 */

export interface SseFrame {
  event: string;
  [field: string]: unknown;
}

export interface SseStream {
  /** Sends one frame; a no-op once the stream is closed. */
  send(frame: SseFrame): void;
  /** Ends the response (idempotent). */
  close(): void;
  readonly closed: boolean;
  /** Runs once when the stream ends, whoever ended it (client, server, shutdown). */
  onClose(listener: () => void): void;
}

export interface OpenSseOptions {
  /** Interval of the heartbeat frame, in ms. */
  heartbeatMs: number;
  /** The heartbeat frame, built at each beat. */
  heartbeat: () => SseFrame;
  /**
   * Aborted when the service shuts down: the stream then sends a last `error` frame
   * (code `server_shutting_down`) and ends, so draining does not wait on it.
   */
  shutdown: AbortSignal;
}

/** Starts the event stream on `res`: sends the 200 head at once and resolves when it is writable. */
export async function openSseStream(req: Request, res: Response, options: OpenSseOptions): Promise<SseStream> {
  const session = new Session(req, res, {
    keepAlive: null,
    retry: null,
    trustClientEventId: false,
    headers: { 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' },
  });
  await new Promise<void>((resolve) => session.once('connected', resolve));

  const onShutdown = () => {
    stream.send({
      event: 'error',
      error: { code: 'server_shutting_down', message: 'The server is shutting down; reconnect to another instance' },
      timestamp: new Date().toISOString(),
    });
    stream.close();
  };
  const life = streamLife(res, options.shutdown, onShutdown, { everyMs: options.heartbeatMs, run: () => stream.send(options.heartbeat()) });
  const stream: SseStream = {
    send(frame) {
      if (life.closed || !session.isConnected) return;
      // No id: the SDK ignores ids and these streams cannot be resumed.
      session.push(frame, frame.event, '');
    },
    close: () => life.close(),
    get closed() {
      return life.closed;
    },
    onClose: (listener) => life.onClose(listener),
  };
  session.once('disconnected', life.finish);
  if (!session.isConnected || options.shutdown.aborted) onShutdown();
  return stream;
}
