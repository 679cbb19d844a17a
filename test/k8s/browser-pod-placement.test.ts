import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { ApiException, CoreV1Api, NodeV1Api, type V1Pod, type V1Taint } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { browserPodName, type BrowserPodOptions } from '../../operator/src/k8s/browser-pod.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { createKubernetesRuntime, type KubernetesRuntime } from '../../operator/src/runtime/kubernetes-runtime.js';
import { eventually } from '../support/eventually.js';
import { createLaunchSecret, createSession, deleteSession, launchSpec, newSessionId, readSession } from './support/browser-sessions.js';
import { renderChart, valuesFile, writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent, type NodeAgentOptions } from './support/node-agent.js';
import { assertOperatorBuilt, OPERATOR_LEASE_TIMINGS_UNSET, startOperatorProcess } from './support/operator-process.js';
import { testAgentTokens } from '../support/agent-access.js';

// Where browser pods run: the browser pod settings (BROWSERPLANE_BROWSER_POD) placed on
// real pods, judged by the real API server's admission and by the node agent's scheduler
// (nodeSelector against node labels, tolerations against node taints), run with real
// Chromium. Node-agent addresses 127.0.0.220-229 are this file's.

const core = kubeConfig().makeApiClient(CoreV1Api);
const nodes: NodeAgent[] = [];
const runtimes: KubernetesRuntime[] = [];
const runtimeClasses: string[] = [];
const operators: ChildProcess[] = [];

afterEach(async () => {
  for (const operator of operators.splice(0)) operator.kill('SIGKILL');
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
  await Promise.all(nodes.splice(0).map((node) => node.stop()));
});
afterAll(async () => {
  const api = kubeConfig().makeApiClient(NodeV1Api);
  await Promise.all(runtimeClasses.map((name) => api.deleteRuntimeClass({ name }).catch(() => undefined)));
});

/** The pods a node agent's scheduler left pending, with its reason, as it logs them. */
interface Node extends NodeAgent {
  leftPending: Map<string, string>;
}

async function node(namespace: string, name: string, options: Pick<NodeAgentOptions, 'addresses' | 'labels' | 'taints'>): Promise<Node> {
  const leftPending = new Map<string, string>();
  const agent = await startNodeAgent({
    config: kubeConfig(),
    nodeName: `${name}-${namespace}`,
    namespaces: [namespace],
    ...options,
    log: {
      info: () => {},
      warn: (fields) => {
        const { pod, reason } = fields as { pod?: string; reason?: string };
        if (pod && reason) leftPending.set(pod, reason);
      },
    },
  });
  nodes.push(agent);
  return Object.assign(agent, { leftPending });
}

function runtime(namespace: string, pod: Omit<BrowserPodOptions, 'namespace' | 'labels' | 'image'>, launchTimeoutMs = 90_000): KubernetesRuntime {
  const created = createKubernetesRuntime({ config: kubeConfig(), namespace, pod: { image: `${BROWSER_IMAGE_REPOSITORY}:test`, ...pod }, log: pino({ level: 'silent' }), agentTokens: testAgentTokens, launchTimeoutMs });
  runtimes.push(created);
  return created;
}

let counter = 0;
function spec(): BrowserLaunchSpec {
  return launchSpec(`bs_pl${++counter}${Date.now().toString(36)}`);
}

const readPod = (namespace: string, browserId: string): Promise<V1Pod> => core.readNamespacedPod({ name: browserPodName(browserId), namespace });
const signal = () => AbortSignal.timeout(120_000);
// Launches wait up to 90 s on a busy machine; a failure should be an assertion, not a timeout.
const slow = { timeout: 180_000 };

describe('browser pod placement', () => {
  it('keeps a browser pod with nodeSelector pool=gpu Pending beside a node without that label, and runs it on one with it', slow, async () => {
    const namespace = await freshNamespace('place');
    const plain = await node(namespace, 'plain', { addresses: { first: 220, last: 221 } });
    const gpuRuntime = runtime(namespace, { nodeSelector: { pool: 'gpu' } });
    const wanted = spec();
    const launching = gpuRuntime.launch(wanted, { signal: signal() });

    const key = `${namespace}/${browserPodName(wanted.browserId)}`;
    expect(await eventually(() => plain.leftPending.get(key), { timeoutMs: 30_000, intervalMs: 100, what: 'the plain node turns the pod down' })).toMatch(/didn't match Pod's node affinity\/selector \(pool=gpu\)/);
    const pending = await readPod(namespace, wanted.browserId);
    expect(pending.spec?.nodeSelector).toEqual({ pool: 'gpu' });
    expect(pending.spec?.nodeName).toBeUndefined();
    expect(pending.status?.phase).toBe('Pending');

    const gpu = await node(namespace, 'gpu', { addresses: { first: 222, last: 223 }, labels: { pool: 'gpu' } });
    const launched = await launching;
    expect(launched).toMatchObject({ phase: 'Ready' });
    expect(launched.agentUrl).toMatch(/^http:\/\/127\.0\.0\.22[23]:9222$/);
    expect((await readPod(namespace, wanted.browserId)).spec?.nodeName).toBe(gpu.nodeName);
    await gpuRuntime.terminate(wanted.browserId, { graceMs: 5_000 });
  });

  it('runs on a tainted node only the browser pods that tolerate its taint', slow, async () => {
    const namespace = await freshNamespace('place');
    const taint: V1Taint = { key: 'browserplane.dev/browsers', value: 'true', effect: 'NoSchedule' };
    const tainted = await node(namespace, 'tainted', { addresses: { first: 224, last: 225 }, taints: [taint] });
    const tolerating = runtime(namespace, { tolerations: [{ key: 'browserplane.dev/browsers', operator: 'Exists', effect: 'NoSchedule' }] });
    // Short: its pod is expected never to start; the launch gives up and removes it.
    const intolerant = runtime(namespace, {}, 10_000);
    const [welcome, turnedAway] = [spec(), spec()];

    const [launched, refused] = await Promise.all([tolerating.launch(welcome, { signal: signal() }), intolerant.launch(turnedAway, { signal: signal() })]);
    expect(launched).toMatchObject({ phase: 'Ready' });
    const pod = await readPod(namespace, welcome.browserId);
    expect(pod.spec?.nodeName).toBe(tainted.nodeName);
    expect(pod.spec?.tolerations).toContainEqual({ key: 'browserplane.dev/browsers', operator: 'Exists', effect: 'NoSchedule' });

    expect(refused).toMatchObject({ phase: 'Failed' });
    expect(refused.reason).toMatch(/not ready within 10000 ms/);
    expect(tainted.leftPending.get(`${namespace}/${browserPodName(turnedAway.browserId)}`)).toMatch(/untolerated taint\(s\) \{browserplane\.dev\/browsers=true:NoSchedule\}/);
    await tolerating.terminate(welcome.browserId, { graceMs: 5_000 });
  });

  it('names the RuntimeClass and the image pull secrets on the pod, and a RuntimeClass that does not exist fails the launch at admission', slow, async () => {
    const namespace = await freshNamespace('place');
    const nodeApi = kubeConfig().makeApiClient(NodeV1Api);
    const runtimeClass = `bp-sandbox-${randomBytes(4).toString('hex')}`;
    // Overhead: the RuntimeClass admission plugin copies it onto pods naming the class,
    // which shows the API server resolved this class for the pod.
    await nodeApi.createRuntimeClass({ body: { metadata: { name: runtimeClass }, handler: 'runsc', overhead: { podFixed: { memory: '64Mi' } } } });
    runtimeClasses.push(runtimeClass);
    await node(namespace, 'sandboxed', { addresses: { first: 226, last: 227 } });

    const sandboxed = runtime(namespace, { runtimeClassName: runtimeClass, imagePullSecrets: [{ name: 'regcred' }] });
    const wanted = spec();
    expect(await sandboxed.launch(wanted, { signal: signal() })).toMatchObject({ phase: 'Ready' });
    const pod = await readPod(namespace, wanted.browserId);
    expect(pod.spec?.runtimeClassName).toBe(runtimeClass);
    expect(pod.spec?.overhead).toEqual({ memory: '64Mi' });
    expect(pod.spec?.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    await sandboxed.terminate(wanted.browserId, { graceMs: 5_000 });

    const missing = `bp-missing-${randomBytes(4).toString('hex')}`;
    const unsandboxable = runtime(namespace, { runtimeClassName: missing });
    const refused = spec();
    const error: unknown = await unsandboxable.launch(refused, { signal: signal() }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ApiException);
    expect((error as ApiException<unknown>).code).toBe(403);
    const body = (error as ApiException<unknown>).body;
    expect(typeof body === 'string' ? body : JSON.stringify(body)).toMatch(new RegExp(`pod rejected: RuntimeClass \\\\?"${missing}\\\\?" not found`));
    // The refused launch leaves no Secret behind: its launch spec would have no pod to read it.
    await expect(core.readNamespacedSecret({ name: browserPodName(refused.browserId), namespace })).rejects.toMatchObject({ code: 404 });
  });

  it('places the chart’s browsers values on the pods the built operator creates for BrowserSessions', slow, async () => {
    assertOperatorBuilt();
    await installCrds();
    const namespace = await freshNamespace('place');
    const runtimeClass = `bp-chart-${randomBytes(4).toString('hex')}`;
    await kubeConfig().makeApiClient(NodeV1Api).createRuntimeClass({ body: { metadata: { name: runtimeClass }, handler: 'runsc' } });
    runtimeClasses.push(runtimeClass);
    const values = valuesFile(
      'placement.yaml',
      [
        'imagePullSecrets: [{name: regcred}]',
        'browsers:',
        '  nodeSelector: {pool: gpu}',
        '  tolerations: [{key: browserplane.dev/browsers, operator: Exists, effect: NoSchedule}]',
        `  runtimeClassName: ${runtimeClass}`,
      ].join('\n'),
    );
    // The operator's environment exactly as the chart renders it (its image is browserplane/browser, the node agent's).
    const objects = await renderChart({ namespace, valuesFiles: [values] });
    const deployment = objects.find((object) => object.kind === 'Deployment' && object.metadata.name === 'browserplane-operator')!;
    const env = (deployment.spec as { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } }).template.spec.containers[0]!.env;
    const browserPodSettings = env.find((variable) => variable.name === 'BROWSERPLANE_BROWSER_POD')!.value!;

    const gpu = await node(namespace, 'gpu', { addresses: { first: 228, last: 229 }, labels: { pool: 'gpu' }, taints: [{ key: 'browserplane.dev/browsers', effect: 'NoSchedule' }] });
    const operator = startOperatorProcess({
      kubeconfig: writeKubeconfig(),
      namespace,
      identity: 'operator-placement',
      env: { ...OPERATOR_LEASE_TIMINGS_UNSET, BROWSERPLANE_OPERATOR_RESYNC_SECONDS: undefined, BROWSERPLANE_BROWSER_POD: browserPodSettings, LOG_LEVEL: 'warn' },
    });
    operators.push(operator.child);

    const id = newSessionId();
    const session = await createSession(namespace, id);
    await createLaunchSecret(namespace, session, launchSpec(id));
    const settled = await eventually(() => readSession(namespace, session.metadata.name), { timeoutMs: 120_000, intervalMs: 150, what: 'session settled', accept: (read) => ['Running', 'Failed'].includes(read?.status?.phase ?? '') });
    expect(settled?.status).toMatchObject({ phase: 'Running' });
    const pod = await readPod(namespace, id);
    expect(pod.spec).toMatchObject({
      nodeName: gpu.nodeName,
      nodeSelector: { pool: 'gpu' },
      tolerations: expect.arrayContaining([{ key: 'browserplane.dev/browsers', operator: 'Exists', effect: 'NoSchedule' }]) as unknown,
      runtimeClassName: runtimeClass,
      imagePullSecrets: [{ name: 'regcred' }],
    });
    await deleteSession(namespace, session.metadata.name);
    await eventually(() => readSession(namespace, session.metadata.name), { timeoutMs: 60_000, intervalMs: 150, what: 'session deleted', accept: (read) => read === undefined });
  });
});
