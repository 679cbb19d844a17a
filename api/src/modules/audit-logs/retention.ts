import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { Queryable } from '../../db/pool.js';
import { Periodic } from '../../jobs/periodic.js';
import { deleteAuditRowsBefore } from './store.js';

export const DEFAULT_AUDIT_RETENTION_DAYS = 90;
export const AUDIT_SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** Rows per DELETE: a long backlog goes in short statements, never one long lock. */
const SWEEP_BATCH = 5_000;

/** Deletes every org's entries older than the retention, now and then every interval. */
export async function sweepAuditLogs(db: Queryable, clock: Clock, retentionDays: number): Promise<number> {
  const cutoff = new Date(clock.now().getTime() - retentionDays * 86_400_000);
  let total = 0;
  for (;;) {
    const deleted = await deleteAuditRowsBefore(db, cutoff, SWEEP_BATCH);
    total += deleted;
    if (deleted < SWEEP_BATCH) return total;
  }
}

/**
 * The retention sweep's loop. Level-triggered: each pass deletes whatever is past the
 * cutoff, so a replica that was down catches up, and replicas sweeping at once only
 * share the work.
 */
export function auditRetentionSweep(deps: { db: Queryable; clock: Clock; log: Logger }, options: { retentionDays: number; intervalMs: number }): Periodic {
  return new Periodic(async () => {
    try {
      const deleted = await sweepAuditLogs(deps.db, deps.clock, options.retentionDays);
      if (deleted) deps.log.info({ deleted, retention_days: options.retentionDays }, 'audit log entries past their retention deleted');
    } catch (error) {
      deps.log.error({ err: error }, 'audit log retention sweep failed; tried again next interval');
    }
  }, options.intervalMs);
}
