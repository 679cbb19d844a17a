import client from 'prom-client';
import type { Logger } from 'pino';
import type { Queryable } from '../../db/pool.js';
import type { ApiCall, CallRecorder } from '../../http/call-audit.js';
import { insertCalls } from './store.js';

export const DEFAULT_AUDIT_QUEUE_MAX = 10_000;
/** How long a recorded call waits for company before its batch is written. */
export const AUDIT_FLUSH_INTERVAL_MS = 250;
/** Calls per INSERT; a full batch is written at once. */
export const AUDIT_BATCH_MAX = 500;
/** How long close() waits for the last writes. */
export const AUDIT_CLOSE_DEADLINE_MS = 5_000;
/** A batch that failed this many times is given up (and counted): a poison row must not block the rest. */
const MAX_ATTEMPTS = 3;

interface Pending {
  call: ApiCall;
  attempts: number;
}

/**
 * Writes the route chain's calls to the audit log in batches, off the request path:
 * `record` only queues. The queue is bounded (`queueMax`): past it, calls are dropped and
 * counted rather than holding memory or slowing requests while the database is away. A
 * failed write is logged and counted, and its calls are tried again with the next batch
 * (at most MAX_ATTEMPTS times). `close` writes whatever is queued.
 */
export class AuditRecorder implements CallRecorder {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private closed = false;
  readonly written = new client.Counter({ name: 'browserplane_audit_log_written_total', help: 'Audit log entries written', registers: [] });
  readonly failed = new client.Counter({
    name: 'browserplane_audit_log_write_failures_total',
    help: 'Failed audit log writes (each batch attempt), by entries in the batch',
    registers: [],
  });
  readonly dropped = new client.Counter({
    name: 'browserplane_audit_log_dropped_total',
    help: 'Audit log entries given up: the queue was full, their write failed every attempt, or shutdown came first',
    labelNames: ['reason'] as const,
    registers: [],
  });

  constructor(
    private readonly db: Queryable,
    private readonly log: Logger,
    private readonly options: { queueMax: number; flushIntervalMs?: number; batchMax?: number },
  ) {}

  registerMetrics(registry: client.Registry): void {
    for (const metric of [this.written, this.failed, this.dropped]) registry.registerMetric(metric);
    const queued = () => this.queue.length;
    new client.Gauge({
      name: 'browserplane_audit_log_queued',
      help: 'Audit log entries waiting to be written',
      registers: [registry],
      collect() {
        this.set(queued());
      },
    });
  }

  record(call: ApiCall): void {
    if (this.queue.length >= this.options.queueMax) {
      this.dropped.inc({ reason: 'queue_full' });
      this.log.warn({ request_id: call.requestId }, 'audit log queue full: entry dropped');
      return;
    }
    this.queue.push({ call, attempts: 0 });
    if (this.queue.length >= this.batchMax) this.schedule(0);
    else this.schedule(this.options.flushIntervalMs ?? AUDIT_FLUSH_INTERVAL_MS);
  }

  /** Entries waiting to be written. */
  get queued(): number {
    return this.queue.length;
  }

  /** Writes everything queued now (tests read the log after this; shutdown calls it through close). */
  async flush(): Promise<void> {
    this.clearTimer();
    while (this.writing) await this.writing;
    while (this.queue.length) {
      this.writing = this.writeBatch();
      try {
        await this.writing;
      } finally {
        this.writing = undefined;
      }
      if (this.queue.length && this.queue[0]!.attempts > 0) break;
    }
    if (this.queue.length) this.schedule(this.options.flushIntervalMs ?? AUDIT_FLUSH_INTERVAL_MS);
  }

  /**
   * Writes what is queued, waiting at most `deadlineMs` (a database that does not answer
   * must not hold a shutdown); what is left then is logged and counted as dropped.
   */
  async close(deadlineMs = AUDIT_CLOSE_DEADLINE_MS): Promise<void> {
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), deadlineMs);
    });
    const outcome = await Promise.race([this.flush(), deadline]);
    clearTimeout(timer);
    this.clearTimer();
    if (outcome === 'late' && this.queue.length) {
      this.dropped.inc({ reason: 'shutdown' }, this.queue.length);
      this.log.error({ entries: this.queue.length }, 'audit log entries not written before shutdown');
      this.queue = [];
    }
  }

  private get batchMax(): number {
    return this.options.batchMax ?? AUDIT_BATCH_MAX;
  }

  private schedule(delayMs: number): void {
    if (this.closed || (this.timer && delayMs > 0)) return;
    this.clearTimer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async writeBatch(): Promise<void> {
    const batch = this.queue.splice(0, this.batchMax);
    try {
      await insertCalls(
        this.db,
        batch.map((p) => p.call),
      );
      this.written.inc(batch.length);
    } catch (error) {
      this.failed.inc(batch.length);
      const retry = batch.filter((p) => ++p.attempts < MAX_ATTEMPTS);
      const given = batch.length - retry.length;
      if (given) this.dropped.inc({ reason: 'write_failed' }, given);
      // Back to the front, within the bound: the oldest calls stay first.
      this.queue.unshift(...retry.slice(0, Math.max(0, this.options.queueMax - this.queue.length)));
      this.log.error({ err: error, entries: batch.length, given_up: given }, 'could not write audit log entries');
    }
  }
}
