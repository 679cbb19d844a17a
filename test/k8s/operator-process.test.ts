import type { ChildProcess } from 'node:child_process';
import { CoordinationV1Api, CoreV1Api, V1MicroTime, type V1Pod } from '@kubernetes/client-node';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CDP_PATH } from '../../agent/src/server.js';
import { browserPodName } from '../../operator/src/k8s/browser-pod.js';
import { eventually } from '../support/eventually.js';
import { createLaunchSecret, createSession, deleteSession, launchSpec, newSessionId, readSession } from './support/browser-sessions.js';
import { writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';
import { startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { assertOperatorBuilt, startOperatorProcess, type OperatorProcess } from './support/operator-process.js';
import { agentAuth } from '../support/agent-access.js';

// Two built operator processes (dist/operator/src/main.js) per scenario against the real
// API server, campaigning for one Lease with short timings (lease 4 s, renew deadline 3 s,
// retry 0.5 s); the crash is a SIGKILL. Browser pods run under the suite's node agent.

const LEASE = 'browserplane-operator';

const children: ChildProcess[] = [];
let node: NodeAgent;
let kubeconfig: string;
const core = kubeConfig().makeApiClient(CoreV1Api);
const namespaces: string[] = [];

beforeAll(async () => {
  assertOperatorBuilt();
  await installCrds();
  namespaces.push(await freshNamespace('opfail'), await freshNamespace('ophand'));
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespaces[0]}`, namespaces, addresses: { first: 120, last: 139 }, log: { info: () => {}, warn: () => {} } });
  kubeconfig = writeKubeconfig();
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await node?.stop();
});

function startOperator(namespace: string, identity: string): OperatorProcess {
  const operator = startOperatorProcess({ kubeconfig, namespace, identity, env: { BROWSERPLANE_OPERATOR_LEASE: LEASE } });
  children.push(operator.child);
  return operator;
}

const leading = (operator: OperatorProcess) => operator.waitFor('leading: starting controllers');
const synced = (operator: OperatorProcess) => operator.waitFor((line) => line.msg === 'caches synced; reconciling' && line.controller === 'browser-sessions');
const podsOf = async (namespace: string, id: string): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace, labelSelector: 'browserplane.dev/browser-id' })).items.filter((p) => p.metadata?.annotations?.['browserplane.dev/browser-id'] === id);

async function driveOverCdp(agentUrl: string, browserId: string): Promise<void> {
  const browser = await chromium.connectOverCDP(`${agentUrl.replace(/^http/, 'ws')}${CDP_PATH}`, { headers: agentAuth(browserId) });
  const page = await browser.contexts()[0]!.newPage();
  await page.setContent('<title>driven after failover</title>');
  expect(await page.title()).toBe('driven after failover');
  await browser.close();
}

describe('the operator process', () => {
  it('one replica leads; SIGKILLed halfway through a reconcile, the standby takes over and finishes it with the same pod', async () => {
    const namespace = namespaces[0]!;
    const a = startOperator(namespace, 'operator-a');
    await leading(a);
    await synced(a);
    const b = startOperator(namespace, 'operator-b');
    await b.waitFor((line) => line.msg === 'leader observed' && line.leader === 'operator-a');

    expect(await a.health('/healthz')).toEqual({ status: 200, body: { status: 'ok', role: 'leader' } });
    expect(await a.health('/readyz')).toEqual({ status: 200, body: { status: 'ready', role: 'leader' } });
    expect(await b.health('/healthz')).toEqual({ status: 200, body: { status: 'ok', role: 'standby' } });
    expect(await b.health('/readyz')).toEqual({ status: 200, body: { status: 'ready', role: 'standby' } });

    const id = newSessionId();
    const created = await createSession(namespace, id);
    await createLaunchSecret(namespace, created, launchSpec(id));
    // The leader created the pod; Chromium is still starting: kill the leader now.
    const [pod] = await eventually(() => podsOf(namespace, id), { timeoutMs: 60_000, intervalMs: 150, what: 'pod created by the leader', accept: (pods) => pods.length > 0 });
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    const atKill = await readSession(namespace, created.metadata.name);
    expect(atKill?.status?.phase, 'the kill must land before the reconcile finished').not.toBe('Running');
    expect(await a.exited).toBeNull();

    const takeover = await leading(b);
    const failoverMs = takeover.at - killedAt;
    console.log(`operator failover after SIGKILL: standby leading after ${failoverMs} ms (lease 4 s)`);
    const done = await eventually(() => readSession(namespace, created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'Running after failover', accept: (r) => r?.status?.phase === 'Running' });
    console.log(`session Running ${Date.now() - killedAt} ms after the leader was killed`);
    const pods = await podsOf(namespace, id);
    expect(pods).toHaveLength(1);
    expect(pods[0]!.metadata!.uid).toBe(pod!.metadata!.uid);
    expect(done!.status!.agentUrl).toMatch(/^http:\/\/127\.0\.0\.(1[23]\d):9222$/);
    await driveOverCdp(done!.status!.agentUrl!, id);
    expect(await b.health('/readyz')).toEqual({ status: 200, body: { status: 'ready', role: 'leader' } });

    await deleteSession(namespace, created.metadata.name);
    await eventually(() => readSession(namespace, created.metadata.name), { timeoutMs: 60_000, intervalMs: 150, what: 'session deleted', accept: (r) => r === undefined });
    expect(await podsOf(namespace, id)).toEqual([]);
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  });

  it('SIGTERM hands the Lease over at once and exits 0; a leader whose Lease is taken exits non-zero', async () => {
    const namespace = namespaces[1]!;
    const c = startOperator(namespace, 'operator-c');
    await leading(c);
    const d = startOperator(namespace, 'operator-d');
    await d.waitFor((line) => line.msg === 'leader observed' && line.leader === 'operator-c');
    const id = newSessionId();
    const created = await createSession(namespace, id);
    await createLaunchSecret(namespace, created, launchSpec(id));
    const running = await eventually(() => readSession(namespace, created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'Running', accept: (r) => r?.status?.phase === 'Running' });
    const [pod] = await podsOf(namespace, id);

    c.child.kill('SIGTERM');
    const termAt = Date.now();
    expect(await c.exited).toBe(0);
    const takeover = await leading(d);
    console.log(`operator hand-over after SIGTERM: standby leading after ${takeover.at - termAt} ms`);
    expect(takeover.at - termAt).toBeLessThan(4_000);
    await synced(d);
    // The new leader adopts the running browser: same pod, status untouched.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const after = await readSession(namespace, created.metadata.name);
    expect(after!.metadata.resourceVersion).toBe(running!.metadata.resourceVersion);
    expect((await podsOf(namespace, id)).map((p) => p.metadata!.uid)).toEqual([pod!.metadata!.uid]);

    await deleteSession(namespace, created.metadata.name);
    await eventually(() => readSession(namespace, created.metadata.name), { timeoutMs: 60_000, intervalMs: 150, what: 'session deleted by the new leader', accept: (r) => r === undefined });
    expect(await podsOf(namespace, id)).toEqual([]);
    expect(node.containers(namespace, browserPodName(id))).toEqual([]);

    // Someone else's record in the Lease: the leader's next renewal finds it lost.
    const leases = kubeConfig().makeApiClient(CoordinationV1Api);
    const lease = await leases.readNamespacedLease({ name: LEASE, namespace });
    const stamp = new V1MicroTime(new Date().toISOString());
    await leases.replaceNamespacedLease({ name: LEASE, namespace, body: { ...lease, spec: { ...lease.spec, holderIdentity: 'intruder', leaseDurationSeconds: 60, acquireTime: stamp, renewTime: stamp } } });
    expect(await d.exited).toBe(1);
    await d.waitFor('leadership lost: exiting so that a fresh process campaigns again');
  });
});
