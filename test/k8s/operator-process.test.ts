import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { CoordinationV1Api, CoreV1Api, V1MicroTime, type V1Pod } from '@kubernetes/client-node';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CDP_PATH } from '../../agent/src/server.js';
import { browserPodName } from '../../operator/src/k8s/browser-pod.js';
import { createLaunchSecret, createSession, deleteSession, launchSpec, newSessionId, readSession, waitUntil } from './support/browser-sessions.js';
import { ROOT, writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';

// Two built operator processes (dist/operator/src/main.js) per scenario against the real
// API server, campaigning for one Lease with short timings (lease 4 s, renew deadline 3 s,
// retry 0.5 s); the crash is a SIGKILL. Browser pods run under the suite's node agent.

const MAIN = path.join(ROOT, 'dist/operator/src/main.js');
const LEASE = 'browserplane-operator';

interface LogLine {
  msg: string;
  level: string;
  time: string;
  leader?: string;
  port?: number;
  controller?: string;
  at: number;
}

interface Operator {
  identity: string;
  child: ChildProcess;
  lines: LogLine[];
  exited: Promise<number | null>;
  waitFor(message: string | ((line: LogLine) => boolean), timeoutMs?: number): Promise<LogLine>;
  health(route: string): Promise<{ status: number; body: { status: string; role: string } }>;
}

const children: ChildProcess[] = [];
let node: NodeAgent;
let kubeconfig: string;
const core = kubeConfig().makeApiClient(CoreV1Api);
const namespaces: string[] = [];

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run make build first`);
  await installCrds();
  namespaces.push(await freshNamespace('opfail'), await freshNamespace('ophand'));
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespaces[0]}`, namespaces, addresses: { first: 120, last: 139 }, log: { info: () => {}, warn: () => {} } });
  kubeconfig = writeKubeconfig();
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await node?.stop();
});

function startOperator(namespace: string, identity: string): Operator {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      KUBECONFIG: kubeconfig,
      POD_NAME: identity,
      POD_NAMESPACE: namespace,
      BROWSERPLANE_OPERATOR_LEASE: LEASE,
      BROWSERPLANE_LEASE_DURATION_SECONDS: '4',
      BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: '3',
      BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS: '0.5',
      BROWSERPLANE_OPERATOR_HEALTH_HOST: '127.0.0.1',
      BROWSERPLANE_OPERATOR_HEALTH_PORT: '0',
      BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test`, imagePullPolicy: 'IfNotPresent', nodeSelector: {}, tolerations: [] }),
      BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000',
      BROWSERPLANE_BROWSER_TERMINATE_GRACE_MS: '5000',
      BROWSERPLANE_OPERATOR_RESYNC_SECONDS: '5',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines: LogLine[] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (text) => {
    try {
      lines.push({ ...(JSON.parse(text) as LogLine), at: Date.now() });
    } catch {
      lines.push({ msg: text, level: 'raw', time: '', at: Date.now() });
    }
    waiters.splice(0).forEach((wake) => wake());
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const operator: Operator = {
    identity,
    child,
    lines,
    exited,
    async waitFor(message, timeoutMs = 30_000) {
      const matches = typeof message === 'string' ? (line: LogLine) => line.msg === message : message;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find(matches);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`${identity}: no ${String(message)} within ${timeoutMs} ms; saw ${lines.map((l) => l.msg).join(' | ')}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
    async health(route) {
      const { port } = await operator.waitFor('operator started; campaigning');
      const response = await fetch(`http://127.0.0.1:${port}${route}`);
      return { status: response.status, body: (await response.json()) as { status: string; role: string } };
    },
  };
  return operator;
}

const leading = (operator: Operator) => operator.waitFor('leading: starting controllers');
const synced = (operator: Operator) => operator.waitFor((line) => line.msg === 'caches synced; reconciling' && line.controller === 'browser-sessions');
const podsOf = async (namespace: string, id: string): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace, labelSelector: 'browserplane.dev/browser-id' })).items.filter((p) => p.metadata?.annotations?.['browserplane.dev/browser-id'] === id);

async function driveOverCdp(agentUrl: string): Promise<void> {
  const browser = await chromium.connectOverCDP(`${agentUrl.replace(/^http/, 'ws')}${CDP_PATH}`);
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
    const [pod] = await waitUntil(() => podsOf(namespace, id), (pods) => pods.length > 0, 'pod created by the leader', 60_000);
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    const atKill = await readSession(namespace, created.metadata.name);
    expect(atKill?.status?.phase, 'the kill must land before the reconcile finished').not.toBe('Running');
    expect(await a.exited).toBeNull();

    const takeover = await leading(b);
    const failoverMs = takeover.at - killedAt;
    console.log(`operator failover after SIGKILL: standby leading after ${failoverMs} ms (lease 4 s)`);
    const done = await waitUntil(() => readSession(namespace, created.metadata.name), (r) => r?.status?.phase === 'Running', 'Running after failover', 90_000);
    console.log(`session Running ${Date.now() - killedAt} ms after the leader was killed`);
    const pods = await podsOf(namespace, id);
    expect(pods).toHaveLength(1);
    expect(pods[0]!.metadata!.uid).toBe(pod!.metadata!.uid);
    expect(done!.status!.agentUrl).toMatch(/^http:\/\/127\.0\.0\.(1[23]\d):9222$/);
    await driveOverCdp(done!.status!.agentUrl!);
    expect(await b.health('/readyz')).toEqual({ status: 200, body: { status: 'ready', role: 'leader' } });

    await deleteSession(namespace, created.metadata.name);
    await waitUntil(() => readSession(namespace, created.metadata.name), (r) => r === undefined, 'session deleted', 60_000);
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
    const running = await waitUntil(() => readSession(namespace, created.metadata.name), (r) => r?.status?.phase === 'Running', 'Running', 90_000);
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
    await waitUntil(() => readSession(namespace, created.metadata.name), (r) => r === undefined, 'session deleted by the new leader', 60_000);
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
