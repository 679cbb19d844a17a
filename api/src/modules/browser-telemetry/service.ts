import type { AppDeps } from '../../app-deps.js';
import { DEFAULT_TELEMETRY_SETTINGS, type TelemetrySettings } from '../../config-telemetry.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { channelName } from '../../events/hub.js';
import { capturedCategories, type TelemetryEvent } from '../../../../contract/telemetry.js';
import { insertEvents, sweepBefore, trimSession, type IngestSession } from './store.js';

/**
 * Storing telemetry: the agent's batches (ingest-routes.ts) and the API's own control
 * events go through `appendEvents`, which keeps only the categories the session has on
 * now (the agent may lag a PATCH by a moment), serialises writers of one session (so seq
 * order is commit order and a stream reading "after seq N" never skips one committed
 * later), trims the session to its cap, and notifies every replica's streams.
 */

export const telemetryChannel = (sessionId: string) => channelName('telemetry', sessionId);

/** An ended session's agent may still flush its last batch (cdp_disconnect, service_crashed) this long after. */
export const INGEST_GRACE_MS = 60_000;

export function telemetrySettings(deps: Pick<AppDeps, 'settings'>): TelemetrySettings {
  return deps.settings.telemetry ?? DEFAULT_TELEMETRY_SETTINGS;
}

export function enabledOn(session: Pick<IngestSession, 'telemetry'>): Set<string> {
  const browser = session.telemetry?.browser ?? {};
  return capturedCategories(Object.entries(browser).filter(([, toggle]) => toggle?.enabled === true).map(([category]) => category));
}

export async function appendEvents(
  deps: Pick<AppDeps, 'db' | 'events' | 'clock' | 'settings'>,
  session: IngestSession,
  events: TelemetryEvent[],
): Promise<{ stored: number; refused: number }> {
  const enabled = enabledOn(session);
  const kept = events.filter((event) => enabled.has(event.category));
  if (kept.length === 0) return { stored: 0, refused: events.length };
  const max = telemetrySettings(deps).maxEventsPerSession;
  await inTransaction(deps.db, async (tx) => {
    await lockSession(tx, session.id);
    await insertEvents(tx, session, kept.slice(-max), deps.clock.now());
    await trimSession(tx, session.id, max);
    await deps.events.publish(telemetryChannel(session.id), { id: session.id }, tx);
  });
  return { stored: Math.min(kept.length, max), refused: events.length - kept.length };
}

async function lockSession(tx: Queryable, sessionId: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext('telemetry:' || $1))", [sessionId]);
}

/** Removes events older than the retention; run by the sweep (sweep.ts). */
export async function sweepTelemetry(deps: Pick<AppDeps, 'db' | 'clock' | 'settings'>): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - telemetrySettings(deps).retentionHours * 3_600_000);
  return sweepBefore(deps.db, cutoff);
}
