import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { ApiCall } from '../../api/src/http/call-audit.js';
import { createLogger } from '../../api/src/logger.js';
import { AuditRecorder, sweepAuditLogs } from '../../api/src/modules/audit-logs/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The audit log's writer and retention. Two fakes: a database that fails every write and
 * one that never answers (the real one cannot be made to do either on demand, for one
 * INSERT); everything else is real.
 */
describe('audit logs: writer and retention', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-06-01T12:00:00Z'));
  const DAY = 86_400_000;
  const log = createLogger('silent');

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  const call = (requestId: string, at = clock.now()): ApiCall => ({
    orgId: app.tenant.orgId,
    projectId: null,
    timestamp: at,
    method: 'POST',
    path: '/proxies',
    route: '/proxies',
    service: 'proxies',
    resourceId: null,
    status: 200,
    durationMs: 1,
    requestId,
    keyId: app.tenant.adminKeyId,
    keyName: 'admin',
    clientIp: '127.0.0.1',
    domain: 'localhost',
    userAgent: 'test',
  });
  const stored = async (ids: string[]) =>
    (await app.database.db.query<{ request_id: string }>('SELECT request_id FROM audit_logs WHERE request_id = ANY($1) ORDER BY seq', [ids])).rows.map((r) => r.request_id);
  const counter = async (metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, labels: Record<string, string> = {}) =>
    (await metric.get()).values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((sum, v) => sum + v.value, 0);

  it('writes queued calls in batches, and past its bound drops and counts them instead of growing', async () => {
    const recorder = new AuditRecorder(app.deps.db, log, { queueMax: 3, batchMax: 2, flushIntervalMs: 60_000 });
    for (const id of ['bound-1', 'bound-2', 'bound-3', 'bound-4']) recorder.record(call(id));
    expect(recorder.queued).toBeLessThanOrEqual(3);
    await recorder.close();
    expect(await stored(['bound-1', 'bound-2', 'bound-3', 'bound-4'])).toEqual(['bound-1', 'bound-2', 'bound-3']);
    expect(await counter(recorder.written)).toBe(3);
    expect(await counter(recorder.dropped, { reason: 'queue_full' })).toBe(1);
  });

  it('counts and logs a failed write without throwing, retries it, and gives it up after three attempts', async () => {
    const down = { query: () => Promise.reject(new Error('database down')) };
    const recorder = new AuditRecorder(down as never, log, { queueMax: 10, flushIntervalMs: 60_000 });
    recorder.record(call('doomed-1'));
    recorder.record(call('doomed-2'));
    await recorder.flush();
    expect(recorder.queued).toBe(2);
    await recorder.flush();
    await recorder.close();
    expect(recorder.queued).toBe(0);
    expect(await counter(recorder.failed)).toBe(6);
    expect(await counter(recorder.dropped, { reason: 'write_failed' })).toBe(2);
  });

  it('stops waiting for a database that does not answer at close, counting what it could not write', async () => {
    const frozen = { query: () => new Promise(() => undefined) };
    const recorder = new AuditRecorder(frozen as never, log, { queueMax: 10, batchMax: 1, flushIntervalMs: 60_000 });
    for (const id of ['frozen-1', 'frozen-2', 'frozen-3']) recorder.record(call(id));
    await recorder.close(50);
    expect(recorder.queued).toBe(0);
    expect(await counter(recorder.dropped, { reason: 'shutdown' })).toBe(2);
  });

  it('the app\'s recorder serves its metrics on /metrics', async () => {
    await app.tenant.http.post('/org/projects', { name: 'metered' });
    await app.services.auditLog.flush();
    const metrics = await app.client().get('/metrics');
    expect(metrics.text).toMatch(/browserplane_audit_log_written_total [1-9]/);
    expect(metrics.text).toContain('browserplane_audit_log_queued 0');
  });

  it('the retention sweep deletes entries older than the retention of every org, and keeps the rest', async () => {
    const other = await app.newTenant('retained-org');
    const recorder = new AuditRecorder(app.deps.db, log, { queueMax: 100 });
    const now = clock.now().getTime();
    recorder.record(call('old-a', new Date(now - 91 * DAY)));
    recorder.record({ ...call('old-b', new Date(now - 90 * DAY - 1)), orgId: other.orgId });
    recorder.record(call('kept-a', new Date(now - 90 * DAY + 1000)));
    recorder.record(call('kept-b'));
    await recorder.close();
    expect(await sweepAuditLogs(app.deps.db, clock, 90)).toBeGreaterThanOrEqual(2);
    expect(await stored(['old-a', 'old-b', 'kept-a', 'kept-b'])).toEqual(['kept-a', 'kept-b']);
    expect(await sweepAuditLogs(app.deps.db, clock, 90)).toBe(0);
  });
});
