import type { Queryable } from '../../db/pool.js';
import type { ProjectScope } from '../../scope.js';
import { escapeLike } from '../projects/store.js';

export const DEPLOYMENT_STATUSES = ['queued', 'in_progress', 'running', 'failed', 'stopped'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
export const isTerminalDeployment = (status: DeploymentStatus) => status === 'running' || status === 'failed' || status === 'stopped';

export interface DeploymentRow {
  id: string;
  org_id: string;
  project_id: string;
  status: DeploymentStatus;
  status_reason: string | null;
  entrypoint_rel_path: string;
  env_vars: Record<string, string>;
  version: string;
  force: boolean;
  source_type: 'file' | 'github';
  source_url: string | null;
  source_ref: string | null;
  source_path: string | null;
  source_checksum: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, org_id, project_id, status, status_reason, entrypoint_rel_path, env_vars, version, force,
  source_type, source_url, source_ref, source_path, source_checksum, created_at, updated_at`;

export interface NewDeployment {
  id: string;
  entrypointRelPath: string;
  envVars: Record<string, string>;
  version: string;
  force: boolean;
  source: { type: 'file'; checksum: string } | { type: 'github'; url: string; ref: string; path: string | null };
  now: Date;
}

export async function insertDeployment(db: Queryable, scope: ProjectScope, input: NewDeployment): Promise<DeploymentRow> {
  const { source } = input;
  const { rows } = await db.query<DeploymentRow>(
    `INSERT INTO deployments (id, org_id, project_id, status, entrypoint_rel_path, env_vars, version, force,
                              source_type, source_url, source_ref, source_path, source_checksum, created_at, updated_at)
     VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
     RETURNING ${COLUMNS}`,
    [
      input.id,
      scope.orgId,
      scope.projectId,
      input.entrypointRelPath,
      JSON.stringify(input.envVars),
      input.version,
      input.force,
      source.type,
      source.type === 'github' ? source.url : null,
      source.type === 'github' ? source.ref : null,
      source.type === 'github' ? source.path : null,
      source.type === 'file' ? source.checksum : null,
      input.now,
    ],
  );
  return rows[0]!;
}

export async function findDeployment(db: Queryable, scope: ProjectScope, id: string, options: { forUpdate?: boolean } = {}) {
  const { rows } = await db.query<DeploymentRow>(
    `SELECT ${COLUMNS} FROM deployments WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL
     ${options.forUpdate ? 'FOR UPDATE' : ''}`,
    [scope.orgId, scope.projectId, id],
  );
  return rows[0];
}

/** The build's own read: by id alone, since the build queue works across projects. */
export async function findDeploymentById(db: Queryable, id: string): Promise<DeploymentRow | undefined> {
  const { rows } = await db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM deployments WHERE id = $1 AND deleted_at IS NULL`, [id]);
  return rows[0];
}

/**
 * Takes the oldest queued deployment for building (in_progress). SKIP LOCKED lets a
 * second builder, should there ever be one, take the next one rather than wait.
 */
export async function claimQueuedDeployment(db: Queryable, now: Date): Promise<DeploymentRow | undefined> {
  const { rows } = await db.query<DeploymentRow>(
    `UPDATE deployments SET status = 'in_progress', updated_at = $1
      WHERE id = (SELECT id FROM deployments WHERE status = 'queued' AND deleted_at IS NULL
                   ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING ${COLUMNS}`,
    [now],
  );
  return rows[0];
}

/** Builds that were in progress when the service stopped: no process builds them any more. */
export async function interruptedDeployments(db: Queryable): Promise<DeploymentRow[]> {
  const { rows } = await db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM deployments WHERE status = 'in_progress' AND deleted_at IS NULL`);
  return rows;
}

/**
 * Moves a deployment to `status` only from one of `from` (a delete racing the build's
 * own finish: whichever commits first wins, the other changes nothing).
 */
export async function setDeploymentStatus(
  db: Queryable,
  id: string,
  change: { status: DeploymentStatus; from: readonly DeploymentStatus[]; statusReason?: string | null; checksum?: string; now: Date },
): Promise<DeploymentRow | undefined> {
  const { rows } = await db.query<DeploymentRow>(
    `UPDATE deployments
        SET status = $2, status_reason = $3, updated_at = $4, source_checksum = COALESCE($5, source_checksum)
      WHERE id = $1 AND status = ANY($6::text[]) AND deleted_at IS NULL
      RETURNING ${COLUMNS}`,
    [id, change.status, change.statusReason ?? null, change.now, change.checksum ?? null, change.from],
  );
  return rows[0];
}

export interface DeploymentFilter {
  appName?: string | undefined;
  appVersion?: string | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

/**
 * Newest first; limit + 1 rows so the page knows whether more follow. app_name and
 * app_version match the apps a deployment's build registered (live or replaced since).
 */
export async function listDeployments(db: Queryable, scope: ProjectScope, filter: DeploymentFilter): Promise<DeploymentRow[]> {
  const { rows } = await db.query<DeploymentRow>(
    `SELECT ${COLUMNS} FROM deployments d
      WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL
        AND ($3::text IS NULL OR version = $3)
        AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM app_versions a WHERE a.deployment_id = d.id AND a.app_name = $4))
        AND ($5::text IS NULL
             OR id LIKE $5 || '%' ESCAPE '\\'
             OR EXISTS (SELECT 1 FROM app_versions a WHERE a.deployment_id = d.id AND a.app_name ILIKE '%' || $5 || '%' ESCAPE '\\'))
      ORDER BY created_at DESC, seq DESC
      LIMIT $6 OFFSET $7`,
    [
      scope.orgId,
      scope.projectId,
      filter.appVersion ?? null,
      filter.appName ?? null,
      filter.query === undefined ? null : escapeLike(filter.query),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

/** Appends an SSE frame to the deployment's event log (GET /deployments/{id}/events replays it). */
export async function appendDeploymentEvents(db: Queryable, deploymentId: string, events: { at: Date; event: unknown }[]): Promise<void> {
  if (events.length === 0) return;
  await db.query(
    `INSERT INTO deployment_events (deployment_id, at, event)
     SELECT $1, at, event FROM unnest($2::timestamptz[], $3::jsonb[]) AS e(at, event)`,
    [deploymentId, events.map((e) => e.at), events.map((e) => JSON.stringify(e.event))],
  );
}

export interface DeploymentEventRow {
  seq: string;
  at: Date;
  event: Record<string, unknown>;
}

/** Events after `afterSeq` (and at or after `since`), in order, at most `limit`. */
export async function readDeploymentEvents(
  db: Queryable,
  deploymentId: string,
  afterSeq: string,
  since: Date | undefined,
  limit: number,
): Promise<DeploymentEventRow[]> {
  const { rows } = await db.query<DeploymentEventRow>(
    `SELECT seq::text AS seq, at, event FROM deployment_events
      WHERE deployment_id = $1 AND seq > $2::bigint AND ($3::timestamptz IS NULL OR at >= $3)
      ORDER BY deployment_events.seq LIMIT $4`,
    [deploymentId, afterSeq, since ?? null, limit],
  );
  return rows;
}
