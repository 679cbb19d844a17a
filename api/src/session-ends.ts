import client from 'prom-client';

/**
 * browserplane_browser_sessions_ended_total{reason}: counted by the replica that ends a
 * session, where it ends it (after the row is marked ended), so the counters of N replicas
 * add up to the service's total and none counts another's. Reasons are DELETE_REASONS, a
 * bounded set. Unregistered until the app registers it (one per app: tests build many).
 */
export class SessionEnds {
  readonly counter = new client.Counter({
    name: 'browserplane_browser_sessions_ended_total',
    help: 'Browser sessions this replica ended, by reason (deleted, idle_timeout, browser_crashed, launch_failed, pool_released, …)',
    labelNames: ['reason'] as const,
    registers: [],
  });

  /** `count` sessions ended for `reason` (none: nothing is counted). */
  ended(reason: string, count = 1): void {
    if (count > 0) this.counter.inc({ reason }, count);
  }
}
