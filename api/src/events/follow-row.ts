import type { Request, Response } from 'express';
import type { AppDeps } from '../app-deps.js';
import { openSseStream, type SseStream } from '../http/sse.js';
import { CoalescedReads } from './coalesced-reads.js';

/** Interval of `sse_heartbeat` frames when AppSettings.sseHeartbeatMs is unset. */
export const DEFAULT_SSE_HEARTBEAT_MS = 15_000;

export type FollowDeps = Pick<AppDeps, 'events' | 'clock' | 'log' | 'shutdown' | 'settings'>;

/** What a follower does with each fresh read: sends frames on `out`, closes it when the row is done. */
export type RowStep<T> = (row: T, out: SseStream, timestamp: () => string) => Promise<void> | void;

export interface RowToFollow<T> {
  /** The change-notification channel of the row (level-triggered: it only says "changed"). */
  channel: string;
  read: () => Promise<T>;
  /**
   * Streams of this follower with the same key share each re-read (see CoalescedReads).
   * The key must name everything the read depends on (the tenant too); without one, each
   * stream reads on its own.
   */
  sharedReadKey?: string | undefined;
  step: RowStep<T>;
  /** Fields the failure logs carry (e.g. the row's id). */
  logFields: Record<string, unknown>;
  /** Words of the failure logs and the `error` frame's message. */
  failure: { log: string; message: string; unsubscribeLog: string };
  /** Overrides AppSettings.sseHeartbeatMs (tests that want fast beats). */
  heartbeatMs?: number | undefined;
}

export interface RowFollower {
  /**
   * Sends the row's state first, then its changes, until `step` closes the stream, the
   * client leaves or the service shuts down. Each notification, and each reconnect of the
   * listener (which may have missed some), re-reads the row.
   */
  follow<T>(row: RowToFollow<T>, http: { req: Request; res: Response }): Promise<void>;
}

/**
 * One per app (or per set of routes): the streams it serves share their re-reads, since a
 * notification reaches every stream following the row at once.
 */
export function createRowFollower(deps: FollowDeps): RowFollower {
  const reads = new CoalescedReads<unknown>();
  return {
    async follow<T>(row: RowToFollow<T>, http: { req: Request; res: Response }) {
      const timestamp = () => deps.clock.now().toISOString();
      const key = row.sharedReadKey;
      const read = key === undefined ? row.read : () => reads.fresh(key, row.read) as Promise<T>;
      let stream: SseStream | undefined;
      let pending = Promise.resolve();
      const sendCurrentState = async (out: SseStream) => {
        try {
          await row.step(await read(), out, timestamp);
        } catch (error) {
          deps.log.error({ err: error, ...row.logFields }, row.failure.log);
          out.send({ event: 'error', error: { code: 'internal_error', message: row.failure.message }, timestamp: timestamp() });
          out.close();
        }
      };
      const refresh = () => {
        pending = pending.then(() => (stream && !stream.closed ? sendCurrentState(stream) : undefined));
      };

      // Subscribe before the first read: a change between the two is then not lost.
      const unsubscribe = await deps.events.subscribe(row.channel, refresh, refresh);
      try {
        stream = await openSseStream(http.req, http.res, {
          heartbeatMs: row.heartbeatMs ?? deps.settings.sseHeartbeatMs ?? DEFAULT_SSE_HEARTBEAT_MS,
          heartbeat: () => ({ event: 'sse_heartbeat', timestamp: timestamp() }),
          shutdown: deps.shutdown,
        });
      } catch (error) {
        await unsubscribe();
        throw error;
      }
      stream.onClose(() => {
        unsubscribe().catch((error: unknown) => deps.log.warn({ err: error, ...row.logFields }, row.failure.unsubscribeLog));
      });
      refresh();
    },
  };
}
