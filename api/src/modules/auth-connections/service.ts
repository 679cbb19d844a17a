import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction, pgErrorCode, UNIQUE_VIOLATION, type Queryable } from '../../db/pool.js';
import { channelName } from '../../events/hub.js';
import { badRequest, conflict, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import { scheduleJob, unscheduleJob } from '../../jobs/queue.js';
import type { Actor, ProjectScope } from '../../scope.js';
import { createCdpTokens } from '../browsers/cdp-token.js';
import { publicWsBase } from '../browsers/present.js';
import { getProvider } from '../credential-providers/index.js';
import { findCredential } from '../credentials/store.js';
import { findLiveProfileById, findProfile, insertProfile } from '../profiles/store.js';
import { shareLockLiveProject } from '../projects/store.js';
import { findProxy } from '../proxies/store.js';
import {
  DEFAULT_HEALTH_CHECK_INTERVAL,
  type CreateConnectionInput,
  type CredentialRef,
  type FlowType,
  type UpdateConnectionInput,
} from './schema.js';
import { insertFlow } from './flow-store.js';
import type { ConnectionRow } from './rows.js';
import {
  countProjectConnections,
  deleteConnection,
  findConnection,
  findProxyIdsNamed,
  insertConnection,
  repointProfile,
  updateConnection,
  type ConnectionChange,
} from './store.js';
import { hostedPath, isRunning, type ViewContext } from './view.js';

export const DEFAULT_MIN_HEALTH_CHECK_INTERVAL = 300;
/** How long a person has to finish a login; a re-auth nobody watches gets less. */
export const LOGIN_FLOW_TTL_SECONDS = 15 * 60;
export const REAUTH_FLOW_TTL_SECONDS = 5 * 60;
export const HEALTH_CHECK_TASK = 'auth_health_check';

export const connectionChannel = (id: string) => channelName('auth', id);
export const healthCheckJobKey = (id: string) => `auth-health:${id}`;
export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * A project scope as the create use case takes it: with the project's name when the caller
 * knows it, for the message when the project is gone by the time the connection is made.
 */
export type NamedProjectScope = ProjectScope & { projectName?: string | undefined };

/**
 * Who changes a connection: the API (no resource) or the operator on behalf of the
 * AuthConnection resource (namespace/name) that manages it.
 */
export interface ConnectionWriter {
  kubernetesResource?: string | undefined;
}

/**
 * A connection a Kubernetes resource manages is changed through that resource only: its
 * GitOps tool would put its own settings back. Logins, submissions and reads stay open:
 * they change the connection's auth state, which the manifest does not declare.
 */
function refuseUnlessWriterManages(row: Pick<ConnectionRow, 'kubernetes_resource'>, writer: ConnectionWriter): void {
  if (row.kubernetes_resource === null || row.kubernetes_resource === writer.kubernetesResource) return;
  throw conflict(
    'auth_connection_managed_by_kubernetes',
    `The auth connection is managed by the Kubernetes AuthConnection ${row.kubernetes_resource}; change or delete that resource instead (kubectl, or its GitOps repository)`,
    [{ code: 'kubernetes_resource', message: `AuthConnection ${row.kubernetes_resource}` }],
  );
}

export function viewContext(deps: AppDeps, req?: IncomingMessage): ViewContext {
  return { httpBase: publicWsBase(deps, req).replace(/^ws/, 'http'), tokens: createCdpTokens(deps) };
}

export async function getConnection(deps: Pick<AppDeps, 'db'>, scope: ProjectScope, id: string): Promise<ConnectionRow> {
  const row = await findConnection(deps.db, scope, id);
  if (!row) throw notFound('Auth connection', id);
  return row;
}

/** A proxy by id, or by a name that must match exactly one proxy of the project. */
export async function resolveProxyRef(db: Queryable, scope: ProjectScope, ref: { id?: string | undefined; name?: string | undefined }): Promise<string> {
  if (ref.id !== undefined) {
    const row = await findProxy(db, scope.orgId, scope.projectId, ref.id);
    if (!row) throw notFound('Proxy', ref.id);
    return row.id;
  }
  const rows = await findProxyIdsNamed(db, scope, ref.name);
  if (rows.length !== 1) {
    throw badRequest(
      'invalid_proxy',
      rows.length === 0 ? `No proxy is named ${JSON.stringify(ref.name)}` : `More than one proxy is named ${JSON.stringify(ref.name)}; use its id`,
      [{ code: rows.length === 0 ? 'not_found' : 'ambiguous', message: 'must name exactly one proxy', field: 'body.proxy.name' }],
    );
  }
  return rows[0]!;
}

/**
 * A credential ref, resolved to the stored credential's id; a provider ref (an org's
 * external credential provider, by name or id) resolves to null: its item is looked up at
 * login time and nothing of it is stored.
 */
async function resolveCredentialRef(db: Queryable, scope: ProjectScope, ref: CredentialRef): Promise<string | null> {
  if (ref.provider !== undefined) {
    await getProvider(db, scope, ref.provider);
    return null;
  }
  const row = await findCredential(db, scope, ref.name!);
  if (!row) throw notFound('Credential', ref.name!);
  return row.id;
}

function checkInterval(deps: AppDeps, interval: number | undefined): void {
  const min = deps.settings.authMinHealthCheckIntervalSeconds ?? DEFAULT_MIN_HEALTH_CHECK_INTERVAL;
  if (interval !== undefined && interval < min) {
    throw badRequest('invalid_request', `health_check_interval must be at least ${min} seconds on this service`, [
      { code: 'too_small', message: `must be at least ${min}`, field: 'body.health_check_interval' },
    ]);
  }
}

/** Keeps the connection's one scheduled health check in step with its settings. */
export async function rescheduleHealthCheck(deps: AppDeps, db: Queryable, row: Pick<ConnectionRow, 'id' | 'health_checks' | 'health_check_interval'>): Promise<void> {
  if (!row.health_checks) return unscheduleJob(db, healthCheckJobKey(row.id));
  const runAt = new Date(deps.clock.now().getTime() + row.health_check_interval * 1000);
  await scheduleJob(db, HEALTH_CHECK_TASK, { connection_id: row.id }, runAt, healthCheckJobKey(row.id));
}

/**
 * The use cases below act in `scope` for `actor`: a caller's API key (routes) or the
 * operator (AuthConnection resources). Nothing records the actor yet; taking it keeps
 * every caller naming itself instead of posing as an API key.
 */
export async function createConnection(
  deps: AppDeps,
  scope: NamedProjectScope,
  actor: Actor,
  input: CreateConnectionInput,
  writer: ConnectionWriter = {},
): Promise<ConnectionRow> {
  checkInterval(deps, input.health_check_interval);
  const id = newId('mauth');
  try {
    await inTransaction(deps.db, async (tx) => {
      const project = await shareLockLiveProject(tx, scope.orgId, scope.projectId);
      if (project?.id !== scope.projectId) throw notFound('Project', scope.projectName ?? scope.projectId);
      const proxyId = input.proxy ? await resolveProxyRef(tx, scope, input.proxy) : null;
      const credentialId = input.credential ? await resolveCredentialRef(tx, scope, input.credential) : null;
      const now = deps.clock.now();
      const profile =
        (await findProfile(tx, scope, input.profile_name)) ?? (await insertProfile(tx, scope, { name: input.profile_name, now }));
      const healthChecks = input.health_checks ?? true;
      const interval = input.health_check_interval ?? DEFAULT_HEALTH_CHECK_INTERVAL;
      await insertConnection(tx, scope, {
        id,
        domain: input.domain,
        profileId: profile.id,
        profileName: profile.name ?? input.profile_name,
        allowedDomains: [...new Set(input.allowed_domains ?? [])],
        autoReauth: input.auto_reauth ?? true,
        healthChecks,
        healthCheckInterval: interval,
        loginUrl: input.login_url ?? null,
        proxyId,
        recordSession: input.record_session ?? false,
        saveCredentials: input.save_credentials ?? true,
        browserTelemetry: input.browser_telemetry ?? null,
        credential: input.credential ?? null,
        credentialId,
        kubernetesResource: writer.kubernetesResource,
        now,
      });
      await rescheduleHealthCheck(deps, tx, { id, health_checks: healthChecks, health_check_interval: interval });
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION && (error as { constraint?: string }).constraint === 'auth_connections_profile_domain') {
      throw conflict('auth_connection_exists', `An auth connection for profile ${JSON.stringify(input.profile_name)} and ${input.domain} already exists`);
    }
    if (pgErrorCode(error) === UNIQUE_VIOLATION && (error as { constraint?: string }).constraint === 'profiles_project_name_key_live') {
      // A profile of that name was created at the same moment: take it on a retry.
      return createConnection(deps, scope, actor, input, writer);
    }
    throw error;
  }
  return getConnection(deps, scope, id);
}

export async function changeConnection(
  deps: AppDeps,
  scope: ProjectScope,
  actor: Actor,
  id: string,
  input: UpdateConnectionInput,
  writer: ConnectionWriter = {},
): Promise<ConnectionRow> {
  checkInterval(deps, input.health_check_interval);
  await inTransaction(deps.db, async (tx) => {
    const row = await findConnection(tx, scope, id, { lock: true });
    if (!row) throw notFound('Auth connection', id);
    refuseUnlessWriterManages(row, writer);
    const change: ConnectionChange = {
      allowed_domains: input.allowed_domains === undefined ? undefined : [...new Set(input.allowed_domains)],
      auto_reauth: input.auto_reauth,
      health_checks: input.health_checks,
      health_check_interval: input.health_check_interval,
      login_url: input.login_url === undefined ? undefined : input.login_url === '' ? null : input.login_url,
      record_session: input.record_session,
      save_credentials: input.save_credentials,
      browser_telemetry: input.browser_telemetry === undefined ? undefined : input.browser_telemetry?.enabled === false ? null : input.browser_telemetry,
    };
    if (input.proxy !== undefined) change.proxy_id = await resolveProxyRef(tx, scope, input.proxy);
    if (input.credential !== undefined) {
      change.credential_id = await resolveCredentialRef(tx, scope, input.credential);
      change.credential = input.credential;
    }
    await updateConnection(tx, row.id, change, deps.clock.now());
    const scheduleChanged = input.health_checks !== undefined || input.health_check_interval !== undefined;
    if (scheduleChanged) {
      await rescheduleHealthCheck(deps, tx, {
        id: row.id,
        health_checks: input.health_checks ?? row.health_checks,
        health_check_interval: input.health_check_interval ?? row.health_check_interval,
      });
    }
  });
  return getConnection(deps, scope, id);
}

/**
 * Removes the connection, its flows and health checks (rows cascade) and its scheduled
 * check. A login in progress is cancelled: its driver learns from the notification (or
 * its next write finding no row) and closes the browser without saving the profile.
 */
export async function removeConnection(deps: AppDeps, scope: ProjectScope, actor: Actor, id: string, writer: ConnectionWriter = {}): Promise<void> {
  await inTransaction(deps.db, async (tx) => {
    const row = await findConnection(tx, scope, id, { lock: true });
    if (!row) throw notFound('Auth connection', id);
    refuseUnlessWriterManages(row, writer);
    await deleteConnection(tx, scope, id);
    await unscheduleJob(tx, healthCheckJobKey(id));
    await deps.events.publish(connectionChannel(id), { id, deleted: true }, tx);
  });
}

export interface LoginStart {
  row: ConnectionRow;
  flowId: string;
  handoffCode: string;
}

/**
 * Starts a flow: checks that none runs, writes it with its hashed handoff code, and
 * returns; the flow manager opens the browser and drives it.
 */
export async function beginFlow(deps: AppDeps, scope: ProjectScope, id: string, type: FlowType, driver: string): Promise<LoginStart> {
  const flowId = newId('maflow');
  const handoffCode = randomBytes(24).toString('base64url');
  const ttl = deps.settings.authFlowTtlSeconds ?? (type === 'LOGIN' ? LOGIN_FLOW_TTL_SECONDS : REAUTH_FLOW_TTL_SECONDS);
  try {
    await inTransaction(deps.db, async (tx) => {
      const row = await findConnection(tx, scope, id, { lock: true });
      if (!row) throw notFound('Auth connection', id);
      if (isRunning(row.flow)) throw conflict('flow_in_progress', 'A login flow is already running for this connection; follow it or delete the connection to cancel it');
      const now = deps.clock.now();
      if (!(await findLiveProfileById(tx, row.profile_id))) {
        // The profile was deleted since: the login makes it again under the same name.
        const profile = (await findProfile(tx, scope, row.profile_name)) ?? (await insertProfile(tx, scope, { name: row.profile_name, now }));
        await repointProfile(tx, row.id, { id: profile.id, name: profile.name ?? row.profile_name });
      }
      await insertFlow(tx, scope, {
        id: flowId,
        connectionId: id,
        type,
        handoffHash: sha256(handoffCode),
        driver,
        expiresAt: new Date(now.getTime() + ttl * 1000),
        now,
      });
      await deps.events.publish(connectionChannel(id), { id, flow: flowId }, tx);
    });
  } catch (error) {
    const constraint = (error as { constraint?: string }).constraint;
    if (pgErrorCode(error) === UNIQUE_VIOLATION && constraint === 'auth_flows_one_running') {
      throw conflict('flow_in_progress', 'A login flow is already running for this connection');
    }
    if (pgErrorCode(error) === UNIQUE_VIOLATION && constraint === 'auth_connections_profile_domain') {
      throw conflict('auth_connection_exists', 'The connection’s profile was deleted, and the profile now under its name is already kept logged into this domain by another connection');
    }
    throw error;
  }
  return { row: await getConnection(deps, scope, id), flowId, handoffCode };
}

export function presentLogin(ctx: ViewContext, row: ConnectionRow, handoffCode: string, liveViewUrl: string | null) {
  const flow = row.flow!;
  return {
    id: flow.id,
    flow_type: flow.type,
    hosted_url: `${ctx.httpBase}${hostedPath(flow.id)}#code=${handoffCode}`,
    handoff_code: handoffCode,
    flow_expires_at: flow.expires_at.toISOString(),
    ...(liveViewUrl ? { live_view_url: liveViewUrl } : {}),
  };
}

export const countProjectAuthConnections: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'auth_connections',
  count: await countProjectConnections(db, projectId),
});

