import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { AppError } from '../../http/errors.js';
import { softDeleteApiKey } from '../api-keys/store.js';
import { runAction, type ActionResult } from '../apps/runner.js';
import type { LiveAppVersion } from './app-versions.js';
import type { InvocationBrowsers } from './browsers.js';
import { InvocationLogWriter } from './log-events.js';
import { invocationChannel, isTerminal } from './service.js';
import { findInvocation, setInvocationStatus, type InvocationRow, type Scope } from './store.js';
import path from 'node:path';
import { DEFAULT_RUN_TIMEOUT_SECONDS, errorOutput, mintRunKey, releaseRun } from './run-finish.js';
import { cancelKubeRuns } from './kube-runs.js';

export { DEFAULT_RUN_TIMEOUT_SECONDS, errorOutput };

/**
 * Invocations of a deployed app run here, in this process (embedded mode): each in the
 * app sandbox (apps/runner.ts), with the deployment's env, the service's loopback URL and a
 * key of its own. queued → running → succeeded (output) or failed (status_reason). The run
 * follows its own row: whatever makes it terminal from outside (PATCH, a deployment's
 * delete, a restart's cleanup in another process) kills the process.
 */


/**
 * How long a sync POST /invocations waits for the run before it answers with the
 * invocation as it is (running): under the SDK's 60 s request timeout, past which the
 * SDK would retry the POST and start a second run.
 */
export const SYNC_WAIT_MS = 50_000;

const STOPPED_WITH_SERVICE = 'The service stopped while the invocation ran';
export const INTERRUPTED_BY_RESTART = 'The service restarted while the invocation ran; its run was lost';

interface Run {
  controller: AbortController;
  done: Promise<void>;
}

const runsByDeps = new WeakMap<object, Map<string, Run>>();

function runsOf(deps: AppDeps): Map<string, Run> {
  let runs = runsByDeps.get(deps);
  if (!runs) runsByDeps.set(deps, (runs = new Map<string, Run>()));
  return runs;
}

/** The error a create gets for an action the deployed app does not register. */
export function actionNotFound(version: LiveAppVersion, actionName: string): AppError {
  return new AppError(
    404,
    'action_not_found',
    `App ${JSON.stringify(version.app_name)} version ${JSON.stringify(version.version)} has no action ${JSON.stringify(actionName)}`,
    { details: [{ code: 'not_found', field: 'action_name', message: `actions: ${version.actions.map((action) => action.name).join(', ') || 'none'}` }] },
  );
}

/** Starts the run of a just-created invocation; `done` settles when it has finished (it never rejects). */
export function startRun(deps: AppDeps, browsers: InvocationBrowsers, scope: Scope, row: InvocationRow, version: LiveAppVersion): Promise<void> {
  const runs = runsOf(deps);
  const controller = new AbortController();
  const done = execute(deps, browsers, scope, row, version, controller)
    .catch((error: unknown) => deps.log.error({ err: error, invocationId: row.id }, 'an invocation run failed outside the action'))
    .finally(() => runs.delete(row.id));
  runs.set(row.id, { controller, done });
  return done;
}

async function execute(deps: AppDeps, browsers: InvocationBrowsers, scope: Scope, row: InvocationRow, version: LiveAppVersion, controller: AbortController): Promise<void> {
  const dataDir = deps.settings.apps?.dataDir;
  const baseUrl = deps.settings.internalUrl;
  const timeoutMs = (row.async_timeout_seconds ?? DEFAULT_RUN_TIMEOUT_SECONDS) * 1000;
  const logs = new InvocationLogWriter(deps, row.id, version.deployment_id);
  // Ended from outside: the run's row became terminal without us.
  const watch = () => {
    void findInvocation(deps.db, scope, row.id).then(
      (current) => {
        if (!current || isTerminal(current.status)) controller.abort();
      },
      (error: unknown) => deps.log.warn({ err: error, invocationId: row.id }, 'reading a running invocation failed'),
    );
  };
  let unsubscribe: (() => Promise<void>) | undefined;
  let keyId: string | undefined;
  try {
    let result: ActionResult;
    try {
      unsubscribe = await deps.events.subscribe(invocationChannel(row.id), watch, watch);
      if (!dataDir || !baseUrl) throw new Error('apps do not run in this service (no data dir or no internal URL)');
      const minted = await mintRunKey(deps.db, scope, row.id, timeoutMs, deps.clock.now());
      keyId = minted.id;
      const key = minted.key;
      if (!(await moveTo(deps, scope, row.id, 'running'))) return;
      result = await runAction({
        buildDir: path.join(dataDir, 'apps', 'builds', version.deployment_id),
        entry: version.entry,
        runtime: version.runtime,
        // The deployment's variables first: the service's own are not the app's to replace
        // (Kernel's CLI lists KERNEL_API_KEY and ENTRYPOINT_RELPATH as set by the platform).
        env: { ...version.env_vars, KERNEL_BASE_URL: baseUrl, KERNEL_API_KEY: key, ENTRYPOINT_RELPATH: version.entrypoint_rel_path },
        timeoutMs,
        signal: controller.signal,
        onLog: logs.add,
        dataDir,
        appName: row.app_name,
        actionName: row.action_name,
        payload: row.payload,
        invocationId: row.id,
      });
    } catch (error) {
      result = { ok: false, error: `the run could not start: ${error instanceof Error ? error.message : String(error)}` };
    }
    await logs.close();
    const reason: unknown = controller.signal.reason;
    if (!result.ok && controller.signal.aborted && typeof reason === 'string') result = { ok: false, error: reason };
    if (!result.ok && /^timed out after/.test(result.error)) result = { ok: false, error: `${result.error} (async_timeout_seconds ${timeoutMs / 1000})` };
    await moveTo(deps, scope, row.id, result.ok ? 'succeeded' : 'failed', result.ok ? { output: result.output ?? 'null' } : { output: errorOutput(result.error), statusReason: result.error });
  } finally {
    await unsubscribe?.().catch(() => undefined);
    if (keyId) await softDeleteApiKey(deps.db, keyId, deps.clock.now()).catch((error: unknown) => deps.log.error({ err: error, invocationId: row.id }, "revoking an invocation's key failed (it expires on its own)"));
    await browsers.deleteAll(scope, row.id).catch((error: unknown) => deps.log.error({ err: error, invocationId: row.id }, 'deleting the browsers of a finished invocation failed'));
  }
}

/** Moves the row on unless it is already terminal (ended from outside); false then. */
async function moveTo(deps: AppDeps, scope: Scope, id: string, status: 'running' | 'succeeded' | 'failed', change: { output?: string; statusReason?: string } = {}): Promise<boolean> {
  return inTransaction(deps.db, async (tx) => {
    const current = await findInvocation(tx, scope, id, { forUpdate: true });
    if (!current || isTerminal(current.status)) return false;
    const row = await setInvocationStatus(tx, scope, id, { status, output: change.output, statusReason: change.statusReason, now: deps.clock.now() });
    await deps.events.publish(invocationChannel(row.id), { id: row.id, status: row.status }, tx);
    return true;
  });
}

/** Waits up to `ms` for a run of this process to finish (at once when it is not running here). */
export async function waitForRun(deps: AppDeps, id: string, ms: number): Promise<void> {
  const run = runsOf(deps).get(id);
  if (!run) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([run.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** Aborts this process's runs (shutdown) and waits for them to record their end. */
export async function stopAllRuns(deps: AppDeps): Promise<void> {
  const runs = [...runsOf(deps).values()];
  for (const run of runs) run.controller.abort(STOPPED_WITH_SERVICE);
  await Promise.all(runs.map((run) => run.done));
}

/**
 * Ends the queued and running invocations of a deployment (it is being deleted): failed
 * with `reason`; their runs see their rows end and are killed, their keys revoked and
 * their browsers deleted as on any end.
 */
export async function stopInvocationsOfDeployment(deps: AppDeps, scope: Scope, deploymentId: string, reason: string): Promise<void> {
  const ended = await inTransaction(deps.db, async (tx) => {
    const { rows } = await tx.query<{ id: string }>(
      `UPDATE invocations SET status = 'failed', status_reason = $4, output = $6, finished_at = $5, updated_at = $5
        WHERE org_id = $1 AND project_id = $2 AND deployment_id = $3 AND status IN ('queued', 'running')
        RETURNING id`,
      [scope.orgId, scope.projectId, deploymentId, reason, deps.clock.now(), errorOutput(reason)],
    );
    for (const row of rows) await deps.events.publish(invocationChannel(row.id), { id: row.id, status: 'failed' }, tx);
    return rows.map((row) => row.id);
  });
  const runs = runsOf(deps);
  for (const id of ended) runs.get(id)?.controller.abort();
  await Promise.all(ended.map((id) => runs.get(id)?.done ?? Promise.resolve()));
  // Kubernetes mode: their Jobs go, their keys and tokens are revoked, their browsers deleted.
  if (deps.settings.apps?.kubernetes) {
    await cancelKubeRuns(deps, ended);
    for (const id of ended) await releaseRun(deps, scope, id);
  }
}

/**
 * At start (embedded mode): runs of a previous process are gone with it. Their invocations
 * fail with a clear reason, their keys are revoked; their browsers go with the reaper's
 * next pass (it deletes browsers of finished invocations).
 */
export async function failInterruptedRuns(deps: Pick<AppDeps, 'db' | 'clock' | 'log'>): Promise<number> {
  const now = deps.clock.now();
  return inTransaction(deps.db, async (tx) => {
    const { rows } = await tx.query<{ id: string }>(
      `UPDATE invocations SET status = 'failed', status_reason = $1, output = $3, finished_at = $2, updated_at = $2
        WHERE deployment_id IS NOT NULL AND status IN ('queued', 'running') RETURNING id`,
      [INTERRUPTED_BY_RESTART, now, errorOutput(INTERRUPTED_BY_RESTART)],
    );
    await tx.query(`UPDATE api_keys SET deleted_at = $1 WHERE invocation_id IS NOT NULL AND deleted_at IS NULL`, [now]);
    if (rows.length > 0) deps.log.warn({ invocations: rows.map((row) => row.id) }, 'invocations whose runs a previous process left unfinished: failed');
    return rows.length;
  });
}
