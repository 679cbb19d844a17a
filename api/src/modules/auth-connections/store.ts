import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import type { ProjectScope } from '../../scope.js';
import { escapeLike } from '../projects/store.js';
import type { TelemetryRequest } from '../browsers/telemetry.js';
import { FLOW_COLUMNS, reviveFlow } from './flow-store.js';
import type { ConnectionRow, LoginRequirements } from './rows.js';
import type { ConnectionStatus, CredentialRef } from './schema.js';

/**
 * The auth_connections table. The flows (flow-store.ts) and the health checks and timeline
 * (history-store.ts) have their own stores; the row types are in rows.ts, re-exported here
 * for the modules that read them with the rows.
 */
export type { ConnectionRow, FlowRow, LoginRequirements, TimelineRow } from './rows.js';

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

export async function insertConnection(db: Queryable, scope: ProjectScope, c: NewConnection): Promise<void> {
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

export async function findConnection(db: Queryable, scope: ProjectScope, id: string, options: { lock?: boolean } = {}): Promise<ConnectionRow | undefined> {
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

export async function listConnections(db: Queryable, scope: ProjectScope, filter: ConnectionFilter): Promise<ConnectionRow[]> {
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

export async function deleteConnection(db: Queryable, scope: ProjectScope, id: string): Promise<boolean> {
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

/** The login remakes a deleted profile under the same name: the connection follows it. */
export async function repointProfile(db: Queryable, id: string, profile: { id: string; name: string }): Promise<void> {
  await db.query('UPDATE auth_connections SET profile_id = $2, profile_name = $3 WHERE id = $1', [id, profile.id, profile.name]);
}

/** Up to two live proxies of the project with this name (two: the name is ambiguous). */
export async function findProxyIdsNamed(db: Queryable, scope: ProjectScope, name: string | undefined): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM proxies WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL AND name = $3 LIMIT 2',
    [scope.orgId, scope.projectId, name],
  );
  return rows.map((row) => row.id);
}

/** The project a connection belongs to, for work that starts from its row (the flow engine). */
export const scopeOfConnection = (row: Pick<ConnectionRow, 'org_id' | 'project_id'>): ProjectScope => ({ orgId: row.org_id, projectId: row.project_id });
