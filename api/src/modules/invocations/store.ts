import type { Queryable } from '../../db/pool.js';
import type { ProjectScope } from '../../scope.js';
import { escapeLike } from '../projects/store.js';
import type { InvocationStatus } from './schema.js';

export interface InvocationRow {
  id: string;
  org_id: string;
  project_id: string;
  app_name: string;
  action_name: string;
  version: string;
  deployment_id: string | null;
  status: InvocationStatus;
  status_reason: string | null;
  is_async: boolean;
  async_timeout_seconds: number | null;
  payload: string | null;
  output: string | null;
  started_at: Date;
  finished_at: Date | null;
  updated_at: Date;
}

const COLUMNS = `id, org_id, project_id, app_name, action_name, version, deployment_id, status, status_reason,
  is_async, async_timeout_seconds, payload, output, started_at, finished_at, updated_at`;

/** Where an invocation lives: every query is bound to one org and one project. */
export type Scope = ProjectScope;

export interface NewInvocation {
  id: string;
  appName: string;
  actionName: string;
  version: string;
  deploymentId: string | null;
  isAsync: boolean;
  asyncTimeoutSeconds: number | null;
  payload: string | null;
  now: Date;
}

export async function insertInvocation(db: Queryable, scope: Scope, input: NewInvocation): Promise<InvocationRow> {
  const { rows } = await db.query<InvocationRow>(
    `INSERT INTO invocations (id, org_id, project_id, app_name, action_name, version, deployment_id, status,
                              is_async, async_timeout_seconds, payload, started_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11, $11)
     RETURNING ${COLUMNS}`,
    [
      input.id,
      scope.orgId,
      scope.projectId,
      input.appName,
      input.actionName,
      input.version,
      input.deploymentId,
      input.isAsync,
      input.asyncTimeoutSeconds,
      input.payload,
      input.now,
    ],
  );
  return rows[0]!;
}

export async function findInvocation(
  db: Queryable,
  scope: Scope,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<InvocationRow | undefined> {
  const { rows } = await db.query<InvocationRow>(
    `SELECT ${COLUMNS} FROM invocations WHERE org_id = $1 AND project_id = $2 AND id = $3
     ${options.forUpdate ? 'FOR UPDATE' : ''}`,
    [scope.orgId, scope.projectId, id],
  );
  return rows[0];
}

export async function setInvocationStatus(
  db: Queryable,
  scope: Scope,
  id: string,
  change: { status: InvocationStatus; output?: string | undefined; statusReason?: string | undefined; now: Date },
): Promise<InvocationRow> {
  const terminal = change.status === 'succeeded' || change.status === 'failed';
  const { rows } = await db.query<InvocationRow>(
    `UPDATE invocations
        SET status = $4,
            output = CASE WHEN $5::text IS NULL THEN output ELSE $5 END,
            finished_at = CASE WHEN $6 THEN $7::timestamptz ELSE NULL END,
            status_reason = COALESCE($8::text, status_reason),
            updated_at = $7
      WHERE org_id = $1 AND project_id = $2 AND id = $3
      RETURNING ${COLUMNS}`,
    [scope.orgId, scope.projectId, id, change.status, change.output ?? null, terminal, change.now, change.statusReason ?? null],
  );
  return rows[0]!;
}

/** Queued and running invocations of a project: what max_concurrent_invocations caps. */
export async function countActiveInvocations(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM invocations WHERE project_id = $1 AND status IN ('queued', 'running')`,
    [projectId],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Serialises the invocation creates of one project until the transaction ends, so the
 * count-then-insert of the concurrency cap cannot interleave. The first key spaces the
 * lock away from other advisory locks; the hash of the id may collide, which only
 * serialises two projects' creates needlessly.
 */
export async function lockProjectInvocationCreates(db: Queryable, projectId: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(${INVOCATION_CREATE_LOCK_SPACE}, hashtext($1))`, [projectId]);
}
const INVOCATION_CREATE_LOCK_SPACE = 0x1b7c0001;

export interface InvocationFilter {
  appName?: string | undefined;
  actionName?: string | undefined;
  version?: string | undefined;
  deploymentId?: string | undefined;
  status?: InvocationStatus | undefined;
  since?: Date | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

/** Newest first; fetches limit + 1 rows so the page knows whether more follow. */
export async function listInvocations(db: Queryable, scope: Scope, filter: InvocationFilter): Promise<InvocationRow[]> {
  const { rows } = await db.query<InvocationRow>(
    `SELECT ${COLUMNS} FROM invocations
      WHERE org_id = $1 AND project_id = $2
        AND ($3::text IS NULL OR app_name = $3)
        AND ($4::text IS NULL OR action_name = $4)
        AND ($5::text IS NULL OR version = $5)
        AND ($6::text IS NULL OR deployment_id = $6)
        AND ($7::text IS NULL OR status = $7)
        AND ($8::timestamptz IS NULL OR started_at >= $8)
        AND ($9::text IS NULL
             OR id LIKE $9 || '%' ESCAPE '\\'
             OR app_name ILIKE '%' || $9 || '%' ESCAPE '\\'
             OR action_name ILIKE '%' || $9 || '%' ESCAPE '\\')
      ORDER BY started_at DESC, seq DESC
      LIMIT $10 OFFSET $11`,
    [
      scope.orgId,
      scope.projectId,
      filter.appName ?? null,
      filter.actionName ?? null,
      filter.version ?? null,
      filter.deploymentId ?? null,
      filter.status ?? null,
      filter.since ?? null,
      filter.query === undefined ? null : escapeLike(filter.query),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}
