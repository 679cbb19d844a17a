import type { AppDeps } from '../../app-deps.js';
import { kubeAppJobs } from '../apps/kube-jobs.js';
import type { LiveAppVersion } from './app-versions.js';
import { DEFAULT_RUN_TIMEOUT_SECONDS, finishRun } from './run-finish.js';
import { invocationChannel, isTerminal } from './service.js';
import { findInvocation, type InvocationRow, type Scope } from './store.js';

/**
 * Runs in Kubernetes mode: each invocation a Job of the runner image (apps/kube-jobs.ts),
 * whose pod fetches its input (the payload, the env, a key of its own) and the bundle and
 * reports its result (internal-run-routes.ts). Nothing of the run lives in this process:
 * any replica answers a sync create's wait, and any replica records the end.
 */

/** Creates the run's Job; a Job that cannot be made fails the invocation at once. */
export async function startKubeRun(deps: AppDeps, scope: Scope, row: InvocationRow, version: LiveAppVersion): Promise<void> {
  const jobs = kubeAppJobs(deps);
  try {
    if (!jobs) throw new Error('this service runs no app Jobs');
    await jobs.startRun(
      {
        invocationId: row.id,
        deploymentId: version.deployment_id,
        appName: row.app_name,
        actionName: row.action_name,
        timeoutMs: (row.async_timeout_seconds ?? DEFAULT_RUN_TIMEOUT_SECONDS) * 1000,
      },
      scope,
    );
  } catch (error) {
    deps.log.error({ err: error, invocationId: row.id }, 'creating a run Job failed');
    await finishRun(deps, scope, row.id, { ok: false, error: `the run could not start: its Job could not be created (${error instanceof Error ? error.message : String(error)})` });
  }
}

/** A run that ended from outside (PATCH, a delete) loses its Job; absent is fine. */
export async function cancelKubeRuns(deps: AppDeps, ids: readonly string[]): Promise<void> {
  const jobs = kubeAppJobs(deps);
  if (!jobs) return;
  await Promise.all(
    ids.map((id) => jobs.cancelRun(id).catch((error: unknown) => deps.log.warn({ err: error, invocationId: id }, 'deleting a run Job failed (its deadline ends it)'))),
  );
}

/** Waits up to `ms` for the invocation to end, wherever it runs (its row's notifications, and one read to start). */
export async function waitForEnd(deps: AppDeps, scope: Scope, id: string, ms: number): Promise<void> {
  let wake: () => void = () => undefined;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  const check = () => {
    void findInvocation(deps.db, scope, id).then(
      (row) => {
        if (!row || isTerminal(row.status)) wake();
      },
      () => undefined,
    );
  };
  const unsubscribe = await deps.events.subscribe(invocationChannel(id), check, check);
  let timer: NodeJS.Timeout | undefined;
  try {
    check();
    await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
    await unsubscribe().catch(() => undefined);
  }
}
