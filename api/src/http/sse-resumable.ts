import type { Request, Response } from 'express';
import { streamLife } from './sse-life.js';

/**
 * A resumable Server-Sent Events stream, as Kernel's telemetry stream frames it (CONTRACT
 * §2.4): each frame is `id: <seq>` plus one `data:` line of JSON, with no `event:` line;
 * keepalives are comment lines (`: keepalive`), not JSON frames. A client resumes by
 * sending the last id it saw as Last-Event-ID. The other streams (sse.ts) declare JSON
 * heartbeats and no ids, so this is a writer of its own rather than an option there.
 */
export interface ResumableSseStream {
  /** Sends one frame; a no-op once closed. */
  send(id: number, data: unknown): void;
  close(): void;
  readonly closed: boolean;
  onClose(listener: () => void): void;
}

export interface ResumableSseOptions {
  keepaliveMs: number;
  /** Runs at each keepalive (after the comment is written), e.g. to check the resource still lives. */
  onKeepalive?: () => void;
  /** Aborted at shutdown: the stream ends, and the client resumes elsewhere with Last-Event-ID. */
  shutdown: AbortSignal;
}

/** The Last-Event-ID header as a non-negative integer, or undefined when absent or not one. */
export function lastEventId(req: Request): number | undefined {
  const raw = req.get('last-event-id');
  if (raw === undefined || !/^\d{1,16}$/.test(raw.trim())) return undefined;
  return Number(raw.trim());
}

export function openResumableSse(req: Request, res: Response, options: ResumableSseOptions): ResumableSseStream {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  res.socket?.setNoDelay(true);
  const onShutdown = () => life.close();
  const life = streamLife(res, options.shutdown, onShutdown, {
    everyMs: options.keepaliveMs,
    run: () => {
      if (life.closed || res.writableEnded) return;
      res.write(': keepalive\n\n');
      options.onKeepalive?.();
    },
  });
  const stream: ResumableSseStream = {
    send(id, data) {
      if (life.closed || res.writableEnded) return;
      res.write(`id: ${id}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    close: () => life.close(),
    get closed() {
      return life.closed;
    },
    onClose: (listener) => life.onClose(listener),
  };
  req.on('close', life.finish);
  res.on('close', life.finish);
  if (options.shutdown.aborted) onShutdown();
  return stream;
}
