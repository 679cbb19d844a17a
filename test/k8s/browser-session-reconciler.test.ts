import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CDP_PATH } from '../../agent/src/server.js';
import { browserPodName } from '../../operator/src/k8s/browser-pod.js';
import { FINALIZERS } from '../../contract/kinds.js';
import { REASONS } from '../../operator/src/reconcilers/browser-session-plan.js';
import { createBrowserSessionReconciler, type BrowserSessionReconciler } from '../../operator/src/reconcilers/browser-session.js';
import { createKubernetesRuntime, type KubernetesRuntime } from '../../operator/src/runtime/kubernetes-runtime.js';
import { eventually } from '../support/eventually.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import {
  createLaunchSecret,
  createSession,
  deleteSession,
  launchSpec,
  newSessionId,
  readSession,
  readyCondition,
  type SessionObject,
} from './support/browser-sessions.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { agentAuth, testAgentTokens } from '../support/agent-access.js';

// The BrowserSession reconciler in-process against the real API server; its pods run by
// the suite's node agent (real agent, real Chromium). Sessions are written as the API
// writes them: the resource, then its launch Secret.

const RESYNC_MS = 1_500;
let namespace: string;
let node: NodeAgent;
let runtime: KubernetesRuntime;
let reconciler: BrowserSessionReconciler;
let running: Promise<void>;
const stop = new AbortController();
let pages: TestPageServer;
const core = kubeConfig().makeApiClient(CoreV1Api);
const logLines: { msg: string; resource?: string }[] = [];
const statusWrites = (name: string) => logLines.filter((line) => line.msg === 'status reported' && line.resource === `${namespace}/${name}`).length;

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('bsr');
  const quiet = { info: () => {}, warn: () => {} };
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses: { first: 100, last: 119 }, log: quiet });
  const log = pino({ level: 'silent' });
  runtime = createKubernetesRuntime({
    config: kubeConfig(),
    namespace,
    pod: { image: `${BROWSER_IMAGE_REPOSITORY}:test` },
    log,
    agentTokens: testAgentTokens,
    launchTimeoutMs: 90_000,
    ownerReferencesOf: (browserId) => reconciler.ownerReferencesOf(browserId),
  });
  // The reconciler's own log says when it wrote a status: the API server turns an
  // identical apply into a no-op, so the resourceVersion alone cannot show a needless write.
  const reconcilerLog = pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line) as { msg: string; resource?: string }) });
  reconciler = createBrowserSessionReconciler({ config: kubeConfig(), namespace, runtime, log: reconcilerLog, resyncMs: RESYNC_MS, terminateGraceMs: 5_000 });
  running = reconciler.run(stop.signal);
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello from a session pod</title>' });
});
afterAll(async () => {
  stop.abort();
  await running;
  await runtime?.close();
  await node?.stop();
  await pages?.close();
});

const session = (name: string) => readSession(namespace, name);
const podOf = (name: string) => core.readNamespacedPod({ name, namespace }).catch(() => undefined);
const secretExists = (name: string) => core.readNamespacedSecret({ name, namespace }).then(
  () => true,
  () => false,
);

async function launched(): Promise<{ id: string; name: string; resource: SessionObject }> {
  const id = newSessionId();
  const created = await createSession(namespace, id);
  await createLaunchSecret(namespace, created, launchSpec(id));
  const resource = await eventually(() => session(created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'Running', accept: (r) => r?.status?.phase === 'Running' && Boolean(r.status.agentUrl) });
  return { id, name: created.metadata.name, resource: resource! };
}

async function deletedWithoutTrace(id: string, name: string): Promise<void> {
  await deleteSession(namespace, name);
  await eventually(() => session(name), { timeoutMs: 60_000, intervalMs: 150, what: 'BrowserSession gone', accept: (r) => r === undefined });
  expect(await podOf(browserPodName(id))).toBeUndefined();
  expect(await secretExists(`${name}-launch`)).toBe(false);
  // The runtime's copy of the launch spec for the pod goes with it.
  expect(await secretExists(browserPodName(id))).toBe(false);
  expect(node.containers(namespace, browserPodName(id))).toEqual([]);
}

describe('BrowserSession reconciler', () => {
  it('turns a BrowserSession and its launch Secret into one pod whose Chromium answers over CDP at status.agentUrl, and a delete removes it all', async () => {
    const { id, name, resource } = await launched();
    const status = resource.status!;
    expect(status).toMatchObject({ sessionId: id, podName: browserPodName(id), observedGeneration: resource.metadata.generation });
    expect(status.agentUrl).toMatch(/^http:\/\/127\.0\.0\.(1[01]\d):9222$/);
    expect(readyCondition(status)).toMatchObject({ status: 'True', reason: REASONS.podReady, observedGeneration: resource.metadata.generation });
    expect(resource.metadata.finalizers).toContain(FINALIZERS.browserSession);
    expect(resource.metadata.managedFields?.some((f) => f.manager === 'browserplane-operator' && f.subresource === 'status')).toBe(true);

    const version = (await fetch(`${status.agentUrl!}/json/version`, { headers: agentAuth(id) }).then((r) => r.json())) as { webSocketDebuggerUrl: string };
    expect(version.webSocketDebuggerUrl).toContain(CDP_PATH);
    const browser = await chromium.connectOverCDP(`${status.agentUrl!.replace(/^http/, 'ws')}${CDP_PATH}`, { headers: agentAuth(id) });
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(`${pages.url}/hello`);
    expect(await page.title()).toBe('hello from a session pod');
    await browser.close();

    const pods = await core.listNamespacedPod({ namespace, labelSelector: 'browserplane.dev/browser-id' });
    expect(pods.items.filter((p) => p.metadata?.annotations?.['browserplane.dev/browser-id'] === id)).toHaveLength(1);
    // The pod carries the session's owner labels (from the resource), not only the spec's,
    // and the BrowserSession as its owner, as does the pod's Secret.
    const ownPod = pods.items.find((p) => p.metadata?.name === browserPodName(id))!;
    expect(ownPod.metadata?.labels?.['browserplane.dev/session-id']).toBe(id);
    const owner = { kind: 'BrowserSession', name, uid: resource.metadata.uid, controller: true };
    expect(ownPod.metadata?.ownerReferences).toEqual([expect.objectContaining(owner)]);
    expect((await core.readNamespacedSecret({ name: browserPodName(id), namespace })).metadata?.ownerReferences).toEqual([expect.objectContaining(owner)]);

    await deletedWithoutTrace(id, name);
  });

  it('writes status only when it changes: the resourceVersion stays put across resyncs', async () => {
    const { id, name, resource } = await launched();
    // Let any write that raced the wait settle, then watch several resyncs go by.
    await new Promise((resolve) => setTimeout(resolve, RESYNC_MS));
    const before = (await session(name))!;
    const writesBefore = statusWrites(name);
    expect(writesBefore).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, RESYNC_MS * 3));
    const after = (await session(name))!;
    expect(statusWrites(name)).toBe(writesBefore);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(readyCondition(after.status)!.lastTransitionTime).toBe(readyCondition(resource.status)!.lastTransitionTime);
    await deletedWithoutTrace(id, name);
  });

  it('waits for a launch Secret that arrives late (AwaitingLaunchSpec, no pod), then runs the browser', async () => {
    const id = newSessionId();
    const created = await createSession(namespace, id);
    const waiting = await eventually(() => session(created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'AwaitingLaunchSpec', accept: (r) => readyCondition(r?.status)?.reason === REASONS.awaitingLaunchSpec });
    expect(waiting!.status).toMatchObject({ phase: 'Pending', sessionId: id });
    expect(readyCondition(waiting!.status)).toMatchObject({ status: 'False' });
    expect(await podOf(browserPodName(id))).toBeUndefined();

    await createLaunchSecret(namespace, created, launchSpec(id));
    const ready = await eventually(() => session(created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'Running after the Secret', accept: (r) => r?.status?.phase === 'Running' });
    expect(ready!.status!.agentUrl).toMatch(/^http:\/\/127\.0\.0\./);
    expect(readyCondition(ready!.status)).toMatchObject({ status: 'True', reason: REASONS.podReady });
    expect((await fetch(`${ready!.status!.agentUrl!}/health`, { headers: agentAuth(id) }).then((r) => r.json())) as { browser_id: string }).toMatchObject({ browser_id: id });
    await deletedWithoutTrace(id, created.metadata.name);
  });

  it('reports a browser killed under a running session as Failed (BrowserExited) with the pod’s reason, and does not relaunch it', async () => {
    const { id, name } = await launched();
    const [agent] = node.containers(namespace, browserPodName(id));
    process.kill(agent!.pid, 'SIGKILL');
    const failed = await eventually(() => session(name), { timeoutMs: 60_000, intervalMs: 150, what: 'Failed', accept: (r) => r?.status?.phase === 'Failed' });
    expect(readyCondition(failed!.status)).toMatchObject({ status: 'False', reason: REASONS.browserExited });
    expect(failed!.status!.message).toContain('exit code 137');
    // Server-side apply drops what the operator stopped sending.
    expect(failed!.status!.agentUrl).toBeUndefined();
    // A session is one browser: the failed pod stays (for its logs) and none replaces it.
    await new Promise((resolve) => setTimeout(resolve, RESYNC_MS * 2));
    expect((await podOf(browserPodName(id)))?.status?.phase).toBe('Failed');
    expect(node.containers(namespace, browserPodName(id))).toEqual([]);
    await deletedWithoutTrace(id, name);
  });

  it('ends a browser whose resource is deleted while its pod is still starting', async () => {
    const id = newSessionId();
    const created = await createSession(namespace, id);
    await createLaunchSecret(namespace, created, launchSpec(id));
    await eventually(() => podOf(browserPodName(id)), { timeoutMs: 30_000, intervalMs: 150, what: 'pod created', accept: (pod) => pod !== undefined });
    await deletedWithoutTrace(id, created.metadata.name);
  });
});
