import type { LogStream } from '../sandbox.js';
import { SubjectEndedError, type WireClient } from './wire-client.js';

/**
 * Ships a build's or a run's log lines to POST /internal/app-jobs/logs: batched every
 * ~250 ms (a line shows in the event stream about as soon as it did in embedded mode)
 * and at the end, at most 500 lines a request, one request at a time so lines keep
 * their order. A batch the API cannot take after the client's retries is dropped with a
 * note on the pod's own stderr: losing log lines must not fail the build or the run.
 */

export interface LogLine {
  stream: LogStream;
  message: string;
  timestamp: string;
}

export interface LogShipper {
  push(stream: LogStream, message: string): void;
  /** Ships what is left and stops. */
  close(): Promise<void>;
}

export const LOG_BATCH_LINES = 500;
const FLUSH_MS = 250;

export function createLogShipper(client: WireClient, options: { onEnded: () => void; intervalMs?: number }): LogShipper {
  let pending: LogLine[] = [];
  let sending: Promise<void> = Promise.resolve();
  let ended = false;
  let busy = false;

  const ship = (): Promise<void> => {
    busy = true;
    sending = sending.then(async () => {
      while (pending.length > 0 && !ended) {
        const lines = pending.slice(0, LOG_BATCH_LINES);
        pending = pending.slice(lines.length);
        try {
          await client.postJson('/internal/app-jobs/logs', { lines });
        } catch (error) {
          if (error instanceof SubjectEndedError) {
            // The deployment was deleted or the invocation ended: nothing more is wanted.
            ended = true;
            pending = [];
            options.onEnded();
            return;
          }
          process.stderr.write(`browserplane pod: ${lines.length} log lines dropped: ${error instanceof Error ? error.message : String(error)}\n`);
        }
      }
    }).finally(() => {
      busy = false;
    });
    return sending;
  };
  const timer = setInterval(() => {
    if (pending.length > 0 && !busy) void ship();
  }, options.intervalMs ?? FLUSH_MS);

  return {
    push(stream, message) {
      if (ended) return;
      pending.push({ stream, message, timestamp: new Date().toISOString() });
    },
    async close() {
      clearInterval(timer);
      await ship();
    },
  };
}
