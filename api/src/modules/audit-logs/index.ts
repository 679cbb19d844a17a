/** The audit-logs module's facade: its module descriptor, the recorder the route chain feeds, the retention sweep. */
export { auditLogsModule } from './module.js';
export { AuditRecorder, DEFAULT_AUDIT_QUEUE_MAX } from './recorder.js';
export { auditRetentionSweep, AUDIT_SWEEP_INTERVAL_MS, DEFAULT_AUDIT_RETENTION_DAYS, sweepAuditLogs } from './retention.js';
export { listAuditLogs, exportAuditChunk, presentAuditLogEntry } from './service.js';
