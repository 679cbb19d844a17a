import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { CoordinationV1Api, CoreV1Api, Watch, type V1Pod } from '@kubernetes/client-node';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_PORT, browserPod, browserPodName, browserSecret } from '../../operator/src/k8s/browser-pod.js';
import { eventually } from '../support/eventually.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { launchSpec } from './support/browser-sessions.js';
import { freshNamespace, kubeConfig } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { agentAuth, testAgentTokens } from '../support/agent-access.js';

// Real Chromium through the built agent (make build), run by the node agent for pods
// created from browser-pod.ts against the real API server.

const core = kubeConfig().makeApiClient(CoreV1Api);
const IMAGE = `${BROWSER_IMAGE_REPOSITORY}:test`;
let namespace: string;
let node: NodeAgent;
let pages: TestPageServer;

beforeAll(async () => {
  namespace = await freshNamespace('node');
  // Addresses of their own: other test files may run node agents in parallel.
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses: { first: 20, last: 39 }, log: { info: () => {}, warn: (fields, message) => console.warn(message, fields) } });
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello from the pod</title>' });
});
afterAll(async () => {
  await node?.stop();
  await pages?.close();
});

async function createBrowserPod(browserId: string, inNamespace = namespace): Promise<string> {
  const options = { namespace: inNamespace, image: IMAGE };
  await core.createNamespacedSecret({ namespace: inNamespace, body: browserSecret(launchSpec(browserId), options, testAgentTokens(browserId)) });
  const pod = await core.createNamespacedPod({ namespace: inNamespace, body: browserPod(launchSpec(browserId), options) });
  return pod.metadata!.name!;
}

async function readPod(name: string, inNamespace = namespace): Promise<V1Pod | undefined> {
  return core.readNamespacedPod({ name, namespace: inNamespace }).catch((error: { code?: number }) => {
    if (error.code === 404) return undefined;
    throw error;
  });
}

async function waitForPod(name: string, what: string, check: (pod: V1Pod | undefined) => boolean, timeoutMs = 45_000, inNamespace = namespace): Promise<V1Pod | undefined> {
  return eventually(() => readPod(name, inNamespace), { timeoutMs, intervalMs: 100, what: `pod ${name} ${what}`, accept: check });
}

const condition = (pod: V1Pod | undefined, type: string) => pod?.status?.conditions?.find((c) => c.type === type);
const isReady = (pod: V1Pod | undefined) => condition(pod, 'Ready')?.status === 'True';

/** Pids of live processes whose command line mentions `dir` (Chromium, its helpers). */
async function processesMentioning(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (cmdline.includes(`${dir}/`) && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') pids.push(Number(entry));
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Every version of a pod the API server sends on a watch, the one sent with DELETED last. */
async function recordPod(name: string): Promise<{ versions: { type: string; pod: V1Pod }[]; stop(): void }> {
  const versions: { type: string; pod: V1Pod }[] = [];
  const request = await new Watch(kubeConfig()).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { fieldSelector: `metadata.name=${name}` },
    (type: string, pod: V1Pod) => versions.push({ type, pod }),
    () => undefined,
  );
  return { versions, stop: () => request.abort() };
}

describe('the test node agent', () => {
  it('registers a Ready node with capacity and keeps a lease in kube-node-lease', async () => {
    const registered = await core.readNode({ name: node.nodeName });
    expect(registered.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'KubeletReady' });
    expect(Number(registered.status?.capacity?.cpu)).toBeGreaterThan(0);
    expect(registered.status?.addresses).toContainEqual({ type: 'InternalIP', address: '127.0.0.1' });
    const lease = await kubeConfig().makeApiClient(CoordinationV1Api).readNamespacedLease({ name: node.nodeName, namespace: 'kube-node-lease' });
    expect(lease.spec?.holderIdentity).toBe(node.nodeName);
    expect(lease.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Node', name: node.nodeName, uid: registered.metadata?.uid });
  });

  it('binds a browser pod, runs its agent on 127.0.0.N, reports Running and Ready; Playwright drives it; delete closes Chromium and the pod', async () => {
    const name = browserPodName('nodeagentone');
    const watch = await recordPod(name);
    const created = Date.now();
    await createBrowserPod('nodeagentone');
    const ready = (await waitForPod(name, 'Ready', isReady))!;
    const readyMs = Date.now() - created;

    // What a kubelet guarantees about the statuses it reports on the way to Ready, and no
    // more: its status manager writes the latest status, not every one in between, so the
    // Pending (ContainerCreating) and Running-but-not-Ready versions may be skipped (here a
    // first status write that fails and is retried skips the Pending one). Whatever is
    // reported keeps one address, never moves back from Running to Pending, and is Ready
    // only when Running.
    const reported = watch.versions.filter((v) => v.pod.status?.podIP).map((v) => v.pod.status!);
    expect(reported.map((status) => status.podIP).filter((ip) => ip !== ready.status?.podIP)).toEqual([]);
    const phases = reported.map((status) => status.phase);
    const sinceRunning = phases.includes('Running') ? phases.slice(phases.indexOf('Running')) : [];
    expect(sinceRunning.filter((phase) => phase !== 'Running'), phases.join(' → ')).toEqual([]);
    for (const status of reported) {
      const readyNow = status.conditions?.find((c) => c.type === 'Ready');
      if (status.phase === 'Pending') {
        expect(readyNow?.status).not.toBe('True');
        expect(status.containerStatuses?.[0]?.state?.waiting?.reason).toBe('ContainerCreating');
      } else if (readyNow?.status !== 'True') {
        expect(readyNow).toMatchObject({ status: 'False', reason: 'ContainersNotReady' });
      }
    }

    expect(ready.spec?.nodeName).toBe(node.nodeName);
    expect(ready.status?.podIP).toMatch(/^127\.0\.0\.([2-9]|[1-9]\d+)$/);
    expect(ready.status?.podIPs).toEqual([{ ip: ready.status?.podIP }]);
    expect(ready.status?.phase).toBe('Running');
    expect(ready.status?.startTime).toBeInstanceOf(Date);
    for (const type of ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready']) {
      expect(condition(ready, type), type).toMatchObject({ status: 'True' });
      expect(condition(ready, type)?.lastTransitionTime, type).toBeInstanceOf(Date);
    }
    const agentStatus = ready.status?.containerStatuses?.[0];
    expect(agentStatus).toMatchObject({ name: 'agent', ready: true, started: true, restartCount: 0 });
    expect(agentStatus?.state?.running?.startedAt).toBeInstanceOf(Date);

    const podUrl = `http://${ready.status!.podIP!}:${AGENT_PORT}`;
    const browser = await chromium.connectOverCDP(podUrl, { timeout: 20_000, headers: agentAuth('nodeagentone') });
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(`${pages.url}/hello`);
    expect(await page.title()).toBe('hello from the pod');
    await browser.close();

    const sandbox = node.sandboxDir(namespace, name)!;
    const [agent] = node.containers(namespace, name);
    expect(await processesMentioning(sandbox), 'Chromium runs in the sandbox').not.toEqual([]);

    // The last status the kubelet role wrote before finalising tells how the agent ended.
    const deleted = Date.now();
    await core.deleteNamespacedPod({ name, namespace });
    await waitForPod(name, 'gone', (pod) => pod === undefined);
    const goneMs = Date.now() - deleted;
    watch.stop();
    console.log(`node agent figures: pod create -> Ready ${readyMs} ms, delete -> gone ${goneMs} ms`);

    expect(alive(agent!.pid), 'agent process').toBe(false);
    expect(await processesMentioning(sandbox), 'processes of the pod').toEqual([]);
    expect(existsSync(sandbox), 'sandbox dir').toBe(false);
    // Exit code 0, not 137: the agent closed Chromium and exited by itself within the grace period.
    const final = watch.versions.at(-1);
    expect(final?.type).toBe('DELETED');
    expect(final?.pod.status?.phase).toBe('Succeeded');
    expect(final?.pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
  });

  it('readiness follows the probe; a SIGKILLed agent makes the pod Failed with exit code 137 and reason Error, and takes its Chromium with it', async () => {
    const name = await createBrowserPod('nodeagentkill');
    await waitForPod(name, 'Ready', isReady);
    const sandbox = node.sandboxDir(namespace, name)!;
    const [agent] = node.containers(namespace, name);
    expect(await processesMentioning(sandbox)).not.toEqual([]);

    // A stopped agent fails its readiness probe (2 s period, 3 failures): not Ready, still Running.
    process.kill(agent!.pid, 'SIGSTOP');
    const unready = await waitForPod(name, 'unready', (pod) => condition(pod, 'Ready')?.status === 'False', 20_000);
    expect(unready?.status?.phase).toBe('Running');
    expect(condition(unready, 'Ready')).toMatchObject({ reason: 'ContainersNotReady', message: 'containers with unready status: [agent]' });
    process.kill(agent!.pid, 'SIGCONT');
    await waitForPod(name, 'Ready again', isReady, 20_000);

    process.kill(agent!.pid, 'SIGKILL');
    const failed = await waitForPod(name, 'Failed', (pod) => pod?.status?.phase === 'Failed', 20_000);
    expect(failed?.status?.containerStatuses?.[0]).toMatchObject({ ready: false, started: false, state: { terminated: { exitCode: 137, reason: 'Error' } } });
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'PodCompleted' });
    // As when a container's init dies: nothing of the pod outlives it.
    expect(await processesMentioning(sandbox), 'orphaned Chromium').toEqual([]);

    // A terminal pod is deleted at once by the API server; the node agent cleans up after.
    await core.deleteNamespacedPod({ name, namespace });
    await waitForPod(name, 'gone', (pod) => pod === undefined, 10_000);
    await expect.poll(() => existsSync(sandbox), { timeout: 5_000, interval: 50, message: 'sandbox dir' }).toBe(false);
  });

  it('gives two pods distinct addresses, waits for a missing Secret, and kills a force-deleted pod at once', async () => {
    const first = await createBrowserPod('nodeagenta');
    // The second pod comes before its Secret, as a kubelet meets it when the order races.
    const spec = launchSpec('nodeagentb');
    const options = { namespace, image: IMAGE };
    const second = (await core.createNamespacedPod({ namespace, body: browserPod(spec, options) })).metadata!.name!;
    const waiting = await waitForPod(second, 'waiting on its Secret', (pod) => pod?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError');
    expect(waiting?.status?.phase).toBe('Pending');
    expect(waiting?.status?.containerStatuses?.[0]?.state?.waiting?.message).toContain(`secret "${second}" not found`);
    await core.createNamespacedSecret({ namespace, body: browserSecret(spec, options, testAgentTokens(spec.browserId)) });

    const [a, b] = await Promise.all([waitForPod(first, 'Ready', isReady), waitForPod(second, 'Ready', isReady)]);
    expect(a?.status?.podIP).not.toBe(b?.status?.podIP);
    // Same port, different addresses: each agent answers for its own browser.
    for (const [pod, browserId] of [
      [a, 'nodeagenta'],
      [b, 'nodeagentb'],
    ] as const) {
      const health = (await (await fetch(`http://${pod!.status!.podIP!}:${AGENT_PORT}/health`, { headers: agentAuth(browserId) })).json()) as { browser_id: string; status: string };
      expect(health).toMatchObject({ browser_id: browserId, status: 'ready' });
    }

    const sandbox = node.sandboxDir(namespace, first)!;
    const [agent] = node.containers(namespace, first);
    const forced = Date.now();
    await core.deleteNamespacedPod({ name: first, namespace, gracePeriodSeconds: 0 });
    // Past the deadline, the assertions below say what is left.
    await eventually(async () => !alive(agent!.pid) && (await processesMentioning(sandbox)).length === 0, { timeoutMs: 10_000, intervalMs: 50 }).catch(() => undefined);
    const killedMs = Date.now() - forced;
    expect(alive(agent!.pid), 'agent of the force-deleted pod').toBe(false);
    expect(await processesMentioning(sandbox)).toEqual([]);
    expect(killedMs).toBeLessThan(5_000);
    expect(((await (await fetch(`http://${b!.status!.podIP!}:${AGENT_PORT}/health`)).json()) as { status: string }).status).toBe('ready');
    await core.deleteNamespacedPod({ name: second, namespace });
    await waitForPod(second, 'gone', (pod) => pod === undefined, 20_000);
  });

  it('renews its node lease; stop() kills every process it started, removes its dirs and deregisters its node', async () => {
    const otherNamespace = await freshNamespace('node');
    const other = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${otherNamespace}`, namespaces: [otherNamespace], addresses: { first: 40, last: 49 }, leaseRenewMs: 500 });
    const leases = kubeConfig().makeApiClient(CoordinationV1Api);
    const renewedAt = async () => new Date((await leases.readNamespacedLease({ name: other.nodeName, namespace: 'kube-node-lease' })).spec!.renewTime!).getTime();
    const name = await createBrowserPod('nodeagentstop', otherNamespace);
    const ready = await waitForPod(name, 'Ready', isReady, 45_000, otherNamespace);
    expect(ready?.spec?.nodeName).toBe(other.nodeName);
    expect(ready?.status?.podIP).toMatch(/^127\.0\.0\.4\d$/);
    const sandbox = other.sandboxDir(otherNamespace, name)!;
    const [agent] = other.containers(otherNamespace, name);
    const renewed = await renewedAt();
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(await renewedAt(), 'lease renewed').toBeGreaterThan(renewed);

    await other.stop();
    expect(alive(agent!.pid), 'agent').toBe(false);
    expect(await processesMentioning(sandbox), 'Chromium').toEqual([]);
    expect(existsSync(sandbox)).toBe(false);
    await expect(core.readNode({ name: other.nodeName })).rejects.toMatchObject({ code: 404 });
  });
});
