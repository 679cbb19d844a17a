/**
 * The BrowserPool reconciler's decisions, as pure functions (no cluster, no database):
 * what pool configuration a resource asks for, what to do about its pool row, and the
 * status to report. browser-pool.ts observes, executes and reports around them.
 *
 * Only resources applied with kubectl or a GitOps tool are reconciled here (no
 * `created-by: api` annotation). Their pool lives in Postgres like any other: the API
 * replicas fill it, lease and release its browsers; this reconciler keeps the row in step
 * with the resource and drains it when the resource is deleted.
 */
import type { z } from 'zod';
import { DEFAULT_VIEWPORT } from '../../../api/src/modules/browsers/index.js';
import { applyTelemetry, type TelemetryConfig } from '../../../api/src/modules/browsers/index.js';
import {
  createPoolBody,
  DEFAULT_FILL_RATE_PER_MINUTE,
  DEFAULT_POOL_TIMEOUT_SECONDS,
  updatePoolBody,
  type CreatePoolInput,
  type UpdatePoolInput,
} from '../../../api/src/modules/browser-pools/index.js';
import { wireBodyOf, wireSchemaOf } from '../k8s/structural-schema.js';
import { nextCondition, type Condition, type ConditionValue } from './conditions.js';
import { sameJson } from './status.js';
import { LABELS, POOL_CONDITION_TYPES, POOL_DRAINING_REASONS, POOL_READY_REASONS } from '../../../contract/kinds.js';

/** Reasons of the Ready and Draining conditions (contract/kinds/browser-pool.ts). */
export const READY_REASONS = POOL_READY_REASONS;
export const DRAINING_REASONS = POOL_DRAINING_REASONS;
export const CONDITION_TYPES = POOL_CONDITION_TYPES;

/** How soon to look again: counts change without any resource event. */
export const REQUEUE_MS = { draining: 1_000, filling: 5_000, steady: 30_000 } as const;

const POOL_WIRE = wireSchemaOf(createPoolBody);

export type DesiredPool = { ok: true; input: CreatePoolInput & { name: string }; projectRef: string | undefined } | { ok: false; message: string };

function issuesText(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length > 0 ? `spec.${issue.path.join('.')}` : 'spec'}: ${issue.message}`).join('; ');
}

/**
 * The pool a resource asks for: its spec as the API's create body, checked by the same
 * schema a POST is; its name is spec.name, else the resource's name.
 */
export function desiredPoolOf(resource: { name: string; spec: unknown }): DesiredPool {
  const spec = resource.spec;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return { ok: false, message: 'spec: must be an object' };
  const { project, ...rest } = spec as Record<string, unknown>;
  if (project !== undefined && (typeof project !== 'string' || project === '')) return { ok: false, message: 'spec.project: must be a non-empty string' };
  const parsed = createPoolBody.safeParse(wireBodyOf(POOL_WIRE, rest));
  if (!parsed.success) return { ok: false, message: issuesText(parsed.error) };
  const name = parsed.data.name === undefined || parsed.data.name === '' ? resource.name : parsed.data.name;
  return { ok: true, input: { ...parsed.data, name }, projectRef: project };
}

/** A pool's configuration with every default filled in, so absent and default compare equal. */
function effective(config: Record<string, unknown>) {
  const profile = (config.profile as { id: string } | { name: string } | undefined) ?? null;
  return {
    size: config.size,
    fill_rate_per_minute: config.fill_rate_per_minute ?? DEFAULT_FILL_RATE_PER_MINUTE,
    timeout_seconds: config.timeout_seconds ?? DEFAULT_POOL_TIMEOUT_SECONDS,
    headless: config.headless ?? false,
    stealth: config.stealth ?? false,
    kiosk_mode: config.kiosk_mode ?? false,
    viewport: { ...DEFAULT_VIEWPORT, ...(config.viewport as object | undefined) },
    chrome_policy: config.chrome_policy ?? {},
    start_url: config.start_url ?? null,
    proxy_id: config.proxy_id ?? null,
    profile,
    refresh_on_profile_update: profile === null ? false : (config.refresh_on_profile_update ?? true),
    // The stored config holds telemetry in its effective form, which reads back as itself.
    telemetry: applyTelemetry(null, config.telemetry ?? null),
    // Stored as sent (selectors by id or name), in load order.
    extensions: (config.extensions as { id?: string; name?: string }[] | undefined) ?? [],
  };
}

type Effective = ReturnType<typeof effective>;

/** The PATCH value that sets a field to its desired effective value (clearing where the API clears). */
function patchValue(field: keyof Effective, value: Effective[keyof Effective]): unknown {
  if (field === 'start_url' || field === 'proxy_id') return value ?? '';
  if (field === 'profile') return value ?? { id: '' };
  if (field === 'telemetry') {
    // enabled false captures nothing; enabled true with every category listed is exactly `value`.
    const telemetry = value as TelemetryConfig | null;
    return telemetry === null ? { enabled: false } : { enabled: true, browser: telemetry.browser };
  }
  return value;
}

const BROWSER_FIELDS: (keyof Effective)[] = ['headless', 'stealth', 'kiosk_mode', 'viewport', 'chrome_policy', 'start_url', 'proxy_id', 'profile', 'telemetry', 'extensions'];

/**
 * The PATCH that brings a pool from its stored configuration to the desired one, or
 * undefined when they agree. Only changed fields are sent: the API counts any browser
 * field sent as a new configuration. When the browsers change, the idle ones of the old
 * configuration are discarded, so the pool converges on what the manifest says.
 */
export function poolUpdateOf(desired: CreatePoolInput & { name: string }, current: { name: string | null; config: Record<string, unknown> }): UpdatePoolInput | undefined {
  const want = effective({ ...desired });
  const have = effective(current.config);
  const body: Record<string, unknown> = {};
  for (const field of Object.keys(want) as (keyof Effective)[]) {
    if (!sameJson(want[field], have[field])) body[field] = patchValue(field, want[field]);
  }
  // A new profile turns refresh on unless told otherwise: say what the manifest wants.
  if (body.profile !== undefined && want.profile !== null) body.refresh_on_profile_update = want.refresh_on_profile_update;
  if (body.refresh_on_profile_update === false && want.profile === null) delete body.refresh_on_profile_update;
  if (current.name !== desired.name) body.name = desired.name;
  if (Object.keys(body).length === 0) return undefined;
  if (BROWSER_FIELDS.some((field) => body[field] !== undefined)) body.discard_all_idle = true;
  return updatePoolBody.parse(body);
}

// ---- the plan ------------------------------------------------------------------------

export interface ObservedResource {
  /** namespace/name: what the pool row records as its manager. */
  key: string;
  name: string;
  generation: number;
  deleting: boolean;
  hasFinalizer: boolean;
  createdByApi: boolean;
  /** The force-delete annotation: a deletion ends leased browsers instead of waiting. */
  forceDelete: boolean;
  spec: unknown;
}

export interface ObservedPool {
  id: string;
  orgId: string;
  projectId: string;
  name: string | null;
  config: Record<string, unknown>;
  size: number;
  availableCount: number;
  /** Browsers of the pool still starting (the fill in progress). */
  startingCount: number;
  acquiredCount: number;
  draining: boolean;
}

export interface Observation {
  /** Undefined: the resource is gone (its finalizer was removed by hand). */
  resource: ObservedResource | undefined;
  desired: DesiredPool | undefined;
  /** The installation's bootstrap organisation, where manifests act (undefined before bootstrap). */
  orgId: string | undefined;
  /** The project the spec names (or the default one) in it; undefined when there is none such. */
  projectId: string | undefined;
  /** The live pool this resource manages. */
  pool: ObservedPool | undefined;
  /** A live pool of the project that holds the desired name and is not this resource's. */
  nameTakenBy: string | undefined;
}

export interface Problem {
  reason: (typeof READY_REASONS)[keyof typeof READY_REASONS];
  message: string;
}

export interface Scope {
  orgId: string;
  projectId: string;
}

export type PoolStep =
  | { kind: 'none' }
  | { kind: 'create'; scope: Scope; input: CreatePoolInput }
  | { kind: 'update'; poolId: string; scope: Scope; input: UpdatePoolInput }
  /** Stop warming and leasing, end the idle browsers (repeated while leases remain). */
  | { kind: 'drain'; poolId: string; scope: Scope }
  /** No browser is leased any more (or force: leases end too): the row and its browsers go. */
  | { kind: 'delete'; poolId: string; scope: Scope; force: boolean };

export interface Plan {
  /** Resources the API wrote are its own business. */
  ignore: boolean;
  finalizer: 'add' | 'remove' | 'keep';
  step: PoolStep;
  problem: Problem | undefined;
}

const nothing = (problem?: Problem): Omit<Plan, 'finalizer'> => ({ ignore: false, step: { kind: 'none' }, problem });

export function planBrowserPool(observed: Observation): Plan {
  const { resource, pool } = observed;
  if (resource?.createdByApi) return { ...nothing(), ignore: true, finalizer: 'keep' };
  if (resource === undefined || resource.deleting) {
    const hasFinalizer = resource?.hasFinalizer === true;
    if (!pool) return { ...nothing(), finalizer: hasFinalizer ? 'remove' : 'keep' };
    const where = { poolId: pool.id, scope: { orgId: pool.orgId, projectId: pool.projectId } };
    const release = hasFinalizer ? 'remove' : 'keep';
    if (resource?.forceDelete) return { ...nothing(), step: { kind: 'delete', ...where, force: true }, finalizer: release };
    if (pool.draining && pool.acquiredCount === 0) return { ...nothing(), step: { kind: 'delete', ...where, force: false }, finalizer: release };
    return { ...nothing(), step: { kind: 'drain', ...where }, finalizer: 'keep' };
  }
  const finalizer = resource.hasFinalizer ? 'keep' : 'add';
  const desired = observed.desired;
  if (!desired?.ok) return { ...nothing({ reason: READY_REASONS.invalidSpec, message: desired?.message ?? 'spec: missing' }), finalizer };
  const { orgId, projectId } = observed;
  if (orgId === undefined || projectId === undefined) {
    const named = desired.projectRef === undefined ? 'the default project' : `project ${JSON.stringify(desired.projectRef)}`;
    return { ...nothing({ reason: READY_REASONS.projectNotFound, message: `${named} does not exist in the installation's organisation` }), finalizer };
  }
  if (pool && pool.projectId !== projectId) {
    const message = `spec.project: a pool cannot move to another project (it is in ${pool.projectId}); delete the resource and apply it again`;
    return { ...nothing({ reason: READY_REASONS.invalidSpec, message }), finalizer };
  }
  if (observed.nameTakenBy !== undefined) {
    const message = `a browser pool named ${JSON.stringify(desired.input.name)} already exists in the project (${observed.nameTakenBy}) and is not managed by this resource`;
    return { ...nothing({ reason: READY_REASONS.nameConflict, message }), finalizer };
  }
  const scope = { orgId, projectId };
  if (!pool) return { ...nothing(), step: { kind: 'create', scope, input: desired.input }, finalizer };
  const input = poolUpdateOf(desired.input, pool);
  return { ...nothing(), step: input ? { kind: 'update', poolId: pool.id, scope, input } : { kind: 'none' }, finalizer };
}

/** An API refusal of a create or update (AppError code and message), as the Ready condition reports it. */
export function problemOfRefusal(code: string, message: string): Problem {
  if (code === 'pool_name_taken') return { reason: READY_REASONS.nameConflict, message };
  if (code === 'project_not_found') return { reason: READY_REASONS.projectNotFound, message };
  return { reason: READY_REASONS.invalidSpec, message: `${code}: ${message}` };
}

// ---- status --------------------------------------------------------------------------

export interface BrowserPoolStatus {
  observedGeneration: number;
  poolId?: string;
  project?: string;
  size?: number;
  availableCount?: number;
  acquiredCount?: number;
  conditions: Condition[];
}

export interface StatusInput {
  generation: number;
  deleting: boolean;
  /** The pool as it is after this reconcile's step (counts read afterwards). */
  pool: Pick<ObservedPool, 'id' | 'projectId' | 'size' | 'availableCount' | 'acquiredCount' | 'startingCount'> | undefined;
  problem: Problem | undefined;
}

function readyOf({ deleting, pool, problem }: StatusInput): Omit<ConditionValue, 'type'> {
  if (deleting) return { status: 'False', reason: READY_REASONS.draining, message: 'the resource is being deleted: the pool warms and leases no more browsers' };
  if (problem) return { status: 'False', reason: problem.reason, message: problem.message };
  const warm = pool ? pool.availableCount + pool.acquiredCount : 0;
  const size = pool?.size ?? 0;
  if (pool && warm >= size) return { status: 'True', reason: READY_REASONS.full, message: `${warm} of ${size} browsers warm (${pool.acquiredCount} leased)` };
  return { status: 'False', reason: READY_REASONS.filling, message: `${warm} of ${size} browsers warm` };
}

function drainingOf({ pool }: StatusInput): Omit<ConditionValue, 'type'> {
  const leased = pool?.acquiredCount ?? 0;
  if (leased > 0) return { status: 'True', reason: DRAINING_REASONS.leasesHeld, message: `waiting for ${leased} leased browser${leased === 1 ? '' : 's'} to be released` };
  return { status: 'True', reason: DRAINING_REASONS.deleting, message: 'no browser is leased: the pool is being deleted' };
}

/** The status to report; `previous` supplies the transition times to keep. */
export function poolStatusOf(input: StatusInput, previous: Partial<BrowserPoolStatus> | undefined, now: Date): BrowserPoolStatus {
  // Milliseconds, unlike the other kinds' conditions: as this status has always written them.
  const at = now.toISOString();
  const conditions = [nextCondition(previous?.conditions, { type: CONDITION_TYPES.ready, ...readyOf(input) }, input.generation, at)];
  if (input.deleting) conditions.push(nextCondition(previous?.conditions, { type: CONDITION_TYPES.draining, ...drainingOf(input) }, input.generation, at));
  const { pool } = input;
  return {
    observedGeneration: input.generation,
    ...(pool
      ? {
          poolId: pool.id,
          project: pool.projectId,
          size: pool.size,
          availableCount: pool.availableCount,
          startingCount: pool.startingCount,
          acquiredCount: pool.acquiredCount,
          replicas: pool.availableCount + pool.acquiredCount,
          selector: `${LABELS.poolId}=${pool.id}`,
        }
      : {}),
    conditions,
  };
}

/**
 * When to reconcile again without an event: counts move as browsers warm and leases come
 * and go. `status` is undefined when the resource is gone (an orphaned pool drains).
 */
export function requeueAfterMs(plan: Plan, status: BrowserPoolStatus | undefined): number | undefined {
  if (plan.ignore) return undefined;
  if (plan.step.kind === 'drain') return REQUEUE_MS.draining;
  if (plan.step.kind === 'delete' || status === undefined) return undefined;
  const ready = status.conditions.find((c) => c.type === CONDITION_TYPES.ready);
  if (ready?.reason === READY_REASONS.filling) return REQUEUE_MS.filling;
  return REQUEUE_MS.steady;
}
