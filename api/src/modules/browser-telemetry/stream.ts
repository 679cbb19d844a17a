import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import { DEFAULT_SSE_HEARTBEAT_MS } from '../../events/follow-row.js';
import { lastEventId, openResumableSse, type ResumableSseStream } from '../../http/sse-resumable.js';
import { INGEST_GRACE_MS, telemetryChannel } from './service.js';
import { eventsAfter, findIngestSession, lastSeq } from './store.js';

/** Rows read per query while catching up. */
const READ_BATCH = 500;
/** How often a stream checks whether its session has ended (and then closes). */
const END_CHECK_MS = 5000;

/**
 * GET /browsers/{id}/telemetry/stream: where to start (Last-Event-ID, else replay=all from
 * the oldest, else after the newest), then every event committed after it, in seq order.
 * A notification (any replica's ingest) wakes the stream, which reads everything after the
 * last seq it sent: notifications only say "something arrived", and a reconnect of the
 * listener (which may have missed some) reads the same way, so nothing is lost or sent
 * twice. Writers of one session are serialised (service.ts), so seq order is commit order.
 */
export async function streamTelemetry(
  deps: AppDeps,
  sessionId: string,
  http: { req: Request; res: Response },
  options: { replayAll: boolean },
): Promise<void> {
  const resume = lastEventId(http.req);
  let after = resume ?? (options.replayAll ? 0 : await lastSeq(deps.db, sessionId));
  let pumping = Promise.resolve();
  let ending = false;
  const open: { stream?: ResumableSseStream } = {};
  const pump = () => {
    pumping = pumping.then(async () => {
      for (;;) {
        // Before the stream opens, the first pump after it covers this wake-up.
        const stream = open.stream;
        if (!stream || stream.closed) return;
        const rows = await eventsAfter(deps.db, sessionId, after, READ_BATCH);
        for (const row of rows) {
          stream.send(row.seq, row);
          after = row.seq;
        }
        if (rows.length < READ_BATCH) break;
      }
      if (ending) open.stream?.close();
    }).catch((error: unknown) => {
      deps.log.warn({ err: error, sessionId }, 'telemetry stream failed to read events');
      open.stream?.close();
    });
  };
  const checkEnded = async () => {
    const session = await findIngestSession(deps.db, sessionId).catch(() => undefined);
    if (!session || (session.deleted_at !== null && deps.clock.now().getTime() - session.deleted_at.getTime() > INGEST_GRACE_MS)) {
      ending = true;
      pump();
    }
  };
  // Subscribed before the first read, so an event between the two is not missed.
  const unsubscribe = await deps.events.subscribe(telemetryChannel(sessionId), pump, pump);
  const stream = (open.stream = openResumableSse(http.req, http.res, { keepaliveMs: deps.settings.sseHeartbeatMs ?? DEFAULT_SSE_HEARTBEAT_MS, shutdown: deps.shutdown }));
  const endTimer = setInterval(() => void checkEnded(), END_CHECK_MS);
  stream.onClose(() => {
    clearInterval(endTimer);
    unsubscribe().catch((error: unknown) => deps.log.warn({ err: error, sessionId }, 'unsubscribing a telemetry stream failed'));
  });
  pump();
  await checkEnded();
}
