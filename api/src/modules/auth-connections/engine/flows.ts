import type { AppDeps } from '../../../app-deps.js';
import { AppError } from '../../../http/errors.js';
import { newId } from '../../../ids.js';
import { startJobQueue, type JobQueue } from '../../../jobs/queue.js';
import type { ProjectScope } from '../../../scope.js';
import { HEALTH_CHECK_TASK } from '../service.js';
import { runHealthCheck } from './health-check.js';
import { FlowRunner, HEARTBEAT_MS, type FlowOverrides } from './runner.js';

export { FLOW_SESSION_END_REASON } from './flow-browser.js';
export { HEARTBEAT_MS, STALE_AFTER_MS, type FlowOverrides } from './runner.js';

/**
 * Managed auth's background work on this replica: login flows and re-auths (runner.ts
 * drives them, driver.ts steps through a login), the heartbeat that keeps them alive and
 * fails those of silent replicas, and the job queue that runs the scheduled health
 * checks (health-check.ts).
 */
export class AuthFlows {
  readonly replicaId = newId('replica');
  private readonly runner: FlowRunner;
  private heartbeat: NodeJS.Timeout | undefined;
  private queue: JobQueue | undefined;
  private stopped = false;

  constructor(private readonly deps: AppDeps) {
    this.runner = new FlowRunner(deps, this.replicaId);
  }

  async start(options: { jobs?: boolean; jobPollIntervalMs?: number } = {}): Promise<void> {
    this.heartbeat = setInterval(() => void this.runner.heartbeat(), HEARTBEAT_MS);
    this.heartbeat.unref();
    await this.runner.heartbeat();
    if (options.jobs !== false) {
      this.queue = await startJobQueue(
        this.deps.db,
        this.deps.log,
        { [HEALTH_CHECK_TASK]: (payload) => this.healthCheck((payload as { connection_id: string }).connection_id) },
        { concurrency: 2, ...(options.jobPollIntervalMs ? { pollIntervalMs: options.jobPollIntervalMs } : {}) },
      );
    }
  }

  /** Stops taking jobs and ends this replica's flows (their browsers close; the flows fail). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    await this.queue?.stop();
    await this.runner.stopAll();
  }

  /** Starts a login (or re-auth) flow; see FlowRunner.begin. */
  async begin(scope: ProjectScope, connectionId: string, type: 'LOGIN' | 'REAUTH', input: FlowOverrides = {}) {
    if (this.stopped) throw new AppError(503, 'service_stopping', 'The service is shutting down');
    return this.runner.begin(scope, connectionId, type, input);
  }

  /** Wakes the driver of a flow on this replica (a submission or a delete arrived). */
  wake(flowId: string): void {
    this.runner.wake(flowId);
  }

  /** One scheduled health check of a connection; see runHealthCheck. */
  async healthCheck(connectionId: string): Promise<void> {
    await runHealthCheck(this.deps, connectionId, {
      reauth: (scope, id) => this.begin(scope, id, 'REAUTH'),
      stopping: () => this.stopped,
    });
  }
}
