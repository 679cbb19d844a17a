/**
 * The API's side of the BrowserSession contract, as pure functions: the resource and the
 * launch Secret the API writes for a launch, and what a resource's status (written by the
 * operator) means to the BrowserRuntime port. No I/O here, so the mapping is table-tested
 * without a cluster (test/unit/custom-resource-status.test.ts).
 */
import type { KubernetesObject, V1ObjectMeta, V1Secret } from '@kubernetes/client-node';
import { ANNOTATIONS, API_VERSION, labelValue, idOfResourceName, LABELS, LAUNCH_SPEC_KEY, launchSecretNameOf, ownerLabels, resourceNameOf, SESSION_PHASES } from '../../../contract/kinds.js';
import type { BrowserLaunchSpec, ObservedBrowser } from '../../../contract/browser-runtime.js';

export interface SessionCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

export interface BrowserSessionStatus {
  phase?: string;
  sessionId?: string;
  podName?: string;
  agentUrl?: string;
  message?: string;
  observedGeneration?: number;
  conditions?: SessionCondition[];
}

export interface BrowserSessionResource extends KubernetesObject {
  metadata: V1ObjectMeta;
  spec: Record<string, unknown>;
  status?: BrowserSessionStatus;
}

/** Labels of the launch spec that are the runtime's (pool membership), not the user's tags. */
const isRuntimeLabel = (key: string): boolean => key.startsWith('browserplane.dev/');

/**
 * The BrowserSession the API writes for a launch: the create body in Kubernetes spelling
 * plus `project`. Nothing secret goes in (no proxy, no profile archive URL with its token):
 * those reach the pod through the launch Secret only.
 */
export function browserSessionResource(spec: BrowserLaunchSpec, namespace: string): BrowserSessionResource {
  const pool = spec.labels[LABELS.poolId];
  const tags = Object.fromEntries(Object.entries(spec.labels).filter(([key]) => !isRuntimeLabel(key)));
  const { width, height, refreshRate } = spec.viewport;
  return {
    apiVersion: API_VERSION,
    kind: 'BrowserSession',
    metadata: {
      name: resourceNameOf(spec.browserId),
      namespace,
      labels: {
        [LABELS.sessionId]: labelValue(spec.browserId),
        ...ownerLabels(spec),
        ...(pool !== undefined ? { [LABELS.poolId]: labelValue(pool) } : {}),
      },
      annotations: { [ANNOTATIONS.createdBy]: 'api' },
    },
    spec: {
      headless: spec.headless,
      stealth: spec.stealth,
      kioskMode: spec.kioskMode,
      viewport: { width, height, ...(refreshRate !== undefined ? { refreshRate } : {}) },
      ...(spec.startUrl !== undefined ? { startUrl: spec.startUrl } : {}),
      ...(spec.profile ? { profile: { id: spec.profile.id, saveChanges: spec.profile.saveChanges } } : {}),
      chromePolicy: spec.chromePolicy,
      ...(Object.keys(tags).length > 0 ? { tags } : {}),
      project: spec.projectId,
    },
  };
}

/**
 * The launch Secret, owned by its BrowserSession so the garbage collector removes it with
 * the resource. Neither controller nor blocking: the operator owns the pod, and deleting a
 * session must not wait on a Secret.
 */
export function launchSecret(spec: BrowserLaunchSpec, namespace: string, owner: { name: string; uid: string }): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: launchSecretNameOf(spec.browserId),
      namespace,
      labels: { [LABELS.sessionId]: labelValue(spec.browserId) },
      ownerReferences: [{ apiVersion: API_VERSION, kind: 'BrowserSession', name: owner.name, uid: owner.uid, controller: false, blockOwnerDeletion: false }],
    },
    type: 'Opaque',
    stringData: { [LAUNCH_SPEC_KEY]: JSON.stringify(spec) },
  };
}

/**
 * The session id a resource stands for: its label holds it as written for API resources
 * (ids are label-safe); the operator's status names it for resources applied with kubectl.
 */
export function sessionIdOf(resource: BrowserSessionResource): string {
  return resource.status?.sessionId ?? resource.metadata.labels?.[LABELS.sessionId] ?? idOfResourceName(resource.metadata.name ?? '');
}

function failureReason(status: BrowserSessionStatus): string {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  const text = status.message ?? ready?.message;
  return [ready?.reason, text].filter(Boolean).join(': ') || 'the operator reported the browser Failed';
}

/**
 * What the port's callers see of a resource. Failed (launch failed, browser exited) maps
 * to Failed, which the reaper ends as browser_crashed, as in embedded mode; a resource
 * that is gone is `undefined` to observe (browser_gone).
 */
export function observeSession(resource: BrowserSessionResource): ObservedBrowser {
  const status = resource.status ?? {};
  const base = {
    browserId: sessionIdOf(resource),
    labels: { ...(resource.metadata.labels ?? {}) },
    ...(resource.metadata.creationTimestamp ? { startedAt: new Date(resource.metadata.creationTimestamp) } : {}),
  };
  if (resource.metadata.deletionTimestamp || status.phase === SESSION_PHASES.terminating) return { ...base, phase: 'Terminating' };
  switch (status.phase) {
    case SESSION_PHASES.failed:
      return { ...base, phase: 'Failed', reason: failureReason(status) };
    case SESSION_PHASES.running:
      return status.agentUrl ? { ...base, phase: 'Ready', agentUrl: status.agentUrl } : { ...base, phase: 'Starting' };
    case 'Ended':
      return { ...base, phase: 'Gone', reason: status.message ?? 'the session ended' };
    default:
      return { ...base, phase: status.podName ? 'Starting' : 'Pending' };
  }
}

/** Whether a launch waiting on this resource is done: Ready, Failed, or being deleted under it. */
export function launchSettled(observed: ObservedBrowser): boolean {
  return observed.phase === 'Ready' || observed.phase === 'Failed' || observed.phase === 'Gone' || observed.phase === 'Terminating';
}
