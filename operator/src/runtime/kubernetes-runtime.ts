/**
 * The BrowserRuntime for Kubernetes mode: one pod per browser (operator/src/k8s/browser-pod.ts),
 * its launch spec in a Secret of the same name. The agent code is the one embedded mode
 * runs; this adapter only places it and reads the pod's status.
 *
 * One pod informer (label-selected, in the runtime's namespace) serves every launch,
 * observe and list, so a pool filling fifty browsers costs one watch, not fifty pollers.
 * A launch waits on that cache for the pod to be Ready (the kubelet's readiness probe on
 * the agent's /health) and then asks the agent itself, as embedded mode does.
 */
import { EventEmitter } from 'node:events';
import { CoreV1Api, makeInformer, type KubeConfig, type V1OwnerReference, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorCode } from '../../../lib/k8s-errors.js';
import { AGENT_PORT, BROWSER_ID_LABEL, browserPod, browserPodName, browserSecret, COMPONENT_LABELS, type BrowserPodOptions } from '../k8s/browser-pod.js';
import { type BrowserLaunchSpec, type BrowserRuntime, type ObservedBrowser } from '../../../contract/browser-runtime.js';
import { agentControls, fetchHealth, requestAgentShutdown } from '../../../contract/agent-client.js';
import type { AgentTokens } from '../../../contract/agent-client.js';
import { keepInformerRunning } from '../../../lib/informer-restart.js';

export interface KubernetesRuntimeOptions {
  config: KubeConfig;
  namespace: string;
  pod: Omit<BrowserPodOptions, 'namespace' | 'labels'>;
  log: Logger;
  /** The agent token of each browser (agent-client.ts): in its pod's Secret, presented on every call. */
  agentTokens: AgentTokens;
  /** How long a pod may take from creation to Ready (image pull included). Default 120 s. */
  launchTimeoutMs?: number;
  /**
   * Owners of a browser's pod and Secret (the BrowserSession it stands for), so that the
   * garbage collector removes them with their owner should its finalizer be forced off.
   */
  ownerReferencesOf?(browserId: string): V1OwnerReference[] | undefined;
}

export type KubernetesRuntime = BrowserRuntime & {
  /** Stops the pod watch; browsers keep running (they are the cluster's now). */
  close(): Promise<void>;
};

const SELECTOR = Object.entries(COMPONENT_LABELS)
  .map(([key, value]) => `${key}=${value}`)
  .join(',');

const isReady = (pod: V1Pod): boolean => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Why a pod's agent is not running, as the kubelet reported it. */
function terminationReason(pod: V1Pod): string {
  const state = pod.status?.containerStatuses?.find((c) => c.name === 'agent')?.state;
  const terminated = state?.terminated;
  if (terminated) return [terminated.reason, `exit code ${terminated.exitCode}`, terminated.message].filter(Boolean).join(': ');
  const waiting = state?.waiting;
  if (waiting) return [waiting.reason, waiting.message].filter(Boolean).join(': ');
  return pod.status?.reason ?? pod.status?.message ?? `pod ${pod.status?.phase ?? 'unknown'}`;
}

function browserIdOf(pod: V1Pod): string {
  return pod.metadata?.annotations?.[BROWSER_ID_LABEL] ?? pod.metadata?.labels?.[BROWSER_ID_LABEL] ?? '';
}

export function observePod(pod: V1Pod): ObservedBrowser {
  const labels = { ...(pod.metadata?.labels ?? {}) };
  const base = {
    browserId: browserIdOf(pod),
    labels,
    ...(pod.status?.startTime ? { startedAt: new Date(pod.status.startTime) } : {}),
  };
  if (pod.metadata?.deletionTimestamp) return { ...base, phase: 'Terminating' };
  switch (pod.status?.phase) {
    case 'Succeeded':
      return { ...base, phase: 'Gone', reason: terminationReason(pod) };
    case 'Failed':
      return { ...base, phase: 'Failed', reason: terminationReason(pod) };
    case 'Running':
      if (isReady(pod) && pod.status.podIP) return { ...base, phase: 'Ready', agentUrl: agentUrlOf(pod) };
      return { ...base, phase: 'Starting' };
    default:
      return { ...base, phase: pod.spec?.nodeName ? 'Starting' : 'Pending' };
  }
}

function agentUrlOf(pod: V1Pod): string {
  const ip = pod.status!.podIP!;
  return `http://${ip.includes(':') ? `[${ip}]` : ip}:${AGENT_PORT}`;
}

export function createKubernetesRuntime(options: KubernetesRuntimeOptions): KubernetesRuntime {
  const { config, namespace } = options;
  const log = options.log.child({ component: 'kubernetes-runtime', namespace });
  const core = config.makeApiClient(CoreV1Api);
  const launchTimeoutMs = options.launchTimeoutMs ?? 120_000;
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  const informer = makeInformer<V1Pod>(
    config,
    `/api/v1/namespaces/${namespace}/pods`,
    () => core.listNamespacedPod({ namespace, labelSelector: SELECTOR }),
    SELECTOR,
  );
  const notify = (pod: V1Pod) => changes.emit(pod.metadata?.name ?? '', pod);
  informer.on('add', notify);
  informer.on('update', notify);
  informer.on('delete', (pod) => changes.emit(pod.metadata?.name ?? '', undefined));
  let closed = false;
  keepInformerRunning(informer, {
    stopped: () => closed,
    onFailure: (error, retryInMs) => log.warn({ err: error, retryInMs }, 'pod watch failed; restarting'),
  });
  const started = informer.start();
  const launching = new Map<string, Promise<ObservedBrowser>>();

  const podOf = async (browserId: string): Promise<V1Pod | undefined> => {
    await started;
    return informer.get(browserPodName(browserId), namespace);
  };

  /** Resolves with the pod once `done` holds for it (or undefined once it is gone), or at the deadline. */
  function waitForPod(name: string, done: (pod: V1Pod | undefined) => boolean, timeoutMs: number, signal?: AbortSignal): Promise<V1Pod | undefined | 'timeout'> {
    return new Promise((resolve, reject) => {
      const check = (pod: V1Pod | undefined) => {
        if (!done(pod)) return;
        finish();
        resolve(pod);
      };
      const timer = setTimeout(() => {
        finish();
        resolve('timeout');
      }, timeoutMs);
      const onAbort = () => {
        finish();
        reject(signal!.reason instanceof Error ? signal!.reason : new Error('launch aborted'));
      };
      const finish = () => {
        clearTimeout(timer);
        changes.off(name, check);
        signal?.removeEventListener('abort', onAbort);
      };
      changes.on(name, check);
      signal?.addEventListener('abort', onAbort, { once: true });
      check(informer.get(name, namespace));
    });
  }

  async function removePod(browserId: string, graceSeconds: number): Promise<void> {
    const name = browserPodName(browserId);
    // The grace goes in the body: with a body present the API server ignores the query's.
    await core.deleteNamespacedPod({ name, namespace, body: { gracePeriodSeconds: graceSeconds } }).catch((error: unknown) => {
      if (apiErrorCode(error) !== 404) throw error;
    });
    await core.deleteNamespacedSecret({ name, namespace }).catch((error: unknown) => {
      if (apiErrorCode(error) !== 404) throw error;
    });
  }

  async function start(spec: BrowserLaunchSpec, signal: AbortSignal): Promise<ObservedBrowser> {
    const name = browserPodName(spec.browserId);
    const existing = await podOf(spec.browserId);
    if (existing) {
      const current = observePod(existing);
      if (current.phase === 'Ready' || current.phase === 'Starting' || current.phase === 'Pending') return awaitReady(name, spec, signal);
      // A failed or finished pod of this id is replaced: launch means "have it running".
      await removePod(spec.browserId, 0);
      await waitForPod(name, (pod) => pod === undefined, 30_000);
    }
    const podOptions = { ...options.pod, namespace, labels: spec.labels };
    const owners = options.ownerReferencesOf?.(spec.browserId);
    const owned = <T extends V1Pod | V1Secret>(object: T): T => (owners?.length ? { ...object, metadata: { ...object.metadata, ownerReferences: owners } } : object);
    const secret = owned(browserSecret(spec, podOptions, options.agentTokens(spec.browserId)));
    try {
      await core.createNamespacedSecret({ namespace, body: secret });
    } catch (error) {
      if (apiErrorCode(error) !== 409) throw error;
      await core.replaceNamespacedSecret({ name, namespace, body: secret });
    }
    try {
      await core.createNamespacedPod({ namespace, body: owned(browserPod(spec, podOptions)) });
    } catch (error) {
      if (apiErrorCode(error) !== 409) {
        // Refused (admission, quota): the launch spec would outlive it with no pod to read it.
        await removePod(spec.browserId, 0).catch(() => undefined);
        throw error;
      }
    }
    log.info({ browser_id: spec.browserId, pod: name }, 'browser pod created');
    return awaitReady(name, spec, signal);
  }

  async function awaitReady(name: string, spec: BrowserLaunchSpec, signal: AbortSignal): Promise<ObservedBrowser> {
    const startedAt = Date.now();
    // The watch may not have delivered the pod just created: absent counts as deleted
    // only once it has been seen.
    let seen = false;
    const pod = await waitForPod(
      name,
      (current) => {
        if (!current) return seen;
        seen = true;
        return (current.status?.phase === 'Running' && isReady(current)) || ['Failed', 'Succeeded'].includes(current.status?.phase ?? '');
      },
      launchTimeoutMs,
      signal,
    );
    if (pod === 'timeout') {
      const current = informer.get(name, namespace);
      const why = `pod not ready within ${launchTimeoutMs} ms${current ? ` (${terminationReason(current)})` : ''}`;
      await removePod(spec.browserId, 0);
      return { browserId: spec.browserId, phase: 'Failed', reason: why, labels: spec.labels };
    }
    if (!pod) return { browserId: spec.browserId, phase: 'Gone', reason: 'pod deleted while starting', labels: spec.labels };
    const observed = observePod(pod);
    if (observed.phase !== 'Ready') return observed;
    // The probe said ready; the agent confirms it serves this browser.
    const health = await fetchHealth({ url: observed.agentUrl!, token: options.agentTokens(spec.browserId) }, 2000);
    if (health?.status !== 'ready' || health.browser_id !== spec.browserId) {
      return { ...observed, phase: 'Failed', reason: `agent at ${observed.agentUrl} does not serve browser ${spec.browserId}` };
    }
    log.info({ browser_id: spec.browserId, pod: name, ms: Date.now() - startedAt }, 'browser pod ready');
    return observed;
  }

  const controls = agentControls(async (browserId) => {
    const pod = await podOf(browserId);
    return pod && observePod(pod);
  }, options.agentTokens);

  const runtime: KubernetesRuntime = {
    launch(spec, { signal }) {
      const pending = launching.get(spec.browserId);
      if (pending) return pending;
      const done = start(spec, signal).finally(() => launching.delete(spec.browserId));
      launching.set(spec.browserId, done);
      return done;
    },

    async observe(browserId) {
      const pod = await podOf(browserId);
      if (pod) return observePod(pod);
      return launching.has(browserId) ? { browserId, phase: 'Pending', labels: {} } : undefined;
    },

    async list() {
      await started;
      return informer.list(namespace).map(observePod);
    },

    ...controls,

    async terminate(browserId, { graceMs, discardProfile }) {
      await launching.get(browserId)?.catch(() => undefined);
      const pod = await podOf(browserId);
      if (!pod) {
        await removePod(browserId, 0);
        return;
      }
      const current = observePod(pod);
      // The agent closes Chromium (saving the profile unless told not to) before the pod
      // goes; the kubelet's SIGTERM would do the same, but without the discard choice.
      if (current.phase === 'Ready') await requestAgentShutdown({ url: current.agentUrl!, token: options.agentTokens(browserId) }, Math.floor(graceMs * 0.8), { saveProfile: discardProfile !== true });
      await removePod(browserId, Math.max(1, Math.ceil(graceMs / 1000)));
      const gone = await waitForPod(browserPodName(browserId), (p) => p === undefined, graceMs + 10_000);
      if (gone === 'timeout') log.warn({ browser_id: browserId }, 'browser pod still terminating; its node will finish it');
      log.info({ browser_id: browserId }, 'browser terminated');
    },

    async close() {
      closed = true;
      await informer.stop();
    },
  };
  return runtime;
}
