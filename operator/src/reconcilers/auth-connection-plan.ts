/**
 * The AuthConnection reconciler's decisions, as pure functions (no cluster, no database):
 * what connection a resource asks for, what to do about its connection row, and the
 * status to report. auth-connection.ts observes, executes and reports around them.
 *
 * Only resources applied with kubectl or a GitOps tool are reconciled here (no
 * `created-by: api` annotation). The connection lives in Postgres like any other: logins,
 * re-auths and health checks run in the API replicas (graphile-worker jobs and the flow
 * engine); this reconciler keeps the row's settings in step with the resource and reports
 * the row's auth state back into the resource's status.
 */
import type { z } from 'zod';
import { foldName } from '../../../api/src/index.js';
import { judgeReauth } from '../../../api/src/modules/auth-connections/index.js';
import {
  createConnectionBody,
  DEFAULT_HEALTH_CHECK_INTERVAL,
  updateConnectionBody,
  type CreateConnectionInput,
  type UpdateConnectionInput,
} from '../../../api/src/modules/auth-connections/index.js';
import type { ConnectionRow } from '../../../api/src/modules/auth-connections/index.js';
import { wireBodyOf, wireSchemaOf } from '../k8s/structural-schema.js';
import { AUTH_CONDITION_TYPES, AUTH_READY_REASONS, FINALIZERS } from '../../../contract/kinds.js';
import { kubeTime, nextCondition, type Condition } from './conditions.js';
import { sameJson } from './status.js';

/** Reasons of the Ready condition (contract/kinds/auth-connection.ts). */
export const READY_REASONS = AUTH_READY_REASONS;
export const CONDITION_TYPES = AUTH_CONDITION_TYPES;

/**
 * How soon to look again without an event. The event hub requeues at once when the row
 * changes; these are the fallback for a notification lost while the listener reconnected.
 */
export const REQUEUE_MS = { flowRunning: 5_000, steady: 60_000 } as const;

/** Held until the connection the resource stands for is deleted. */
export const AUTH_CONNECTION_FINALIZER = FINALIZERS.authConnection;

const CONNECTION_WIRE = wireSchemaOf(createConnectionBody);

export type DesiredConnection = { ok: true; input: CreateConnectionInput; projectRef: string | undefined } | { ok: false; message: string };

function issuesText(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? `spec.${issue.path.join('.')}` : 'spec'}: ${issue.message}`).join('; ');
}

/** The connection a resource asks for: its spec as the API's create body, checked by the same schema a POST is. */
export function desiredConnectionOf(resource: { spec: unknown }): DesiredConnection {
  const spec = resource.spec;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return { ok: false, message: 'spec: must be an object' };
  const { project, ...rest } = spec as Record<string, unknown>;
  if (project !== undefined && (typeof project !== 'string' || project === '')) return { ok: false, message: 'spec.project: must be a non-empty string' };
  const parsed = createConnectionBody.safeParse(wireBodyOf(CONNECTION_WIRE, rest));
  if (!parsed.success) return { ok: false, message: issuesText(parsed.error) };
  return { ok: true, input: parsed.data, projectRef: project };
}

/** The row fields the plan compares and reports. */
export type ObservedConnection = Pick<
  ConnectionRow,
  | 'id'
  | 'org_id'
  | 'project_id'
  | 'domain'
  | 'profile_name'
  | 'allowed_domains'
  | 'auto_reauth'
  | 'health_checks'
  | 'health_check_interval'
  | 'login_url'
  | 'proxy_id'
  | 'record_session'
  | 'save_credentials'
  | 'browser_telemetry'
  | 'credential'
>;

/** Telemetry as it reads back: absent, null and enabled false all capture nothing. */
const effectiveTelemetry = (t: CreateConnectionInput['browser_telemetry'] | null | undefined) => (t === undefined || t === null || t.enabled === false ? null : t);
const domainSet = (domains: readonly string[]) => [...new Set(domains)].sort();

/**
 * The PATCH that brings a connection's settings to the desired ones, or undefined when
 * they agree. Only changed fields are sent: a changed schedule reschedules the health
 * check, and nothing else should. A proxy or credential left out of the spec leaves the
 * row's as it is: the API cannot clear either, and a login with save_credentials stores
 * the credential it made on the row by itself. `proxyId` is the spec's proxy resolved to
 * an id (undefined: the spec names none).
 */
export function connectionUpdateOf(desired: CreateConnectionInput, row: ObservedConnection, proxyId: string | undefined): UpdateConnectionInput | undefined {
  const body: Record<string, unknown> = {};
  const want = {
    allowed_domains: domainSet(desired.allowed_domains ?? []),
    auto_reauth: desired.auto_reauth ?? true,
    health_checks: desired.health_checks ?? true,
    health_check_interval: desired.health_check_interval ?? DEFAULT_HEALTH_CHECK_INTERVAL,
    login_url: desired.login_url ?? null,
    record_session: desired.record_session ?? false,
    save_credentials: desired.save_credentials ?? true,
    browser_telemetry: effectiveTelemetry(desired.browser_telemetry),
  };
  const have = { ...want, ...pickSettings(row), allowed_domains: domainSet(row.allowed_domains), browser_telemetry: effectiveTelemetry(row.browser_telemetry) };
  for (const field of Object.keys(want) as (keyof typeof want)[]) {
    if (!sameJson(want[field], have[field])) body[field] = field === 'login_url' ? (want.login_url ?? '') : want[field];
  }
  if (desired.credential !== undefined && !sameJson(desired.credential, row.credential)) body.credential = desired.credential;
  if (proxyId !== undefined && proxyId !== row.proxy_id) body.proxy = { id: proxyId };
  return Object.keys(body).length === 0 ? undefined : updateConnectionBody.parse(body);
}

function pickSettings(row: ObservedConnection) {
  const { auto_reauth, health_checks, health_check_interval, login_url, record_session, save_credentials } = row;
  return { auto_reauth, health_checks, health_check_interval, login_url, record_session, save_credentials };
}

// ---- the plan ------------------------------------------------------------------------

export interface ObservedResource {
  /** namespace/name: what the connection row records as its manager. */
  key: string;
  generation: number;
  deleting: boolean;
  hasFinalizer: boolean;
  createdByApi: boolean;
  spec: unknown;
}

export interface Scope {
  orgId: string;
  projectId: string;
  /** For the API's messages (a project not found names it). */
  projectName: string;
}

export interface Observation {
  /** Undefined: the resource is gone (its finalizer was removed by hand). */
  resource: ObservedResource | undefined;
  desired: DesiredConnection | undefined;
  /** The bootstrap organisation and the project the spec names (or the default one); undefined when missing. */
  scope: Scope | undefined;
  /** The connection this resource manages. */
  connection: ObservedConnection | undefined;
  /** The spec's proxy as an id; undefined when the spec names none. */
  proxyId: string | undefined;
  /** Why the spec's references could not be resolved (an API refusal's code and message). */
  refusal: { code: string; message: string } | undefined;
  /** A connection for the same domain and profile in the project that this resource does not manage. */
  takenBy: string | undefined;
}

export interface Problem {
  reason: (typeof READY_REASONS)[keyof typeof READY_REASONS];
  message: string;
}

export type ConnectionStep =
  | { kind: 'none' }
  | { kind: 'create'; scope: Scope; input: CreateConnectionInput }
  | { kind: 'update'; connectionId: string; scope: Scope; input: UpdateConnectionInput }
  | { kind: 'delete'; connectionId: string; scope: Omit<Scope, 'projectName'> };

export interface Plan {
  /** Resources the API wrote are its own business. */
  ignore: boolean;
  finalizer: 'add' | 'remove' | 'keep';
  step: ConnectionStep;
  problem: Problem | undefined;
}

const nothing = (problem?: Problem): Omit<Plan, 'finalizer'> => ({ ignore: false, step: { kind: 'none' }, problem });
const invalid = (message: string): Problem => ({ reason: READY_REASONS.invalidSpec, message });

/** Why the row cannot become what the spec says without being made anew; undefined when it can. */
function immovable(desired: CreateConnectionInput, row: ObservedConnection, scope: Scope): string | undefined {
  const again = 'delete the resource and apply it again';
  if (row.project_id !== scope.projectId) return `spec.project: a connection cannot move to another project (it is in ${row.project_id}); ${again}`;
  if (row.domain !== desired.domain) return `spec.domain: a connection's domain cannot change (it is ${row.domain}); ${again}`;
  if (foldName(row.profile_name) !== foldName(desired.profile_name)) return `spec.profileName: a connection's profile cannot change (it is ${JSON.stringify(row.profile_name)}); ${again}`;
  return undefined;
}

export function planAuthConnection(observed: Observation): Plan {
  const { resource, connection } = observed;
  if (resource?.createdByApi) return { ...nothing(), ignore: true, finalizer: 'keep' };
  if (resource === undefined || resource.deleting) {
    const finalizer = resource?.hasFinalizer === true ? 'remove' : 'keep';
    if (!connection) return { ...nothing(), finalizer };
    return { ...nothing(), step: { kind: 'delete', connectionId: connection.id, scope: { orgId: connection.org_id, projectId: connection.project_id } }, finalizer };
  }
  const finalizer = resource.hasFinalizer ? 'keep' : 'add';
  const desired = observed.desired;
  if (!desired?.ok) return { ...nothing(invalid(desired?.message ?? 'spec: missing')), finalizer };
  const { scope } = observed;
  if (scope === undefined) {
    const named = desired.projectRef === undefined ? 'the default project' : `project ${JSON.stringify(desired.projectRef)}`;
    return { ...nothing({ reason: READY_REASONS.projectNotFound, message: `${named} does not exist in the installation's organisation` }), finalizer };
  }
  const stuck = connection && immovable(desired.input, connection, scope);
  if (stuck) return { ...nothing(invalid(stuck)), finalizer };
  if (observed.refusal) return { ...nothing(invalid(`${observed.refusal.code}: ${observed.refusal.message}`)), finalizer };
  if (!connection && observed.takenBy !== undefined) {
    const message = `an auth connection for profile ${JSON.stringify(desired.input.profile_name)} and ${desired.input.domain} already exists in the project (${observed.takenBy}) and is not managed by this resource`;
    return { ...nothing({ reason: READY_REASONS.nameConflict, message }), finalizer };
  }
  if (!connection) return { ...nothing(), step: { kind: 'create', scope, input: desired.input }, finalizer };
  const input = connectionUpdateOf(desired.input, connection, observed.proxyId);
  return { ...nothing(), step: input ? { kind: 'update', connectionId: connection.id, scope, input } : { kind: 'none' }, finalizer };
}

/** An API refusal of a create or update (AppError code and message), as the Ready condition reports it. */
export function problemOfRefusal(code: string, message: string): Problem {
  if (code === 'auth_connection_exists') return { reason: READY_REASONS.nameConflict, message };
  if (code === 'not_found' && /^Project\b/.test(message)) return { reason: READY_REASONS.projectNotFound, message };
  return invalid(`${code}: ${message}`);
}

// ---- status --------------------------------------------------------------------------

export interface AuthConnectionStatus {
  observedGeneration: number;
  connectionId?: string;
  project?: string;
  status?: ConnectionRow['status'];
  flowStatus?: NonNullable<ConnectionRow['flow']>['status'];
  flowStep?: NonNullable<ConnectionRow['flow']>['step'];
  flowType?: NonNullable<ConnectionRow['flow']>['type'];
  lastAuthCheckAt?: string;
  canReauth?: boolean;
  canReauthReason?: string;
  conditions: Condition[];
}

/** The row as the status reports it, read after this reconcile's step. */
export type ReportedConnection = Pick<
  ConnectionRow,
  'id' | 'project_id' | 'domain' | 'status' | 'last_auth_check_at' | 'credential_id' | 'credential_value_keys' | 'credential_has_totp' | 'login_requirements'
> & { flow: Pick<NonNullable<ConnectionRow['flow']>, 'status' | 'step' | 'type' | 'error_message'> | null };

export interface StatusInput {
  generation: number;
  connection: ReportedConnection | undefined;
  problem: Problem | undefined;
}

function readyOf({ connection, problem }: StatusInput): { status: Condition['status']; reason: string; message: string } {
  if (problem) return { status: 'False', reason: problem.reason, message: problem.message };
  if (!connection) return { status: 'False', reason: READY_REASONS.needsAuth, message: 'the connection is being created' };
  const flow = connection.flow;
  if (flow?.status === 'IN_PROGRESS') return { status: 'False', reason: READY_REASONS.loginInProgress, message: `a ${flow.type} flow is at step ${flow.step}` };
  if (connection.status === 'AUTHENTICATED') return { status: 'True', reason: READY_REASONS.authenticated, message: `the profile is logged into ${connection.domain}` };
  const why = flow ? `the last ${flow.type} flow ended ${flow.status}${flow.error_message ? `: ${flow.error_message}` : ''}` : 'no login has run yet';
  return { status: 'False', reason: READY_REASONS.needsAuth, message: `${why}; start one with POST /auth/connections/${connection.id}/login` };
}

/** The status to report; `previous` supplies the transition time to keep. */
export function connectionStatusOf(input: StatusInput, previous: { conditions?: Condition[] } | undefined, now: Date): AuthConnectionStatus {
  const ready = nextCondition(previous?.conditions, { type: CONDITION_TYPES.ready, ...readyOf(input) }, input.generation, now);
  const { connection } = input;
  if (!connection) return { observedGeneration: input.generation, conditions: [ready] };
  const flow = connection.flow;
  const reauth = judgeReauth(connection);
  return {
    observedGeneration: input.generation,
    connectionId: connection.id,
    project: connection.project_id,
    status: connection.status,
    ...(flow ? { flowStatus: flow.status, flowStep: flow.status === 'IN_PROGRESS' ? flow.step : ('COMPLETED' as const), flowType: flow.type } : {}),
    ...(connection.last_auth_check_at ? { lastAuthCheckAt: kubeTime(connection.last_auth_check_at) } : {}),
    canReauth: reauth.can,
    canReauthReason: reauth.reason,
    conditions: [ready],
  };
}

/** When to reconcile again without an event (the event hub usually comes first). */
export function requeueAfterMs(plan: Plan, status: AuthConnectionStatus | undefined): number | undefined {
  if (plan.ignore || plan.step.kind === 'delete' || status === undefined) return undefined;
  return status.flowStatus === 'IN_PROGRESS' ? REQUEUE_MS.flowRunning : REQUEUE_MS.steady;
}
