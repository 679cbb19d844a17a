/**
 * The API's BrowserRuntime in Kubernetes mode. It launches nothing itself: a launch writes
 * the desired state (a BrowserSession, and its launch spec in a Secret owned by it) and
 * waits for the operator to report the browser Running with an agent URL; ending a browser
 * is deleting its resource (the operator's finalizer shuts the agent down and removes the
 * pod). The contract's spellings are in contract/kinds.ts and
 * ./custom-resource-status.ts.
 *
 * One informer on BrowserSessions serves every launch, observe and list, so fifty warm
 * pool launches cost one watch, not fifty pollers. Browsers belong to the cluster: closing
 * this runtime (the API shutting down) stops the watch and ends nothing.
 */
import { EventEmitter } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { CoreV1Api, CustomObjectsApi, makeInformer, type KubeConfig, type KubernetesListObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiErrorCode } from '../../../lib/k8s-errors.js';
import { FIELD_MANAGERS, GROUP, LABELS, launchSecretNameOf, PLURALS, resourceNameOf } from '../../../contract/kinds.js';
import { VERSION } from '../../../contract/kinds.js';
import { type BrowserLaunchSpec, type BrowserRuntime, type ObservedBrowser } from '../../../contract/browser-runtime.js';
import { agentControls, requestAgentShutdown } from '../../../contract/agent-client.js';
import type { AgentTokens } from '../../../contract/agent-client.js';
import { browserSessionResource, launchSecret, launchSettled, observeSession, sessionIdOf, type BrowserSessionResource } from './custom-resource-status.js';
import { keepInformerRunning } from '../../../lib/informer-restart.js';

export interface CustomResourceRuntimeOptions {
  config: KubeConfig;
  namespace: string;
  log: Logger;
  /**
   * The agent token of each browser (agent-client.ts), for the calls this runtime makes to
   * agents (settings, reset, a discarding shutdown). The operator derives the same tokens
   * from the same key and puts them in the pods' Secrets (k8s/browser-pod.ts).
   */
  agentTokens: AgentTokens;
  /** How long a launch waits for Running when its caller sets no deadline. Default 120 s. */
  launchTimeoutMs?: number;
  /** Beyond a terminate's grace, how long it waits for the operator to release the resource. Default 20 s. */
  terminateMarginMs?: number;
}

export type CustomResourceRuntime = BrowserRuntime & {
  /** Stops the watch; browsers keep running (they are the cluster's). */
  close(): Promise<void>;
};

const ignoreNotFound = (error: unknown) => {
  if (apiErrorCode(error) !== 404) throw error;
};

export function createCustomResourceRuntime(options: CustomResourceRuntimeOptions): CustomResourceRuntime {
  const { config, namespace } = options;
  const log = options.log.child({ component: 'custom-resource-runtime', namespace });
  const custom = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const launchTimeoutMs = options.launchTimeoutMs ?? 120_000;
  const terminateMarginMs = options.terminateMarginMs ?? 20_000;
  const target = { group: GROUP, version: VERSION, namespace, plural: PLURALS.BrowserSession };

  // Resources the API wrote carry the session-id label; selecting on it keeps the cache to them.
  const informer = makeInformer<BrowserSessionResource>(
    config,
    `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`,
    () => custom.listNamespacedCustomObject({ ...target, labelSelector: LABELS.sessionId }) as Promise<KubernetesListObject<BrowserSessionResource>>,
    LABELS.sessionId,
  );
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  informer.on('add', (resource) => changes.emit(resource.metadata.name!, resource));
  informer.on('update', (resource) => changes.emit(resource.metadata.name!, resource));
  informer.on('delete', (resource) => changes.emit(resource.metadata.name!, undefined));
  let closed = false;
  keepInformerRunning(informer, {
    stopped: () => closed,
    onFailure: (error, retryInMs) => log.warn({ err: error, retryInMs }, 'BrowserSession watch failed; restarting'),
  });
  const started = informer.start();
  // Awaited by every call; this keeps a failed first list (no CRD, no RBAC) from being an unhandled rejection.
  started.catch((error: unknown) => log.error({ err: error }, 'listing BrowserSessions failed'));
  /** Launches in flight, each with a controller terminate aborts (ending a browser cancels its launch). */
  const launching = new Map<string, { done: Promise<ObservedBrowser>; cancel: AbortController }>();

  const cached = (name: string) => informer.get(name, namespace);

  async function resourceOf(browserId: string): Promise<BrowserSessionResource | undefined> {
    await started;
    // Resources the operator adopted from kubectl have their own names; the id is in them.
    return cached(resourceNameOf(browserId)) ?? informer.list(namespace).find((r) => sessionIdOf(r) === browserId);
  }

  /** Resolves with the resource once `done` holds for it (undefined: gone), or 'timeout'; rejects on abort. */
  function waitFor(name: string, done: (r: BrowserSessionResource | undefined) => boolean, timeoutMs: number, signal?: AbortSignal) {
    return new Promise<BrowserSessionResource | undefined | 'timeout'>((resolve, reject) => {
      const check = (resource: BrowserSessionResource | undefined) => {
        if (!done(resource)) return;
        finish();
        resolve(resource);
      };
      const timer = setTimeout(() => (finish(), resolve('timeout')), timeoutMs);
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
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      check(cached(name));
    });
  }

  async function exists(name: string): Promise<boolean> {
    try {
      await custom.getNamespacedCustomObject({ ...target, name });
      return true;
    } catch (error) {
      ignoreNotFound(error);
      return false;
    }
  }

  /** Waits until the resource is gone, confirmed by the API server (the cache may lag behind a create). */
  async function waitGone(name: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const seen = await waitFor(name, (r) => r === undefined, deadline - Date.now());
      if (seen === 'timeout') return false;
      if (!(await exists(name))) return true;
      await delay(200);
    }
    return false;
  }

  /** Deletes the resource (the operator's finalizer ends the pod), then its launch Secret. */
  async function remove(browserId: string, waitMs: number): Promise<boolean> {
    const name = resourceNameOf(browserId);
    await custom.deleteNamespacedCustomObject({ ...target, name }).catch(ignoreNotFound);
    const gone = await waitGone(name, waitMs);
    // Owned by the resource, so the garbage collector removes it too; deleted here as
    // well so a Secret holding proxy credentials never outlives its browser for long.
    await core.deleteNamespacedSecret({ name: launchSecretNameOf(browserId), namespace }).catch(ignoreNotFound);
    return gone;
  }

  async function write(spec: BrowserLaunchSpec): Promise<void> {
    const body = browserSessionResource(spec, namespace);
    const name = body.metadata.name!;
    let uid: string;
    try {
      const created = (await custom.createNamespacedCustomObject({ ...target, body, fieldManager: FIELD_MANAGERS.api })) as BrowserSessionResource;
      uid = created.metadata.uid!;
    } catch (error) {
      if (apiErrorCode(error) !== 409) throw error;
      uid = ((await custom.getNamespacedCustomObject({ ...target, name })) as BrowserSessionResource).metadata.uid!;
    }
    const secret = launchSecret(spec, namespace, { name, uid });
    try {
      await core.createNamespacedSecret({ namespace, body: secret, fieldManager: FIELD_MANAGERS.api });
    } catch (error) {
      if (apiErrorCode(error) !== 409) throw error;
      // Left by an earlier resource of this id (owned by its old uid): replaced, not reused.
      await core.deleteNamespacedSecret({ name: secret.metadata!.name!, namespace }).catch(ignoreNotFound);
      await core.createNamespacedSecret({ namespace, body: secret, fieldManager: FIELD_MANAGERS.api });
    }
    log.info({ browser_id: spec.browserId, resource: name }, 'BrowserSession written');
  }

  async function start(spec: BrowserLaunchSpec, signal: AbortSignal): Promise<ObservedBrowser> {
    const name = resourceNameOf(spec.browserId);
    const existing = await resourceOf(spec.browserId);
    const current = existing && observeSession(existing);
    // A failed, ended or ending resource of this id is replaced: launch means "have it running".
    if (current && current.phase !== 'Pending' && current.phase !== 'Starting' && current.phase !== 'Ready') await remove(spec.browserId, launchTimeoutMs);
    if (!current || current.phase !== 'Ready') {
      try {
        await write(spec);
      } catch (error) {
        await remove(spec.browserId, 0).catch(() => undefined);
        throw error;
      }
    }
    const startedAt = Date.now();
    // The watch may not have delivered the resource just created: absent counts as
    // deleted only once it has been seen.
    let seen = false;
    let outcome: Awaited<ReturnType<typeof waitFor>>;
    try {
      outcome = await waitFor(name, (r) => (r ? ((seen = true), launchSettled(observeSession(r))) : seen), launchTimeoutMs, signal);
    } catch (error) {
      await remove(spec.browserId, 0).catch((e: unknown) => log.error({ err: e, browser_id: spec.browserId }, 'deleting an aborted launch failed'));
      throw error;
    }
    if (outcome === 'timeout') {
      await remove(spec.browserId, 0);
      return { browserId: spec.browserId, phase: 'Failed', reason: `not running within ${launchTimeoutMs} ms`, labels: spec.labels };
    }
    if (!outcome) return { browserId: spec.browserId, phase: 'Gone', reason: 'the BrowserSession was deleted while starting', labels: spec.labels };
    const observed = observeSession(outcome);
    log.info({ browser_id: spec.browserId, phase: observed.phase, reason: observed.reason, ms: Date.now() - startedAt }, 'BrowserSession launch settled');
    return observed;
  }

  const controls = agentControls(async (browserId) => {
    const resource = await resourceOf(browserId);
    return resource && observeSession(resource);
  }, options.agentTokens);

  return {
    launch(spec, { signal }) {
      const pending = launching.get(spec.browserId);
      if (pending) return pending.done;
      const cancel = new AbortController();
      const done = start(spec, AbortSignal.any([signal, cancel.signal])).finally(() => launching.delete(spec.browserId));
      launching.set(spec.browserId, { done, cancel });
      return done;
    },

    async observe(browserId) {
      const resource = await resourceOf(browserId);
      if (resource) return observeSession(resource);
      return launching.has(browserId) ? { browserId, phase: 'Pending', labels: {} } : undefined;
    },

    async list() {
      await started;
      return informer.list(namespace).map(observeSession);
    },

    ...controls,

    async terminate(browserId, { graceMs, discardProfile }) {
      const pending = launching.get(browserId);
      if (pending) {
        pending.cancel.abort(new Error('the browser was terminated while it started'));
        await pending.done.catch(() => undefined);
      }
      const resource = await resourceOf(browserId);
      const current = resource && observeSession(resource);
      // The operator's shutdown saves the profile; only the agent can be told not to, so a
      // discard goes to it first (the operator's own request then finds Chromium closing).
      if (discardProfile && current?.phase === 'Ready') await requestAgentShutdown({ url: current.agentUrl!, token: options.agentTokens(browserId) }, Math.floor(graceMs * 0.8), { saveProfile: false });
      const gone = await remove(browserId, graceMs + terminateMarginMs);
      if (!gone) log.warn({ browser_id: browserId }, 'BrowserSession still terminating; the operator will finish it');
      else log.info({ browser_id: browserId }, 'browser terminated');
    },

    async close() {
      closed = true;
      await informer.stop();
    },
  };
}
