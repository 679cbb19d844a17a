import type { AppDeps } from '../../app-deps.js';
import { Periodic } from '../../jobs/periodic.js';
import { sweepTelemetry } from './service.js';

/** How often the retention sweep runs (a pass also runs at start). */
export const TELEMETRY_SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * The telemetry retention's loop, started with the service's other background work
 * (app-services.ts) and stopped before the database closes. Level-triggered: each pass
 * deletes whatever arrived before the cutoff (BROWSERPLANE_TELEMETRY_RETENTION_HOURS), so
 * a replica that was down catches up, and replicas sweeping at once only repeat each other.
 */
export function telemetryRetentionSweep(deps: Pick<AppDeps, 'db' | 'clock' | 'settings' | 'log'>, options: { intervalMs: number }): Periodic {
  return new Periodic(async () => {
    try {
      const removed = await sweepTelemetry(deps);
      if (removed > 0) deps.log.info({ removed }, 'telemetry events past their retention removed');
    } catch (error) {
      deps.log.warn({ err: error }, 'telemetry retention sweep failed; tried again next interval');
    }
  }, options.intervalMs);
}
