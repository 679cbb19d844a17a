import type { AppDeps } from '../../app-deps.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { generateApiKey, hashApiKey, maskApiKey } from '../api-keys/key-material.js';
import { insertApiKey, softDeleteApiKey } from '../api-keys/store.js';
import { revokeAppJobTokens } from '../apps/job-tokens.js';
import type { ActionResult } from '../apps/runner.js';
import { invocationBrowsers } from '../browsers/invocation-browsers.js';
import { invocationChannel, isTerminal } from './service.js';
import { findInvocation, setInvocationStatus, type Scope } from './store.js';

/**
 * The end of a run in Kubernetes mode, whoever learns of it first: the pod's report, the
 * Job's outcome as any replica's watch sees it, or the sweep of runs whose tokens expired.
 * The row moves only from queued or running (a conditional update), so the first one
 * wins and every later one changes nothing. Then the run's key and Job tokens are revoked
 * and its browsers deleted, each idempotent.
 */

/**
 * async_timeout_seconds when not given, and the limit of a sync run: Kernel's docs
 * (apps/invoke.mdx) say async invocations "time out after 15 minutes by default".
 */
export const DEFAULT_RUN_TIMEOUT_SECONDS = 900;

/**
 * A failed run's output: `kernel invoke` prints only `output` for a finished invocation
 * (never status_reason), so a failure carries its reason there too, as JSON text in the
 * shape the CLI itself uses when it cancels (`{"error":"Invocation cancelled by user"}`).
 */
export function errorOutput(reason: string): string {
  return JSON.stringify({ error: reason });
}

/** The timeout message of a run, with the setting that set it (as embedded mode words it). */
export function withTimeoutSetting(result: ActionResult, timeoutMs: number): ActionResult {
  if (!result.ok && /^timed out after/.test(result.error) && !/async_timeout_seconds/.test(result.error)) {
    return { ok: false, error: `${result.error} (async_timeout_seconds ${timeoutMs / 1000})` };
  }
  return result;
}

/** Extra life of a run's key past its timeout, in case the revoke at its end is lost. */
const KEY_GRACE_MS = 60_000;

/**
 * The API key a run gets (KERNEL_API_KEY): scoped to the invocation's project and to the
 * invocation (browsers made with it are the invocation's), expiring with the run's timeout.
 */
export async function mintRunKey(db: Queryable, scope: Scope, invocationId: string, timeoutMs: number, now: Date): Promise<{ id: string; key: string }> {
  const key = generateApiKey();
  const row = await insertApiKey(db, {
    orgId: scope.orgId,
    projectId: scope.projectId,
    name: `invocation ${invocationId}`,
    keyHash: hashApiKey(key),
    maskedKey: maskApiKey(key),
    lifetimeDays: null,
    createdBy: null,
    now,
    expiresAt: new Date(now.getTime() + timeoutMs + KEY_GRACE_MS),
    invocationId,
  });
  return { id: row.id, key };
}

/** Records the result unless the invocation already ended; true when this call ended it. */
export async function finishRun(deps: AppDeps, scope: Scope, invocationId: string, result: ActionResult): Promise<boolean> {
  const before = await findInvocation(deps.db, scope, invocationId);
  if (!before || isTerminal(before.status)) return false;
  // Its browsers go first: a client that sees the run end sees them gone, as in embedded mode.
  await deleteBrowsers(deps, scope, invocationId);
  const ended = await inTransaction(deps.db, async (tx) => {
    const current = await findInvocation(tx, scope, invocationId, { forUpdate: true });
    if (!current || isTerminal(current.status)) return false;
    const row = await setInvocationStatus(tx, scope, invocationId, {
      status: result.ok ? 'succeeded' : 'failed',
      ...(result.ok ? { output: result.output ?? 'null' } : { output: errorOutput(result.error), statusReason: result.error }),
      now: deps.clock.now(),
    });
    // The run's key and tokens die with the result, in its transaction: a client that sees
    // the run end can no longer use them (releaseRun below does it again, for the other ends).
    await revokeRunKeys(tx, invocationId, deps.clock.now());
    await revokeAppJobTokens(tx, 'run', invocationId, deps.clock.now());
    await deps.events.publish(invocationChannel(row.id), { id: row.id, status: row.status }, tx);
    return true;
  });
  await releaseRun(deps, scope, invocationId);
  return ended;
}

/** Revokes the run's key and tokens and deletes its browsers (after any end, also one from outside). */
export async function releaseRun(deps: AppDeps, scope: Scope, invocationId: string): Promise<void> {
  const now = deps.clock.now();
  try {
    await revokeRunKeys(deps.db, invocationId, now);
    await revokeAppJobTokens(deps.db, 'run', invocationId, now);
  } catch (error) {
    deps.log.error({ err: error, invocationId }, "revoking a finished run's key failed (it expires on its own)");
  }
  await deleteBrowsers(deps, scope, invocationId);
}

function deleteBrowsers(deps: AppDeps, scope: Scope, invocationId: string): Promise<void> {
  return invocationBrowsers(deps)
    .deleteAll(scope, invocationId)
    .catch((error: unknown) => deps.log.error({ err: error, invocationId }, 'deleting the browsers of a finished invocation failed'));
}

async function revokeRunKeys(db: Queryable, invocationId: string, now: Date): Promise<void> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM api_keys WHERE invocation_id = $1 AND deleted_at IS NULL`, [invocationId]);
  for (const row of rows) await softDeleteApiKey(db, row.id, now);
}

/**
 * Runs nobody will report any more: a queued or running invocation of a deployment whose
 * Job tokens have all expired (the Job's deadline and a margin passed without a report),
 * or that got no token at all within `orphanMs` (the replica that created it died before
 * its Job). Failed with a reason; returns how many.
 */
export async function failLostRuns(deps: AppDeps, orphanMs: number): Promise<number> {
  const now = deps.clock.now();
  const { rows } = await deps.db.query<{ id: string; org_id: string; project_id: string; had_token: boolean }>(
    `SELECT i.id, i.org_id, i.project_id, EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'run' AND t.subject_id = i.id) AS had_token
       FROM invocations i
      WHERE i.deployment_id IS NOT NULL AND i.status IN ('queued', 'running')
        AND NOT EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'run' AND t.subject_id = i.id AND t.revoked_at IS NULL AND t.expires_at > $1)
        AND (EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'run' AND t.subject_id = i.id) OR i.started_at < $2)`,
    [now, new Date(now.getTime() - orphanMs)],
  );
  let failed = 0;
  for (const row of rows) {
    const reason = row.had_token ? 'The run ended without reporting a result before its deadline' : 'The run never started: its Job was not created';
    if (await finishRun(deps, { orgId: row.org_id, projectId: row.project_id }, row.id, { ok: false, error: reason })) failed++;
  }
  return failed;
}
