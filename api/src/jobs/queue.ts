import { Logger as WorkerLogger, run, runMigrations, type Runner, type Task } from 'graphile-worker';
import type { Logger } from 'pino';
import type { Db, Queryable } from '../db/pool.js';

/**
 * Time-driven work that must survive restarts (auth health checks now) runs on
 * graphile-worker: jobs are rows in Postgres (schema graphile_worker), taken with
 * SKIP LOCKED by any replica, woken by LISTEN/NOTIFY, retried with back-off, and
 * deduplicated by job key. Chosen over pg-boss because a job can be added with one SQL
 * call inside the caller's own transaction (`graphile_worker.add_job`), so "connection
 * created" and "its first health check scheduled" commit together; and because its
 * current releases still run on Node 20 (pg-boss 11+ and graphile-worker 0.18 need 22).
 */

export type JobHandlers = Record<string, (payload: unknown, signal: AbortSignal) => Promise<void>>;

function workerLogger(log: Logger): WorkerLogger {
  const jobLog = log.child({ component: 'jobs' });
  return new WorkerLogger(() => (level, message, meta) => {
    // graphile-worker says "error" for a task that threw (it will retry): a warning here.
    const name = String(level);
    const at = name === 'error' || name === 'warning' ? 'warn' : 'debug';
    jobLog[at]({ ...(meta ?? {}) }, message);
  });
}

/** Creates or updates the graphile_worker schema; idempotent, safe from several replicas. */
export async function migrateJobQueue(connectionString: string, log: Logger): Promise<void> {
  await runMigrations({ connectionString, logger: workerLogger(log) });
}

export interface JobQueue {
  stop(): Promise<void>;
}

export async function startJobQueue(
  db: Db,
  log: Logger,
  handlers: JobHandlers,
  options: { concurrency: number; pollIntervalMs?: number },
): Promise<JobQueue> {
  const taskList: Record<string, Task> = {};
  for (const [name, handler] of Object.entries(handlers)) {
    taskList[name] = (payload, helpers) => handler(payload, helpers.abortSignal ?? new AbortController().signal);
  }
  const runner: Runner = await run({
    pgPool: db,
    taskList,
    concurrency: options.concurrency,
    noHandleSignals: true,
    pollInterval: options.pollIntervalMs ?? 2000,
    logger: workerLogger(log),
  });
  return {
    async stop() {
      await runner.stop();
    },
  };
}

/**
 * Schedules `task` at `runAt` under `key`, replacing a pending job with the same key (so
 * a connection has at most one scheduled health check). Runs on the caller's
 * connection: inside a transaction it commits or rolls back with it.
 */
export async function scheduleJob(db: Queryable, task: string, payload: object, runAt: Date, key: string, maxAttempts = 3): Promise<void> {
  await db.query('SELECT graphile_worker.add_job($1, $2::json, run_at := $3, job_key := $4, max_attempts := $5)', [
    task,
    JSON.stringify(payload),
    runAt,
    key,
    maxAttempts,
  ]);
}

/** Removes the pending job with this key, if any (a running one finishes). */
export async function unscheduleJob(db: Queryable, key: string): Promise<void> {
  await db.query('SELECT graphile_worker.remove_job($1)', [key]);
}
