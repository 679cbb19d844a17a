import type { AppDeps } from '../../app-deps.js';
import { sweepTelemetry } from './service.js';

/**
 * The retention sweep runs on the telemetry paths themselves (an ingest, a list), at most
 * once per SWEEP_INTERVAL_MS per process, in the background: a DELETE by arrival time is
 * idempotent, so replicas sweeping at once only repeat each other.
 */
export const SWEEP_INTERVAL_MS = 10 * 60_000;
const lastSweep = new WeakMap<object, number>();

export function maybeSweep(deps: Pick<AppDeps, 'db' | 'clock' | 'settings' | 'log'>): void {
  const now = Date.now();
  if (now - (lastSweep.get(deps.db) ?? 0) < SWEEP_INTERVAL_MS) return;
  lastSweep.set(deps.db, now);
  sweepTelemetry(deps).then(
    (removed) => {
      if (removed > 0) deps.log.info({ removed }, 'telemetry retention sweep removed old events');
    },
    (error: unknown) => deps.log.warn({ err: error }, 'telemetry retention sweep failed'),
  );
}
