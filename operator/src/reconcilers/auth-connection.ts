/**
 * AuthConnection resources applied with kubectl or a GitOps tool → managed-auth
 * connections in Postgres, and their auth state back into the resources' status.
 *
 * Logins, re-auths and health checks run where embedded mode runs them: in the API
 * replicas (the flow engine and graphile-worker jobs; in Kubernetes mode their browsers are
 * BrowserSession pods). This reconciler (in the elected operator) only keeps the row's
 * settings in step with the resource, through the same service functions the API's POST,
 * PATCH and DELETE use (so the health check is rescheduled in the same transaction), and
 * reports the row: re-read at once when the connection's notification channel fires (the
 * channel the SSE stream follows), and every few seconds as a fallback. Each reconcile:
 * observe → plan (auth-connection-plan.ts, pure) → execute → report.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { AppDeps } from '../../../api/src/index.js';
import { AppError, OPERATOR_ACTOR } from '../../../api/src/index.js';
import { changeConnection, connectionChannel, createConnection, removeConnection, resolveProxyRef } from '../../../api/src/modules/auth-connections/index.js';
import { findManagedConnection, listConnections } from '../../../api/src/modules/auth-connections/index.js';
import { Controller, objectKey, splitKey, type ControllerSource } from '../k8s/controller.js';
import { ANNOTATIONS, PLURALS } from '../../../contract/kinds.js';
import {
  AUTH_CONNECTION_FINALIZER,
  CONDITION_TYPES,
  desiredConnectionOf,
  planAuthConnection,
  problemOfRefusal,
  requeueAfterMs,
  connectionStatusOf,
  type ConnectionStep,
  type Observation,
  type ObservedResource,
  type Problem,
  type Scope,
} from './auth-connection-plan.js';
import { manifestOwnerOf } from './browser-pool.js';
import { resourceClient, type GitOpsReconcilerOptions, type ResourceClient } from './resource-client.js';
import { statusWriter, type ResourceStatus, type StatusWriter } from './status.js';
import { connectionTransitionEvent, readyReasonOf, regardingOf } from './transition-events.js';

const PLURAL = PLURALS.AuthConnection;

export type AuthConnectionReconcilerOptions = GitOpsReconcilerOptions;

type Resource = KubernetesObject & { spec?: unknown; status?: ResourceStatus };

function observedResourceOf(object: Resource, key: string): ObservedResource {
  const metadata = object.metadata ?? {};
  return {
    key,
    generation: metadata.generation ?? 0,
    deleting: metadata.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null,
    hasFinalizer: (metadata.finalizers ?? []).includes(AUTH_CONNECTION_FINALIZER),
    createdByApi: metadata.annotations?.[ANNOTATIONS.createdBy] === 'api',
    spec: object.spec,
  };
}

/**
 * One LISTEN per managed connection: a notification on its channel (a flow step, a login's
 * end, a health check) queues the resource's key, so the status follows within moments.
 */
class ConnectionFollower {
  private readonly following = new Map<string, { connectionId: string; unsubscribe: Promise<() => Promise<void>> }>();

  constructor(
    private readonly deps: AppDeps,
    private readonly wake: (key: string) => void,
  ) {}

  follow(key: string, connectionId: string | undefined): void {
    const current = this.following.get(key);
    if (current?.connectionId === connectionId) return;
    if (current) this.drop(key);
    if (connectionId === undefined) return;
    const wake = () => this.wake(key);
    const unsubscribe = this.deps.events.subscribe(connectionChannel(connectionId), wake, wake);
    // A failed LISTEN is retried by the next reconcile; the periodic requeue covers the gap.
    unsubscribe.catch((error: unknown) => {
      this.deps.log.warn({ err: error, resource: key, connectionId }, 'following an auth connection’s changes failed');
      if (this.following.get(key)?.unsubscribe === unsubscribe) this.following.delete(key);
    });
    this.following.set(key, { connectionId, unsubscribe });
  }

  private drop(key: string): void {
    const current = this.following.get(key);
    if (!current) return;
    this.following.delete(key);
    current.unsubscribe
      .then((unsubscribe) => unsubscribe())
      .catch((error: unknown) => this.deps.log.warn({ err: error, resource: key }, 'unfollowing an auth connection failed'));
  }

  stop(): void {
    for (const key of [...this.following.keys()]) this.drop(key);
  }
}

export class AuthConnectionReconciler {
  private readonly resources: ResourceClient<Resource>;
  private readonly status: StatusWriter;
  private readonly follower: ConnectionFollower;
  private ctrl: Controller | undefined;

  constructor(private readonly options: AuthConnectionReconcilerOptions) {
    this.resources = resourceClient<Resource>(options.config, PLURAL);
    this.status = statusWriter(options.config);
    this.follower = new ConnectionFollower(options.deps, (key) => this.ctrl?.queue.add(key));
  }

  /** The controller: an informer on AuthConnections feeding this reconciler's keys. */
  controller(): Controller {
    const { namespace, deps } = this.options;
    const informer = this.resources.informer(namespace);
    const source: ControllerSource = { name: PLURAL, informer, keysOf: (object) => [objectKey(object)] };
    this.ctrl = new Controller({
      name: 'authconnection',
      sources: [source],
      reconcile: (key) => this.reconcile(key),
      log: deps.log,
      ...(this.options.workers !== undefined ? { workers: this.options.workers } : {}),
      ...(this.options.resyncMs !== undefined ? { resyncMs: this.options.resyncMs } : {}),
      ...(this.options.metrics ? { metrics: this.options.metrics } : {}),
    });
    return this.ctrl;
  }

  /** Stops following connections' notifications (after the controller has stopped). */
  stopFollowing(): void {
    this.follower.stop();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number }> {
    const object = await this.resources.read(key);
    const observed = await this.observe(key, object);
    const plan = planAuthConnection(observed);
    if (plan.ignore) return {};
    if (plan.finalizer === 'add') await this.resources.setFinalizer(object!, AUTH_CONNECTION_FINALIZER, true);
    const refused = await this.execute(key, plan.step);
    if (plan.finalizer === 'remove') {
      await this.resources.setFinalizer(object!, AUTH_CONNECTION_FINALIZER, false);
      this.options.deps.log.info({ resource: key }, 'auth connection deleted; finalizer released');
    }
    if (!object || !observed.resource || observed.resource.deleting) {
      this.follower.follow(key, undefined);
      return {};
    }
    const after = await findManagedConnection(this.options.deps.db, key);
    this.follower.follow(key, after?.id);
    const problem: Problem | undefined = plan.problem ?? refused;
    const status = connectionStatusOf({ generation: observed.resource.generation, connection: after, problem }, object.status, this.options.deps.clock.now());
    const { namespace, name } = splitKey(key);
    const written = await this.status.write({ kind: 'AuthConnection', plural: PLURAL, namespace: namespace!, name }, object.status, status as unknown as ResourceStatus);
    const ready = status.conditions.find((condition) => condition.type === CONDITION_TYPES.ready);
    const event = written && ready ? connectionTransitionEvent({ before: readyReasonOf(object.status), after: ready.reason, message: ready.message }) : undefined;
    if (event) this.options.events?.record(regardingOf('AuthConnection', object.metadata ?? {}), event);
    const requeue = requeueAfterMs(plan, status);
    return requeue === undefined ? {} : { requeueAfterMs: requeue };
  }

  private async observe(key: string, object: Resource | undefined): Promise<Observation> {
    const { db } = this.options.deps;
    const resource = object && observedResourceOf(object, key);
    const connection = await findManagedConnection(db, key);
    const observation: Observation = { resource, desired: undefined, scope: undefined, connection, proxyId: undefined, refusal: undefined, takenBy: undefined };
    if (!resource || resource.deleting || resource.createdByApi) return observation;
    const desired = (observation.desired = desiredConnectionOf(resource));
    if (!desired.ok) return observation;
    const { org, project } = await manifestOwnerOf(db, desired.projectRef);
    if (!org || !project) return observation;
    const scope: Scope = (observation.scope = { orgId: org.id, projectId: project.id, projectName: project.name });
    if (desired.input.proxy) {
      try {
        observation.proxyId = await resolveProxyRef(db, scope, desired.input.proxy);
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        observation.refusal = { code: error.code, message: error.message };
      }
    }
    if (!connection) {
      const [holder] = await listConnections(db, scope, { limit: 1, offset: 0, domain: desired.input.domain, profile_name: desired.input.profile_name });
      if (holder && holder.kubernetes_resource !== key) observation.takenBy = holder.id;
    }
    return observation;
  }

  /** Carries out the step; answers the API's refusal of the desired connection, if any. */
  private async execute(key: string, step: ConnectionStep): Promise<Problem | undefined> {
    const { deps } = this.options;
    const writer = { kubernetesResource: key };
    try {
      switch (step.kind) {
        case 'none':
          return undefined;
        case 'create': {
          const row = await createConnection(deps, step.scope, OPERATOR_ACTOR, step.input, writer);
          deps.log.info({ resource: key, connectionId: row.id }, 'auth connection created from its resource');
          return undefined;
        }
        case 'update': {
          await changeConnection(deps, step.scope, OPERATOR_ACTOR, step.connectionId, step.input, writer);
          deps.log.info({ resource: key, connectionId: step.connectionId, fields: Object.keys(step.input) }, 'auth connection changed by its resource');
          return undefined;
        }
        case 'delete': {
          await removeConnection(deps, step.scope, OPERATOR_ACTOR, step.connectionId, writer);
          deps.log.info({ resource: key, connectionId: step.connectionId }, 'auth connection deleted with its resource');
          return undefined;
        }
      }
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      // Gone already (a reconcile before this one got there first): nothing left to delete.
      if (step.kind === 'delete' && error.status === 404) return undefined;
      if (step.kind === 'create' || step.kind === 'update') return problemOfRefusal(error.code, error.message);
      throw error;
    }
  }

  /** Adds or removes this reconciler's finalizer; the resourceVersion makes a concurrent change fail (409) and retry. */
}

/**
 * Runs the AuthConnection reconciler until `signal` aborts (call it in the elected leader
 * only). Resolves once the watch has stopped and reconciles in flight have finished.
 */
export function startAuthConnectionReconciler(options: AuthConnectionReconcilerOptions & { signal: AbortSignal }): { controller: Controller; done: Promise<void> } {
  const reconciler = new AuthConnectionReconciler(options);
  const controller = reconciler.controller();
  return { controller, done: controller.run(options.signal).finally(() => reconciler.stopFollowing()) };
}
