import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { channelName } from '../../events/hub.js';
import { AppError, conflict, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import { getLimits, shareLockLiveProject } from '../projects/store.js';
import { TERMINAL_STATUSES, type CreateInvocationInput, type InvocationStatus, type UpdateInvocationInput } from './schema.js';
import {
  countActiveInvocations,
  findInvocation,
  insertInvocation,
  lockProjectInvocationCreates,
  setInvocationStatus,
  type InvocationRow,
  type Scope,
} from './store.js';

/** Seconds a client is told to wait after hitting the concurrency cap. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 1;

export const isTerminal = (status: InvocationStatus) => TERMINAL_STATUSES.includes(status);

export const invocationChannel = (id: string) => channelName('invocation', id);

/**
 * Why an invocation failed, for newer SDKs that read status_reason on every failed one:
 * the action (or its caller) marked it failed with PATCH, which gives no reason of its own.
 */
export const FAILED_BY_UPDATE = 'Marked failed with PATCH /invocations/{id}';
/** The same for an invocation the service runs: the PATCH ended (killed) its run. */
export const CANCELLED_BY_UPDATE = 'Cancelled with PATCH /invocations/{id}';
/** Rows that failed before reasons were recorded. */
const FAILED_WITHOUT_REASON = 'The invocation failed; no reason was recorded';

const statusReasonOf = (row: InvocationRow): string | null =>
  row.status_reason ?? (row.status === 'failed' ? FAILED_WITHOUT_REASON : null);

/** The wire shape: optional text fields are absent rather than null (the SDK types say so). */
export function presentInvocation(row: InvocationRow) {
  const statusReason = statusReasonOf(row);
  return {
    id: row.id,
    app_name: row.app_name,
    action_name: row.action_name,
    version: row.version,
    status: row.status,
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    ...(row.payload !== null ? { payload: row.payload } : {}),
    ...(row.output !== null ? { output: row.output } : {}),
    ...(statusReason !== null ? { status_reason: statusReason } : {}),
  };
}

export function presentInvocationCreated(row: InvocationRow) {
  const statusReason = statusReasonOf(row);
  return {
    id: row.id,
    action_name: row.action_name,
    status: row.status,
    ...(row.output !== null ? { output: row.output } : {}),
    ...(statusReason !== null ? { status_reason: statusReason } : {}),
  };
}

/**
 * Creates a queued invocation, within the project's max_concurrent_invocations. The
 * count and the insert run under a per-project lock, so concurrent creates cannot
 * overshoot the cap; the project row is share-locked so a concurrent project delete
 * either waits and sees the invocation or wins and the create is a 404.
 */
export async function createInvocation(deps: AppDeps, scope: Scope, input: CreateInvocationInput, deploymentId: string | null = null): Promise<InvocationRow> {
  return inTransaction(deps.db, async (tx) => {
    const project = await shareLockLiveProject(tx, scope.orgId, scope.projectId);
    if (!project || project.id !== scope.projectId) throw new AppError(404, 'project_not_found', 'The project no longer exists');
    await lockProjectInvocationCreates(tx, scope.projectId);
    const cap = (await getLimits(tx, scope.projectId)).max_concurrent_invocations;
    if (cap !== null) {
      const active = await countActiveInvocations(tx, scope.projectId);
      if (active >= cap) throw concurrencyLimitExceeded(cap, active);
    }
    const row = await insertInvocation(tx, scope, {
      id: newId('inv'),
      appName: input.app_name,
      actionName: input.action_name,
      version: input.version,
      deploymentId,
      isAsync: input.async === true,
      asyncTimeoutSeconds: input.async_timeout_seconds ?? null,
      payload: input.payload ?? null,
      now: deps.clock.now(),
    });
    await publishChange(deps, tx, row);
    return row;
  });
}

function concurrencyLimitExceeded(cap: number, active: number): AppError {
  return new AppError(
    429,
    'concurrency_limit_exceeded',
    `The project allows ${cap} concurrent invocations and ${active} are queued or running; finish one or raise max_concurrent_invocations`,
    {
      details: [{ code: 'max_concurrent_invocations', message: `limit ${cap}, queued or running ${active}` }],
      retryAfterSeconds: CONCURRENCY_RETRY_AFTER_SECONDS,
    },
  );
}

export async function getInvocation(db: Queryable, scope: Scope, id: string): Promise<InvocationRow> {
  const row = await findInvocation(db, scope, id);
  if (!row) throw notFound('Invocation', id);
  return row;
}

/**
 * Finishes an invocation (succeeded or failed, with optional output), or marks a
 * queued one running. A finished invocation stays as it is: 409.
 */
export async function updateInvocation(
  deps: AppDeps,
  scope: Scope,
  id: string,
  input: UpdateInvocationInput,
): Promise<InvocationRow> {
  return inTransaction(deps.db, async (tx) => {
    const current = await findInvocation(tx, scope, id, { forUpdate: true });
    if (!current) throw notFound('Invocation', id);
    if (isTerminal(current.status)) {
      throw conflict('invocation_finished', `Invocation ${JSON.stringify(id)} already finished with status ${current.status}`);
    }
    if (input.status === 'running' && current.status === 'running') return current;
    const row = await setInvocationStatus(tx, scope, id, {
      status: input.status,
      output: input.output,
      // One the service runs (deployment_id set) is killed by it: a cancel, so said.
      ...(input.status === 'failed' ? { statusReason: current.deployment_id !== null ? CANCELLED_BY_UPDATE : FAILED_BY_UPDATE } : {}),
      now: deps.clock.now(),
    });
    await publishChange(deps, tx, row);
    return row;
  });
}

/**
 * NOTIFY inside the transaction: Postgres delivers it at commit and drops it on
 * rollback, so listeners never see a change that did not happen, nor miss one that did.
 */
async function publishChange(deps: AppDeps, tx: Queryable, row: InvocationRow): Promise<void> {
  await deps.events.publish(invocationChannel(row.id), { id: row.id, status: row.status }, tx);
}

/** Queued or running invocations keep their project from being deleted. */
export const countProjectInvocations: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'invocations',
  count: await countActiveInvocations(db, projectId),
});
