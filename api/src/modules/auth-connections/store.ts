import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';
import type { TelemetryRequest } from '../browsers/telemetry.js';
import type { ConnectionStatus, CredentialRef, FlowStatus, FlowStep, FlowType } from './schema.js';
import type { FlowView } from './view.js';

export interface Scope {
  orgId: string;
  projectId: string;
}

/** What a successful login needed: can_reauth is judged from it and the credential. */
export interface LoginRequirements {
  /** Field types the user (or credential) filled, e.g. identifier, password, totp_code. */
  fieldTypes: string[];
  /** The MFA method chosen, when the site asked for one. */
  mfaType: string | null;
  /** The SSO provider used, when the login went through one. */
  ssoProvider: string | null;
}

export interface ConnectionRow {
  id: string;
  org_id: string;
  project_id: string;
  domain: string;
  profile_id: string;
  /** The profile's current name (or the one it was made with, if the profile is gone). */
  profile_name: string;
  allowed_domains: string[];
  auto_reauth: boolean;
  health_checks: boolean;
  health_check_interval: number;
  login_url: string | null;
  proxy_id: string | null;
  record_session: boolean;
  save_credentials: boolean;
  browser_telemetry: TelemetryRequest | null;
  credential: CredentialRef | null;
  credential_id: string | null;
  /** The resolved credential's value names and whether it holds a TOTP secret (null: none). */
  credential_value_keys: string[] | null;
  credential_has_totp: boolean | null;
  status: ConnectionStatus;
  last_auth_check_at: Date | null;
  post_login_url: string | null;
  sso_provider: string | null;
  login_requirements: LoginRequirements | null;
  current_flow_id: string | null;
  /** The AuthConnection resource (namespace/name) that manages the connection; null when the API does. */
  kubernetes_resource: string | null;
  created_at: Date;
  updated_at: Date;
  /** The current flow, joined (null when none ever ran). */
  flow: FlowRow | null;
}

export interface FlowRow {
  id: string;
  connection_id: string;
  org_id: string;
  project_id: string;
  type: FlowType;
  status: FlowStatus;
  step: FlowStep;
  browser_session_id: string | null;
  view: FlowView;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  post_login_url: string | null;
  input_seq: number;
  has_pending_input: boolean;
  handoff_used_at: Date | null;
  driver: string | null;
  heartbeat_at: Date | null;
  expires_at: Date;
  started_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

const FLOW_COLUMNS = `f.id, f.connection_id, f.org_id, f.project_id, f.type, f.status, f.step, f.browser_session_id, f.view,
  f.error_code, f.error_message, f.website_error, f.post_login_url, f.input_seq, (f.pending_input IS NOT NULL) AS has_pending_input,
  f.handoff_used_at, f.driver, f.heartbeat_at, f.expires_at, f.started_at, f.updated_at, f.finished_at`;

const SELECT_CONNECTION = `SELECT c.id, c.org_id, c.project_id, c.domain, c.profile_id, coalesce(p.name, c.profile_name) AS profile_name,
    c.allowed_domains, c.auto_reauth, c.health_checks, c.health_check_interval, c.login_url, c.proxy_id, c.record_session,
    c.save_credentials, c.browser_telemetry, c.credential, c.credential_id, cr.value_keys AS credential_value_keys,
    CASE WHEN cr.id IS NULL THEN NULL ELSE cr.totp_secret_sealed IS NOT NULL END AS credential_has_totp, c.status, c.last_auth_check_at, c.post_login_url, c.sso_provider,
    c.login_requirements, c.current_flow_id, c.kubernetes_resource, c.created_at, c.updated_at,
    CASE WHEN f.id IS NULL THEN NULL ELSE to_jsonb(fl) END AS flow
  FROM auth_connections c
  LEFT JOIN profiles p ON p.id = c.profile_id AND p.deleted_at IS NULL
  LEFT JOIN credentials cr ON cr.id = c.credential_id
  LEFT JOIN auth_flows f ON f.id = c.current_flow_id
  LEFT JOIN LATERAL (SELECT ${FLOW_COLUMNS}) fl ON true`;

/** to_jsonb turns timestamps into text: back to Dates, as pg returns them elsewhere. */
function reviveFlow(raw: Record<string, unknown> | null): FlowRow | null {
  if (!raw) return null;
  const date = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string));
  return {
    ...(raw as unknown as FlowRow),
    handoff_used_at: date(raw.handoff_used_at),
    heartbeat_at: date(raw.heartbeat_at),
    expires_at: date(raw.expires_at)!,
    started_at: date(raw.started_at)!,
    updated_at: date(raw.updated_at)!,
    finished_at: date(raw.finished_at),
  };
}

const toConnection = (row: Record<string, unknown>): ConnectionRow =>
  ({ ...row, flow: reviveFlow(row.flow as Record<string, unknown> | null) }) as ConnectionRow;

export interface NewConnection {
  id: string;
  domain: string;
  profileId: string;
  profileName: string;
  allowedDomains: string[];
  autoReauth: boolean;
  healthChecks: boolean;
  healthCheckInterval: number;
  loginUrl: string | null;
  proxyId: string | null;
  recordSession: boolean;
  saveCredentials: boolean;
  browserTelemetry: TelemetryRequest | null;
  credential: CredentialRef | null;
  credentialId: string | null;
  /** The AuthConnection resource (namespace/name) making it, when the operator does. */
  kubernetesResource?: string | undefined;
  now: Date;
}

export async function insertConnection(db: Queryable, scope: Scope, c: NewConnection): Promise<void> {
  await db.query(
    `INSERT INTO auth_connections (id, org_id, project_id, domain, profile_id, profile_name, allowed_domains, auto_reauth,
       health_checks, health_check_interval, login_url, proxy_id, record_session, save_credentials, browser_telemetry,
       credential, credential_id, created_at, updated_at, kubernetes_resource)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $18, $17, $17, $19)`,
    [
      c.id,
      scope.orgId,
      scope.projectId,
      c.domain,
      c.profileId,
      c.profileName,
      c.allowedDomains,
      c.autoReauth,
      c.healthChecks,
      c.healthCheckInterval,
      c.loginUrl,
      c.proxyId,
      c.recordSession,
      c.saveCredentials,
      c.browserTelemetry === null ? null : JSON.stringify(c.browserTelemetry),
      c.credential === null ? null : JSON.stringify(c.credential),
      c.now,
      c.credentialId,
      c.kubernetesResource ?? null,
    ],
  );
}

export async function findConnection(db: Queryable, scope: Scope, id: string, options: { lock?: boolean } = {}): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(
    `${SELECT_CONNECTION} WHERE c.org_id = $1 AND c.project_id = $2 AND c.id = $3${options.lock ? ' FOR UPDATE OF c' : ''}`,
    [scope.orgId, scope.projectId, id],
  );
  return rows[0] ? toConnection(rows[0]) : undefined;
}

/** For background work that starts from an id alone (jobs, the flow driver). */
export async function findConnectionById(db: Queryable, id: string): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(`${SELECT_CONNECTION} WHERE c.id = $1`, [id]);
  return rows[0] ? toConnection(rows[0]) : undefined;
}

/** The connection an AuthConnection resource (namespace/name) manages, across tenants. */
export async function findManagedConnection(db: Queryable, resource: string): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(`${SELECT_CONNECTION} WHERE c.kubernetes_resource = $1`, [resource]);
  return rows[0] ? toConnection(rows[0]) : undefined;
}

export interface ConnectionFilter {
  limit: number;
  offset: number;
  domain?: string | undefined;
  profile_name?: string | undefined;
  query?: string | undefined;
}

export async function listConnections(db: Queryable, scope: Scope, filter: ConnectionFilter): Promise<ConnectionRow[]> {
  const { rows } = await db.query(
    `${SELECT_CONNECTION}
      WHERE c.org_id = $1 AND c.project_id = $2
        AND ($3::text IS NULL OR c.domain = $3)
        AND ($4::text IS NULL OR p.name_key = $4 OR (p.id IS NULL AND lower(c.profile_name) = lower($5::text)))
        AND ($7::text IS NULL OR c.id = $6::text OR c.domain LIKE '%' || $7 || '%' ESCAPE '\\'
             OR lower(coalesce(p.name, c.profile_name)) LIKE '%' || $7 || '%' ESCAPE '\\')
      ORDER BY c.created_at DESC, c.seq DESC
      LIMIT $8 OFFSET $9`,
    [
      scope.orgId,
      scope.projectId,
      filter.domain ?? null,
      filter.profile_name === undefined ? null : foldName(filter.profile_name),
      // Kept apart: the deleted-profile fallback compares the name, the id match the query.
      filter.profile_name ?? null,
      filter.query ?? null,
      filter.query === undefined ? null : escapeLike(filter.query.toLowerCase()),
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows.map(toConnection);
}

export type ConnectionChange = Partial<{
  allowed_domains: string[];
  auto_reauth: boolean;
  health_checks: boolean;
  health_check_interval: number;
  login_url: string | null;
  proxy_id: string | null;
  record_session: boolean;
  save_credentials: boolean;
  browser_telemetry: TelemetryRequest | null;
  credential: CredentialRef | null;
  credential_id: string | null;
  status: ConnectionStatus;
  last_auth_check_at: Date;
  post_login_url: string | null;
  sso_provider: string | null;
  login_requirements: LoginRequirements | null;
  current_flow_id: string;
}>;

const JSON_COLUMNS = new Set(['browser_telemetry', 'credential', 'login_requirements']);

export async function updateConnection(db: Queryable, id: string, change: ConnectionChange, now: Date): Promise<boolean> {
  const entries = Object.entries(change).filter(([, value]) => value !== undefined);
  const sets = entries.map(([column], i) => `${column} = $${i + 3}`);
  const values = entries.map(([column, value]) => (JSON_COLUMNS.has(column) && value !== null ? JSON.stringify(value) : value));
  const { rowCount } = await db.query(`UPDATE auth_connections SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1`, [id, now, ...values]);
  return (rowCount ?? 0) > 0;
}

export async function deleteConnection(db: Queryable, scope: Scope, id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM auth_connections WHERE org_id = $1 AND project_id = $2 AND id = $3', [
    scope.orgId,
    scope.projectId,
    id,
  ]);
  return (rowCount ?? 0) > 0;
}

export async function countProjectConnections(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM auth_connections WHERE project_id = $1', [projectId]);
  return rows[0]!.n;
}

// ---- flows -------------------------------------------------------------------------

export interface NewFlow {
  id: string;
  connectionId: string;
  type: FlowType;
  handoffHash: string;
  driver: string;
  expiresAt: Date;
  now: Date;
}

/** Inserts a running flow and makes it the connection's current one. */
export async function insertFlow(db: Queryable, scope: Scope, f: NewFlow): Promise<void> {
  await db.query(
    `INSERT INTO auth_flows (id, connection_id, org_id, project_id, type, status, step, handoff_hash, driver, heartbeat_at,
       expires_at, started_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, 'IN_PROGRESS', 'DISCOVERING', $6, $7, $8, $9, $8, $8)`,
    [f.id, f.connectionId, scope.orgId, scope.projectId, f.type, f.handoffHash, f.driver, f.now, f.expiresAt],
  );
  await db.query('UPDATE auth_connections SET current_flow_id = $2, updated_at = $3 WHERE id = $1', [f.connectionId, f.id, f.now]);
}

export async function findFlow(db: Queryable, id: string): Promise<FlowRow | undefined> {
  const { rows } = await db.query(`SELECT ${FLOW_COLUMNS} FROM auth_flows f WHERE f.id = $1`, [id]);
  return rows[0] as FlowRow | undefined;
}

export type FlowChange = Partial<{
  status: FlowStatus;
  step: FlowStep;
  browser_session_id: string | null;
  view: FlowView;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  post_login_url: string | null;
  heartbeat_at: Date;
  finished_at: Date;
}>;

/**
 * Changes a running flow; false when it is no longer running (finished, or deleted with
 * its connection), which tells the driver to stop.
 */
export async function updateRunningFlow(db: Queryable, id: string, change: FlowChange, now: Date): Promise<boolean> {
  const entries = Object.entries(change).filter(([, value]) => value !== undefined);
  const sets = entries.map(([column], i) => `${column} = $${i + 3}`);
  const values = entries.map(([column, value]) => (column === 'view' ? JSON.stringify(value) : value));
  const { rowCount } = await db.query(
    `UPDATE auth_flows SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1 AND status = 'IN_PROGRESS'`,
    [id, now, ...values],
  );
  return (rowCount ?? 0) > 0;
}

/** Stores a submission for the driver, only while the flow awaits input and holds none. */
export async function storePendingInput(db: Queryable, id: string, sealed: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE auth_flows SET pending_input = $2, input_seq = input_seq + 1, updated_at = $3
      WHERE id = $1 AND status = 'IN_PROGRESS' AND step = 'AWAITING_INPUT' AND pending_input IS NULL`,
    [id, sealed, now],
  );
  return (rowCount ?? 0) > 0;
}

/** The driver takes the submission (and clears it) in one statement. */
export async function takePendingInput(db: Queryable, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ pending_input: string }>(
    `UPDATE auth_flows f SET pending_input = NULL FROM (SELECT id, pending_input FROM auth_flows WHERE id = $1 FOR UPDATE) old
      WHERE f.id = old.id AND old.pending_input IS NOT NULL RETURNING old.pending_input`,
    [id],
  );
  return rows[0]?.pending_input;
}

/** Flows whose driver stopped beating (its replica died): failed by whoever sees them. */
type Orphan = { id: string; connection_id: string; browser_session_id: string | null };
export async function failOrphanedFlows(db: Queryable, staleBefore: Date, now: Date): Promise<Orphan[]> {
  const { rows } = await db.query<Orphan>(
    `UPDATE auth_flows SET status = CASE WHEN expires_at <= $2 THEN 'EXPIRED' ELSE 'FAILED' END, step = 'COMPLETED',
        error_code = CASE WHEN expires_at <= $2 THEN 'flow_expired' ELSE 'flow_interrupted' END,
        error_message = CASE WHEN expires_at <= $2 THEN 'The login flow expired' ELSE 'The service driving this login flow stopped' END,
        pending_input = NULL, finished_at = $2, updated_at = $2
      WHERE status = 'IN_PROGRESS' AND heartbeat_at < $1
      RETURNING id, connection_id, browser_session_id`,
    [staleBefore, now],
  );
  return rows;
}

// ---- hosted page ------------------------------------------------------------------

/** Exchanges the one-time handoff code: true once per code. */
export async function useHandoff(db: Queryable, flowId: string, handoffHash: string, pageTokenHash: string, now: Date): Promise<FlowRow | undefined> {
  const { rows } = await db.query(
    `UPDATE auth_flows f SET handoff_used_at = $4, page_token_hash = $3
      WHERE f.id = $1 AND f.handoff_hash = $2 AND f.handoff_used_at IS NULL AND f.status = 'IN_PROGRESS' AND f.expires_at > $4
      RETURNING ${FLOW_COLUMNS}`,
    [flowId, handoffHash, pageTokenHash, now],
  );
  return rows[0] as FlowRow | undefined;
}

export async function findFlowByPageToken(db: Queryable, flowId: string, pageTokenHash: string): Promise<FlowRow | undefined> {
  const { rows } = await db.query(`SELECT ${FLOW_COLUMNS} FROM auth_flows f WHERE f.id = $1 AND f.page_token_hash = $2`, [flowId, pageTokenHash]);
  return rows[0] as FlowRow | undefined;
}

// ---- health checks and timeline ---------------------------------------------------

export async function insertHealthCheck(
  db: Queryable,
  check: { id: string; connectionId: string; previousStatus: ConnectionStatus; now: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO auth_health_checks (id, connection_id, previous_status, started_at, updated_at) VALUES ($1, $2, $3, $4, $4)`,
    [check.id, check.connectionId, check.previousStatus, check.now],
  );
}

export async function finishHealthCheck(
  db: Queryable,
  id: string,
  result: { status: ConnectionStatus | null; browserSessionId: string | null; errorCode?: string; errorMessage?: string; now: Date },
): Promise<void> {
  await db.query(
    `UPDATE auth_health_checks SET status = $2, browser_session_id = $3, error_code = $4, error_message = $5, updated_at = $6 WHERE id = $1`,
    [id, result.status, result.browserSessionId, result.errorCode ?? null, result.errorMessage ?? null, result.now],
  );
}

export interface TimelineRow {
  id: string;
  type: 'login' | 'reauth' | 'health_check';
  status: string | null;
  step: string | null;
  browser_session_id: string | null;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  previous_status: string | null;
  started_at: Date;
  updated_at: Date;
}

export async function listTimeline(
  db: Queryable,
  connectionId: string,
  filter: { limit: number; offset: number; type?: 'login' | 'reauth' | 'health_check' | undefined },
): Promise<TimelineRow[]> {
  const { rows } = await db.query<TimelineRow>(
    `SELECT * FROM (
        SELECT id, lower(type) AS type, status, step, browser_session_id, error_code, error_message, website_error,
               NULL::text AS previous_status, started_at, updated_at, seq
          FROM auth_flows WHERE connection_id = $1
        UNION ALL
        SELECT id, 'health_check', coalesce(status, previous_status), NULL, browser_session_id, error_code, error_message, NULL,
               previous_status, started_at, updated_at, seq
          FROM auth_health_checks WHERE connection_id = $1
      ) t
      WHERE $2::text IS NULL OR t.type = $2
      ORDER BY t.started_at DESC, t.seq DESC
      LIMIT $3 OFFSET $4`,
    [connectionId, filter.type ?? null, filter.limit + 1, filter.offset],
  );
  return rows;
}
