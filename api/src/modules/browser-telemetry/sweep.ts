import type { AppDeps } from '../../app-deps.js';
import { sweepTelemetry } from './service.js';

/** How often the retention sweep runs (a pass also runs at start). */
export const TELEMETRY_SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * The telemetry retention's loop, started with the service's other background work
 * (app-services.ts) and stopped before the database closes. Level-triggered: each pass
 * deletes whatever arrived before the cutoff (BROWSERPLANE_TELEMETRY_RETENTION_HOURS), so
 * a replica that was down catches up, and replicas sweeping at once only repeat each other.
 */
export class TelemetryRetentionSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly deps: Pick<AppDeps, 'db' | 'clock' | 'settings' | 'log'>,
    private readonly options: { intervalMs: number },
  ) {}

  start(): void {
    const tick = () => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
        if (this.timer) this.timer = setTimeout(tick, this.options.intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async pass(): Promise<void> {
    try {
      const removed = await sweepTelemetry(this.deps);
      if (removed > 0) this.deps.log.info({ removed }, 'telemetry events past their retention removed');
    } catch (error) {
      this.deps.log.warn({ err: error }, 'telemetry retention sweep failed; tried again next interval');
    }
  }
}
