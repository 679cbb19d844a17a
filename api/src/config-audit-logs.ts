import { z } from 'zod';
import { DEFAULT_AUDIT_QUEUE_MAX } from './modules/audit-logs/recorder.js';
import { DEFAULT_AUDIT_RETENTION_DAYS } from './modules/audit-logs/retention.js';

/** Settings of the audit log (docs/audit-logs.md), spread into config.ts's schema. */
export const auditLogFields = {
  BROWSERPLANE_AUDIT_LOG_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .max(36_500)
    .default(DEFAULT_AUDIT_RETENTION_DAYS)
    .describe('Days an audit log entry is kept; older ones are deleted by an hourly sweep'),
  BROWSERPLANE_AUDIT_LOG_QUEUE_MAX: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(DEFAULT_AUDIT_QUEUE_MAX)
    .describe('Audit log entries a replica holds while they wait to be written (batched every 250 ms); past it, entries are dropped and counted in browserplane_audit_log_dropped_total'),
};
