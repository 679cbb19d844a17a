/**
 * BrowserPool resources applied with kubectl or a GitOps tool → pool rows in Postgres.
 *
 * The pool itself runs where embedded mode runs it: the API replicas' PoolManager fills
 * it, leases and releases its browsers, with Postgres as the lease authority. This
 * reconciler (in the elected operator) only keeps the row in step with the resource,
 * through the same service functions the API's POST, PATCH and DELETE use (they tell the
 * API replicas' fill of the change through NOTIFY), reports the pool's
 * counts in the resource's status, and drains the pool under a finalizer when the
 * resource is deleted. Each reconcile: observe → plan (browser-pool-plan.ts, pure) →
 * execute → report.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { AppError, OPERATOR_ACTOR } from '../../../api/src/index.js';
import { foldName } from '../../../api/src/index.js';
import { terminateGraceMs } from '../../../api/src/modules/browsers/index.js';
import { createPool, deletePool, drainPool, updatePoolSettings, type PoolManager, type PoolServiceDeps } from '../../../api/src/modules/browser-pools/index.js';
import { findManagedPool, findPool, type PoolRow } from '../../../api/src/modules/browser-pools/index.js';
import type { Queryable } from '../../../api/src/index.js';
import { firstOrg, type OrgRow } from '../../../api/src/modules/orgs/index.js';
import { findDefaultProject, findProject, type ProjectRow } from '../../../api/src/modules/projects/index.js';
import { Controller, objectKey, splitKey, type ControllerSource } from '../k8s/controller.js';
import type { EventInput } from '../k8s/event-recorder.js';
import { ANNOTATIONS, FINALIZERS, PLURALS } from '../../../contract/kinds.js';
import { EVENT_REASONS, poolTransitionEvent, readyReasonOf, regardingOf } from './transition-events.js';
import { resourceClient, type GitOpsReconcilerOptions, type ResourceClient } from './resource-client.js';
import { statusWriter, type ResourceStatus, type StatusWriter } from './status.js';
import {
  CONDITION_TYPES,
  desiredPoolOf,
  planBrowserPool,
  problemOfRefusal,
  REQUEUE_MS,
  requeueAfterMs,
  poolStatusOf,
  type ObservedPool,
  type ObservedResource,
  type Observation,
  type PoolStep,
  type Problem,
} from './browser-pool-plan.js';

const PLURAL = PLURALS.BrowserPool;

export interface BrowserPoolReconcilerOptions extends GitOpsReconcilerOptions {
  /**
   * The pool manager whose side effects the pool use cases carry (a fill pass, idle
   * browsers discarded, other replicas told). The operator's is never started: the API
   * replicas fill pools, and hear of the change by NOTIFY.
   */
  pools: PoolManager;
}

type Resource = KubernetesObject & { spec?: unknown; status?: Record<string, unknown> };

function observedResourceOf(object: Resource, key: string): ObservedResource {
  const metadata = object.metadata ?? {};
  return {
    key,
    name: metadata.name ?? '',
    generation: metadata.generation ?? 0,
    deleting: metadata.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null,
    hasFinalizer: (metadata.finalizers ?? []).includes(FINALIZERS.browserPool),
    createdByApi: metadata.annotations?.[ANNOTATIONS.createdBy] === 'api',
    forceDelete: metadata.annotations?.[ANNOTATIONS.forceDelete] === 'true',
    spec: object.spec,
  };
}

const observedPoolOf = (row: PoolRow): ObservedPool => ({
  id: row.id,
  orgId: row.org_id,
  projectId: row.project_id,
  name: row.name,
  config: row.config,
  size: row.size,
  availableCount: Number(row.available_count),
  startingCount: Number(row.starting_count),
  acquiredCount: Number(row.acquired_count),
  draining: row.draining_since !== null,
});

/**
 * Where a manifest's object belongs: the installation's bootstrap organisation (the first
 * one; undefined before bootstrap) and the project the spec names, else its default
 * project (undefined when there is no such project). Shared by the GitOps reconcilers.
 */
export async function manifestOwnerOf(db: Queryable, projectRef: string | undefined): Promise<{ org: OrgRow | undefined; project: ProjectRow | undefined }> {
  const org = await firstOrg(db);
  if (!org) return { org, project: undefined };
  const project = projectRef === undefined ? await findDefaultProject(db, org.id) : await findProject(db, org.id, projectRef);
  return { org, project };
}

export class BrowserPoolReconciler {
  private readonly resources: ResourceClient<Resource>;
  private readonly status: StatusWriter;

  constructor(private readonly options: BrowserPoolReconcilerOptions) {
    this.resources = resourceClient<Resource>(options.config, PLURAL);
    this.status = statusWriter(options.config);
  }

  /** The controller: an informer on BrowserPools feeding this reconciler's keys. */
  controller(): Controller {
    const { namespace, deps } = this.options;
    const informer = this.resources.informer(namespace);
    const source: ControllerSource = { name: PLURAL, informer, keysOf: (object) => [objectKey(object)] };
    return new Controller({
      name: 'browserpool',
      sources: [source],
      reconcile: (key) => this.reconcile(key),
      log: deps.log,
      ...(this.options.metrics ? { metrics: this.options.metrics } : {}),
      ...(this.options.workers !== undefined ? { workers: this.options.workers } : {}),
      ...(this.options.resyncMs !== undefined ? { resyncMs: this.options.resyncMs } : {}),
    });
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number }> {
    const object = await this.resources.read(key);
    const observed = await this.observe(key, object);
    const plan = planBrowserPool(observed);
    if (plan.ignore) return {};
    if (plan.finalizer === 'add') await this.resources.setFinalizer(object!, FINALIZERS.browserPool, true);
    const refused = await this.execute(key, plan.step);
    const problem = plan.problem ?? refused.problem;
    if (plan.finalizer === 'remove' && refused.done) {
      await this.resources.setFinalizer(object!, FINALIZERS.browserPool, false);
      this.options.deps.log.info({ resource: key }, 'browser pool drained and deleted; finalizer released');
      this.event(object!, { type: 'Normal', action: 'Drain', reason: EVENT_REASONS.drained, note: 'the pool is drained and deleted; the resource is released' });
      return {};
    }
    if (!object || !observed.resource) {
      const requeue = refused.done ? requeueAfterMs(plan, undefined) : REQUEUE_MS.draining;
      return requeue === undefined ? {} : { requeueAfterMs: requeue };
    }
    const after = await findManagedPool(this.options.deps.db, key);
    const status = poolStatusOf(
      { generation: observed.resource.generation, deleting: observed.resource.deleting, pool: after && observedPoolOf(after), problem },
      object.status,
      this.options.deps.clock.now(),
    );
    const { namespace, name } = splitKey(key);
    if (await this.status.write({ kind: 'BrowserPool', plural: PLURAL, namespace: namespace!, name }, object.status, status as unknown as ResourceStatus)) {
      const ready = status.conditions.find((c) => c.type === CONDITION_TYPES.ready)!;
      const event = poolTransitionEvent({ before: readyReasonOf(object.status), after: ready.reason, message: ready.message });
      if (event) this.event(object, event);
    }
    const requeue = refused.done ? requeueAfterMs(plan, status) : REQUEUE_MS.draining;
    return requeue === undefined ? {} : { requeueAfterMs: requeue };
  }

  private async observe(key: string, object: Resource | undefined): Promise<Observation> {
    const { db } = this.options.deps;
    const resource = object && observedResourceOf(object, key);
    const row = await findManagedPool(db, key);
    const pool = row && observedPoolOf(row);
    const observation: Observation = { resource, desired: undefined, orgId: undefined, projectId: undefined, pool, nameTakenBy: undefined };
    if (!resource || resource.deleting || resource.createdByApi) return observation;
    const desired = (observation.desired = desiredPoolOf(resource));
    if (!desired.ok) return observation;
    const { org, project } = await manifestOwnerOf(db, desired.projectRef);
    observation.orgId = org?.id;
    if (!org || !project) return observation;
    observation.projectId = project.id;
    const holder = await findPool(db, { orgId: org.id, projectId: project.id }, desired.input.name);
    if (holder && holder.id !== pool?.id && holder.name !== null && foldName(holder.name) === foldName(desired.input.name)) observation.nameTakenBy = holder.id;
    return observation;
  }

  /**
   * Carries out the step. `done` is false when it must be tried again later (leases
   * appeared before the delete); `problem` is an API refusal of the desired pool.
   */
  private async execute(key: string, step: PoolStep): Promise<{ done: boolean; problem?: Problem }> {
    const { deps } = this.options;
    const poolDeps: PoolServiceDeps = { ...deps, pools: this.options.pools };
    const writer = { kubernetesResource: key };
    try {
      switch (step.kind) {
        case 'none':
          return { done: true };
        case 'create': {
          const row = await createPool(poolDeps, step.scope, OPERATOR_ACTOR, step.input, writer);
          deps.log.info({ resource: key, poolId: row.id }, 'browser pool created from its resource');
          this.event(key, { type: 'Normal', action: 'Create', reason: EVENT_REASONS.synced, note: `pool ${row.id} created from the resource` });
          return { done: true };
        }
        case 'update': {
          const row = await updatePoolSettings(poolDeps, step.scope, OPERATOR_ACTOR, step.poolId, step.input, writer);
          deps.log.info({ resource: key, poolId: row.id, fields: Object.keys(step.input) }, 'browser pool changed by its resource');
          this.event(key, { type: 'Normal', action: 'Update', reason: EVENT_REASONS.synced, note: `pool ${row.id} updated from the resource: ${Object.keys(step.input).join(', ')}` });
          return { done: true };
        }
        case 'drain': {
          const { ended, leased } = await drainPool(deps, step.scope, OPERATOR_ACTOR, step.poolId, writer);
          if (ended.length > 0) deps.log.info({ resource: key, poolId: step.poolId, browsers: ended.length, leased }, 'draining browser pool: idle browsers ended');
          await Promise.all(
            ended.map((b) =>
              deps.runtime
                .terminate(b.id, { graceMs: terminateGraceMs(b) })
                .catch((error: unknown) => deps.log.error({ err: error, sessionId: b.id }, 'closing a drained pool browser failed')),
            ),
          );
          return { done: true };
        }
        case 'delete': {
          const { poolId, ended } = await deletePool(poolDeps, step.scope, OPERATOR_ACTOR, step.poolId, { force: step.force, ...writer });
          if (step.force) deps.log.info({ resource: key, poolId, browsers: ended.length }, 'browser pool force-deleted: leased browsers ended');
          return { done: true };
        }
      }
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      // A lease taken between the drain's count and the delete: wait for it too.
      if (step.kind === 'delete' && error.code === 'pool_has_leases') return { done: false };
      if (step.kind === 'create' || step.kind === 'update') return { done: true, problem: problemOfRefusal(error.code, error.message) };
      throw error;
    }
  }

  /** Records an Event about the resource (by object, or by key when only the key is at hand). */
  private event(about: Resource | string, event: EventInput): void {
    const metadata = typeof about === 'string' ? splitKey(about) : (about.metadata ?? {});
    this.options.events?.record(regardingOf('BrowserPool', metadata), event);
  }
}

/**
 * Runs the BrowserPool reconciler until `signal` aborts (call it in the elected leader
 * only). Resolves once the watch has stopped and reconciles in flight have finished.
 */
export function startBrowserPoolReconciler(options: BrowserPoolReconcilerOptions & { signal: AbortSignal }): { controller: Controller; done: Promise<void> } {
  const controller = new BrowserPoolReconciler(options).controller();
  return { controller, done: controller.run(options.signal) };
}
