/**
 * What the reconcilers of kubectl-applied resources (BrowserPool, AuthConnection) do to
 * their own objects besides status (status.ts): watch them, read one by key, and hold or
 * release their finalizer. One module, so both do it the same way.
 */
import type { AppDeps } from '../../../api/src/index.js';
import type { ControllerMetrics } from '../k8s/controller.js';
import type { EventRecorder } from '../k8s/event-recorder.js';
import { ApiException, CustomObjectsApi, makeInformer, PatchStrategy, setHeaderOptions, type Informer, type KubeConfig, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import { VERSION } from '../k8s/crds.js';
import { splitKey } from '../k8s/controller.js';
import { FIELD_MANAGERS, GROUP } from '../../../contract/kinds.js';

/** What both GitOps reconcilers are started with. */
export interface GitOpsReconcilerOptions {
  config: KubeConfig;
  /** The namespace whose resources are reconciled; all namespaces when omitted. */
  namespace?: string | undefined;
  /** The API's dependencies (database, clock, log, runtime, event hub…), composed as the API composes them. */
  deps: AppDeps;
  workers?: number;
  resyncMs?: number;
  /** Kubernetes Events at transitions (kubectl describe); none without. */
  events?: EventRecorder;
  metrics?: ControllerMetrics;
}

export interface ResourceClient<T extends KubernetesObject> {
  /** An informer on the resources of `namespace` (all namespaces when undefined). */
  informer(namespace: string | undefined): Informer<T> & ObjectCache<T>;
  /** The resource as the API server has it now; undefined once it is gone. */
  read(key: string): Promise<T | undefined>;
  /**
   * Adds or removes `finalizer`. The resourceVersion makes a concurrent change fail (409),
   * and the reconcile is retried on fresh state.
   */
  setFinalizer(object: T, finalizer: string, present: boolean): Promise<void>;
}

export function resourceClient<T extends KubernetesObject>(config: KubeConfig, plural: string): ResourceClient<T> {
  const api = config.makeApiClient(CustomObjectsApi);
  return {
    informer(namespace) {
      const path = namespace === undefined ? `/apis/${GROUP}/${VERSION}/${plural}` : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`;
      const list = () =>
        namespace === undefined
          ? api.listClusterCustomObject({ group: GROUP, version: VERSION, plural })
          : api.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural });
      return makeInformer<T>(config, path, list);
    },

    async read(key) {
      const { namespace, name } = splitKey(key);
      try {
        return (await api.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: namespace!, plural, name })) as T;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw error;
      }
    },

    async setFinalizer(object, finalizer, present) {
      const metadata = object.metadata!;
      const others = (metadata.finalizers ?? []).filter((f) => f !== finalizer);
      await api.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: metadata.namespace!,
          plural,
          name: metadata.name!,
          body: { metadata: { finalizers: present ? [...others, finalizer] : others, resourceVersion: metadata.resourceVersion } },
          fieldManager: FIELD_MANAGERS.operator,
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
  };
}
