/**
 * The BrowserSession reconciler: each BrowserSession the API writes becomes one browser
 * pod (through the Kubernetes runtime), and the pod's state comes back as the resource's
 * status. Observe (the caches, the runtime) → plan (browser-session-plan.ts, pure) →
 * execute → report (status.ts).
 *
 * The runtime's launch waits until the pod is Ready (seconds, a minute with an image
 * pull), so it runs in the background and only its completion re-queues the key: a
 * worker is never held by a starting browser, and a reconcile of the same key meanwhile
 * sees the launch in flight and starts nothing. The runtime's launch is idempotent per
 * browser id (an existing live pod is awaited, not replaced), which is what lets a new
 * leader pick up a pod its predecessor created halfway through a reconcile.
 *
 * Sources: the BrowserSessions, the launch Secrets (which the API writes a moment after
 * the resource) and the browser pods (so a pod that dies after Running is reported at
 * once, not at the next resync).
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
  type V1OwnerReference,
  type V1Pod,
  type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { BROWSER_ID_LABEL, browserPodName, COMPONENT_LABELS } from '../k8s/browser-pod.js';
import { Controller, splitKey, type ControllerMetrics, type ControllerSource } from '../k8s/controller.js';
import type { EventRecorder } from '../k8s/event-recorder.js';
import { VERSION } from '../k8s/crds.js';
import { apiErrorCode } from '../../../lib/k8s-errors.js';
import { API_VERSION, FIELD_MANAGERS, FINALIZERS, GROUP, idOfResourceName, LABELS, LAUNCH_SECRET_SUFFIX, PLURALS, resourceNameOf } from '../../../contract/kinds.js';
import type { ReconcileOutcome } from '../k8s/work-queue.js';
import type { BrowserRuntime } from '../../../contract/browser-runtime.js';
import { planBrowserSession, type DesiredSessionStatus, type LaunchRecord, type SessionAction } from './browser-session-plan.js';
import { readLaunchSpec, type ParsedLaunchSpec } from './launch-spec.js';
import { nextCondition, withCondition } from './conditions.js';
import { statusWriter, type ResourceStatus, type StatusWriter } from './status.js';
import { EVENT_REASONS, readyReasonOf, regardingOf, sessionTransitionEvent } from './transition-events.js';

export interface BrowserSessionResource extends KubernetesObject {
  spec?: Record<string, unknown>;
  status?: ResourceStatus & { phase?: string };
}

export interface BrowserSessionReconcilerOptions {
  config: KubeConfig;
  /** Where the BrowserSessions, their Secrets and the browser pods live. */
  namespace: string;
  runtime: BrowserRuntime;
  log: Logger;
  workers?: number;
  resyncMs?: number;
  /** How long a deleted session's browser gets to close (profile save) before its pod is killed. */
  terminateGraceMs?: number;
  now?: () => Date;
  /** Kubernetes Events at status transitions (kubectl describe); none without. */
  events?: EventRecorder;
  metrics?: ControllerMetrics;
}

/** The status fields this reconciler owns, compared to decide whether to write. */
const OWNED_STATUS_KEYS = ['observedGeneration', 'sessionId', 'phase', 'podName', 'agentUrl', 'message', 'conditions'] as const;

interface LaunchEntry {
  uid: string;
  abort: AbortController;
  record: LaunchRecord;
}

interface Context {
  key: string;
  uid: string;
  resource: BrowserSessionResource;
  sessionId: string;
  launchSpec: ParsedLaunchSpec;
}

export class BrowserSessionReconciler {
  readonly controller: Controller;
  private readonly namespace: string;
  private readonly runtime: BrowserRuntime;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly writer: StatusWriter;
  private readonly launches = new Map<string, LaunchEntry>();
  /** The status this process last wrote per key: the only writer's newest truth, fresher than a lagging cache. */
  private readonly written = new Map<string, { uid: string; status: ResourceStatus }>();
  private readonly sessions: Informer<BrowserSessionResource> & ObjectCache<BrowserSessionResource>;
  private readonly secrets: Informer<V1Secret> & ObjectCache<V1Secret>;
  private readonly sourceCount: number;
  private syncedSources = 0;

  constructor(private readonly options: BrowserSessionReconcilerOptions) {
    const { config, namespace } = options;
    this.namespace = namespace;
    this.runtime = options.runtime;
    this.log = options.log.child({ controller: 'browser-sessions' });
    this.now = options.now ?? (() => new Date());
    const custom = (this.custom = config.makeApiClient(CustomObjectsApi));
    const core = (this.core = config.makeApiClient(CoreV1Api));
    this.writer = statusWriter(config);

    this.sessions = makeInformer<BrowserSessionResource>(
      config,
      `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`,
      () => custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURALS.BrowserSession }) as Promise<KubernetesListObject<BrowserSessionResource>>,
    );
    this.secrets = makeInformer<V1Secret>(config, `/api/v1/namespaces/${namespace}/secrets`, () => core.listNamespacedSecret({ namespace, labelSelector: LABELS.sessionId }), LABELS.sessionId);
    const podSelector = Object.entries(COMPONENT_LABELS).map(([key, value]) => `${key}=${value}`).join(',');
    const pods = makeInformer<V1Pod>(config, `/api/v1/namespaces/${namespace}/pods`, () => core.listNamespacedPod({ namespace, labelSelector: podSelector }), podSelector);

    const keyOfName = (name: string) => `${namespace}/${name}`;
    const sources: ControllerSource[] = [
      { name: 'browsersessions', informer: this.counted(this.sessions), keysOf: (object) => [keyOfName(object.metadata!.name!)] },
      {
        name: 'launch-secrets',
        informer: this.counted(this.secrets),
        keysOf: (object) => {
          const name = object.metadata?.name ?? '';
          return name.endsWith(LAUNCH_SECRET_SUFFIX) ? [keyOfName(name.slice(0, -LAUNCH_SECRET_SUFFIX.length))] : [];
        },
      },
      {
        name: 'browser-pods',
        informer: this.counted(pods),
        keysOf: (object) => {
          const browserId = object.metadata?.annotations?.[BROWSER_ID_LABEL];
          return browserId ? [keyOfName(resourceNameOf(browserId))] : [];
        },
      },
    ] as ControllerSource[];
    this.sourceCount = sources.length;

    this.controller = new Controller({
      name: 'browser-sessions',
      sources,
      reconcile: (key) => this.reconcile(key),
      workers: options.workers ?? 4,
      resyncMs: options.resyncMs ?? 300_000,
      log: this.log,
      ...(options.metrics ? { metrics: options.metrics } : {}),
    });
  }

  /** True once every source has listed (and so the caches reflect the cluster). */
  get synced(): boolean {
    return this.syncedSources === this.sourceCount;
  }

  /** Reconciles until `signal` aborts; launches in flight are abandoned (their pods stay for the next leader). */
  async run(signal: AbortSignal): Promise<void> {
    try {
      await this.controller.run(signal);
    } finally {
      for (const entry of this.launches.values()) entry.abort.abort(new Error('the reconciler stopped'));
      this.launches.clear();
      this.written.clear();
    }
  }

  /** The owner reference a browser's pod and Secret carry (for the runtime's ownerReferencesOf). */
  ownerReferencesOf(browserId: string): V1OwnerReference[] | undefined {
    const resource = this.sessions.get(resourceNameOf(browserId), this.namespace);
    if (!resource?.metadata?.uid) return undefined;
    // Not blocking: the finalizer already holds the resource until the pod is gone, and
    // blocking would need update on browsersessions/finalizers for nothing.
    return [{ apiVersion: API_VERSION, kind: 'BrowserSession', name: resource.metadata.name!, uid: resource.metadata.uid, controller: true, blockOwnerDeletion: false }];
  }

  /** The informer, reporting when its first list is done (for readiness). */
  private counted<T extends KubernetesObject>(informer: Informer<T> & ObjectCache<T>): Informer<T> & ObjectCache<T> {
    let counted = false;
    return {
      on: informer.on.bind(informer),
      off: informer.off.bind(informer),
      get: informer.get.bind(informer),
      list: informer.list.bind(informer),
      stop: informer.stop.bind(informer),
      start: async () => {
        await informer.start();
        // A failed list resolves start() too (and reports through 'error'): only a resource version means listed.
        const listed = (informer as unknown as { latestResourceVersion?(): string }).latestResourceVersion?.() ?? 'unknown';
        if (!counted && listed !== '') {
          counted = true;
          this.syncedSources += 1;
        }
      },
    };
  }

  private async reconcile(key: string): Promise<ReconcileOutcome | void> {
    const { name } = splitKey(key);
    const resource = this.sessions.get(name, this.namespace);
    if (!resource) {
      // Gone (its finalizer was released): nothing left to do but forget.
      this.launches.get(key)?.abort.abort();
      this.launches.delete(key);
      this.written.delete(key);
      return;
    }
    const uid = resource.metadata!.uid!;
    const sessionId = resource.metadata?.labels?.[LABELS.sessionId] ?? idOfResourceName(name);
    const launchSecretName = `${name}${LAUNCH_SECRET_SUFFIX}`;
    const launchSpec = readLaunchSpec(this.secrets.get(launchSecretName, this.namespace), sessionId);
    const launch = this.launches.get(key)?.uid === uid ? this.launches.get(key) : undefined;
    const own = this.written.get(key);
    const reported = own?.uid === uid ? own.status : resource.status;
    const browser = await this.runtime.observe(sessionId);
    const plan = planBrowserSession({
      deleting: Boolean(resource.metadata?.deletionTimestamp),
      hasFinalizer: resource.metadata?.finalizers?.includes(FINALIZERS.browserSession) === true,
      reportedPhase: reported?.phase as string | undefined,
      launchSecretName,
      podName: browserPodName(sessionId),
      launchSpec,
      browser,
      ...(launch ? { launch: launch.record } : {}),
    });
    // The finalizer goes on before anything exists that it must clean up; the status is
    // written before the finalizer comes off (afterwards the resource may be gone).
    const actions = [...plan.actions];
    if (actions[0]?.type === 'addFinalizer') await this.execute(actions.shift()!, { key, uid, resource, sessionId, launchSpec });
    if (plan.status) await this.report(key, resource, sessionId, reported, plan.status);
    for (const action of actions) await this.execute(action, { key, uid, resource, sessionId, launchSpec });
    if (browser && actions.some((action) => action.type === 'terminate')) {
      this.options.events?.record(regardingOf('BrowserSession', resource.metadata!), { type: 'Normal', action: 'Terminate', reason: EVENT_REASONS.podDeleted, note: `deleted browser pod ${browserPodName(sessionId)}` });
    }
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  private async execute(action: SessionAction, context: Context): Promise<void> {
    const { key, resource, sessionId } = context;
    const name = resource.metadata!.name!;
    switch (action.type) {
      case 'addFinalizer':
        return this.applyFinalizer(name);
      case 'launch':
        return this.startLaunch(context);
      case 'abortLaunch':
        this.launches.get(key)?.abort.abort(new Error('the BrowserSession was deleted'));
        return;
      case 'terminate':
        await this.runtime.terminate(sessionId, { graceMs: this.options.terminateGraceMs ?? 10_000 });
        return;
      case 'deleteLaunchSecret':
        await this.core.deleteNamespacedSecret({ name: `${name}${LAUNCH_SECRET_SUFFIX}`, namespace: this.namespace }).catch((error: unknown) => {
          if (apiErrorCode(error) !== 404) throw error;
        });
        return;
      case 'removeFinalizer':
        return this.removeFinalizer(resource);
      case 'forgetLaunch':
        this.launches.delete(key);
        return;
    }
  }

  private startLaunch({ key, uid, resource, launchSpec }: Context): void {
    if (this.launches.get(key)?.record.state === 'running' || !launchSpec.spec) return;
    // The pod carries the session's owner labels too, so `kubectl get pods -l` finds it.
    const ownerLabels = Object.fromEntries(Object.values(LABELS).flatMap((label) => (resource.metadata?.labels?.[label] ? [[label, resource.metadata.labels[label]]] : [])));
    const spec = { ...launchSpec.spec, labels: { ...launchSpec.spec.labels, ...ownerLabels } };
    const entry: LaunchEntry = { uid, abort: new AbortController(), record: { state: 'running' } };
    this.launches.set(key, entry);
    this.log.info({ resource: key, browser_id: spec.browserId }, 'launching browser pod');
    this.runtime
      .launch(spec, { signal: entry.abort.signal })
      .then(
        (result) => {
          entry.record = { state: 'finished', result };
        },
        (error: unknown) => {
          if (!entry.abort.signal.aborted) this.log.warn({ resource: key, err: error }, 'browser launch failed; retrying');
          if (this.launches.get(key) === entry) this.launches.delete(key);
        },
      )
      .finally(() => this.controller.queue.add(key));
  }

  private async applyFinalizer(name: string): Promise<void> {
    // Server-side apply: finalizers are a set, so ours joins whatever others hold without a read-modify-write race.
    await this.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: this.namespace,
        plural: PLURALS.BrowserSession,
        name,
        body: { apiVersion: API_VERSION, kind: 'BrowserSession', metadata: { name, namespace: this.namespace, finalizers: [FINALIZERS.browserSession] } },
        fieldManager: FIELD_MANAGERS.operator,
        force: true,
      },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
  }

  private async removeFinalizer(resource: BrowserSessionResource): Promise<void> {
    const at = resource.metadata?.finalizers?.indexOf(FINALIZERS.browserSession) ?? -1;
    if (at < 0) return;
    // By index with a test, whoever added it (the API may create the resource with it):
    // a stale cache fails the test (422) and the retry reads afresh.
    const path = `/metadata/finalizers/${at}`;
    await this.custom
      .patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace: this.namespace, plural: PLURALS.BrowserSession, name: resource.metadata!.name!, body: [{ op: 'test', path, value: FINALIZERS.browserSession }, { op: 'remove', path }], fieldManager: FIELD_MANAGERS.operator },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      )
      .catch((error: unknown) => {
        if (apiErrorCode(error) !== 404) throw error;
      });
  }

  private async report(key: string, resource: BrowserSessionResource, sessionId: string, reported: ResourceStatus | undefined, desired: DesiredSessionStatus): Promise<void> {
    const generation = resource.metadata?.generation;
    const previous = reported?.conditions;
    const ready = nextCondition(previous, { type: 'Ready', status: desired.ready ? 'True' : 'False', reason: desired.reason, message: desired.message }, generation, this.now());
    const status: ResourceStatus = {
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
      sessionId,
      phase: desired.phase,
      ...(desired.podName ? { podName: desired.podName } : {}),
      ...(desired.agentUrl ? { agentUrl: desired.agentUrl } : {}),
      message: desired.message,
      conditions: withCondition(previous, ready),
    };
    const current = reported ? Object.fromEntries(OWNED_STATUS_KEYS.flatMap((field) => (reported[field] !== undefined ? [[field, reported[field]]] : []))) : undefined;
    try {
      const wrote = await this.writer.write({ kind: 'BrowserSession', plural: PLURALS.BrowserSession, namespace: this.namespace, name: resource.metadata!.name! }, current, status);
      if (wrote) {
        this.written.set(key, { uid: resource.metadata!.uid!, status });
        const event = sessionTransitionEvent({ before: readyReasonOf(reported), after: desired.reason, message: desired.message });
        if (event) this.options.events?.record(regardingOf('BrowserSession', resource.metadata!), event);
        this.log.info({ resource: key, phase: desired.phase, reason: desired.reason }, 'status reported');
      }
    } catch (error) {
      // Deleted meanwhile: the next reconcile sees it gone.
      if (apiErrorCode(error) !== 404) throw error;
    }
  }
}

export function createBrowserSessionReconciler(options: BrowserSessionReconcilerOptions): BrowserSessionReconciler {
  return new BrowserSessionReconciler(options);
}
