import type { AppDeps } from '../../app-deps.js';
import type { Queryable } from '../../db/pool.js';
import { channelName } from '../../events/hub.js';
import { appendDeploymentEvents } from '../apps/deployments-store.js';
import { invocationChannel } from './service.js';

/** An app's log line as the events stream sends it (the SDK's LogEvent). */
export interface LogFrame {
  event: 'log';
  message: string;
  timestamp: string;
}

const FLUSH_MS = 200;
const FLUSH_LINES = 200;

/**
 * Collects a run's stdout and stderr lines and writes them to invocation_events in
 * batches (one INSERT per 200 ms or 200 lines, not one per line), each followed by a
 * notification that wakes the invocation's event streams. The same lines go to the
 * deployment's event log too: `kernel logs <app>` reads an app's runtime log from
 * GET /deployments/{id}/events, not from each invocation.
 */
export class InvocationLogWriter {
  private pending: LogFrame[] = [];
  private timer: NodeJS.Timeout | undefined;
  private chain = Promise.resolve();

  constructor(
    private readonly deps: Pick<AppDeps, 'db' | 'events' | 'log' | 'clock'>,
    private readonly invocationId: string,
    private readonly deploymentId: string | null = null,
  ) {}

  add = (_stream: 'stdout' | 'stderr', message: string): void => {
    this.pending.push({ event: 'log', message, timestamp: this.deps.clock.now().toISOString() });
    if (this.pending.length >= FLUSH_LINES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  };

  /** Writes what is pending and waits for every write so far. */
  async close(): Promise<void> {
    this.flush();
    await this.chain;
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    this.chain = this.chain.then(async () => {
      try {
        await this.deps.db.query(
          `INSERT INTO invocation_events (invocation_id, at, event)
           SELECT $1, (e->>'timestamp')::timestamptz, e FROM jsonb_array_elements($2::jsonb) AS e`,
          [this.invocationId, JSON.stringify(batch)],
        );
        await this.deps.events.publish(invocationChannel(this.invocationId), { id: this.invocationId, logs: batch.length });
        if (this.deploymentId !== null) {
          await appendDeploymentEvents(this.deps.db, this.deploymentId, batch.map((event) => ({ at: new Date(event.timestamp), event })));
          await this.deps.events.publish(channelName('deployment', this.deploymentId), { id: this.deploymentId });
        }
      } catch (error) {
        this.deps.log.error({ err: error, invocationId: this.invocationId, lines: batch.length }, 'writing an invocation\'s log lines failed: they are lost');
      }
    });
  }
}

/** Log frames after `afterSeq` (and at or after `since`, when given), oldest first. */
export async function invocationLogsAfter(db: Queryable, invocationId: string, afterSeq: number, since: Date | undefined): Promise<{ seq: number; event: LogFrame }[]> {
  const { rows } = await db.query<{ seq: string; event: LogFrame }>(
    `SELECT seq, event FROM invocation_events
      WHERE invocation_id = $1 AND seq > $2 AND ($3::timestamptz IS NULL OR at >= $3)
      ORDER BY seq LIMIT 5000`,
    [invocationId, afterSeq, since ?? null],
  );
  return rows.map((row) => ({ seq: Number(row.seq), event: row.event }));
}
