import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserPodName } from '../../operator/src/k8s/browser-pod.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { BrowserResetError, BrowserSettingsError } from '../../contract/browser-runtime.js';
import { createKubernetesRuntime, type KubernetesRuntime } from '../../operator/src/runtime/kubernetes-runtime.js';
import { eventually } from '../support/eventually.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { launchSpec } from './support/browser-sessions.js';
import { freshNamespace, kubeConfig } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { agentAuth, testAgentTokens } from '../support/agent-access.js';

// The Kubernetes runtime against the real API server, its pods run by the suite's node
// agent (real agent, real Chromium; no container isolation: see node-agent.ts).

let namespace: string;
let node: NodeAgent;
let runtime: KubernetesRuntime;
let pages: TestPageServer;
const core = kubeConfig().makeApiClient(CoreV1Api);

beforeAll(async () => {
  namespace = await freshNamespace('runtime');
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses: { first: 60, last: 79 }, log: { info: () => {}, warn: () => {} } });
  runtime = createKubernetesRuntime({
    config: kubeConfig(),
    namespace,
    pod: { image: `${BROWSER_IMAGE_REPOSITORY}:test` },
    log: pino({ level: 'silent' }),
    agentTokens: testAgentTokens,
    launchTimeoutMs: 60_000,
  });
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello from a pod</title>' });
});
afterAll(async () => {
  await runtime?.close();
  await node?.stop();
  await pages?.close();
});

let counter = 0;
const spec = (overrides: Partial<BrowserLaunchSpec> = {}): BrowserLaunchSpec =>
  launchSpec(`bs_rt${++counter}${Date.now().toString(36)}`, { labels: { 'browserplane.dev/pool': 'pool_x' }, ...overrides });

const signal = () => AbortSignal.timeout(90_000);

describe('KubernetesRuntime with a node agent', () => {
  it('launches a browser pod that CDP clients drive, observes and lists it, and terminates it without a trace', async () => {
    const wanted = spec();
    const launched = await runtime.launch(wanted, { signal: signal() });
    expect(launched).toMatchObject({ browserId: wanted.browserId, phase: 'Ready' });
    expect(launched.agentUrl).toMatch(/^http:\/\/127\.0\.0\.(6\d|7\d):9222$/);
    expect(launched.labels['browserplane.dev/pool']).toBe('pool_x');

    const browser = await chromium.connectOverCDP(launched.agentUrl!, { headers: agentAuth(wanted.browserId) });
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(`${pages.url}/hello`);
    expect(await page.title()).toBe('hello from a pod');
    await browser.close();

    expect(await runtime.observe(wanted.browserId)).toMatchObject({ phase: 'Ready', agentUrl: launched.agentUrl });
    expect((await runtime.list()).map((b) => b.browserId)).toContain(wanted.browserId);

    // The launch spec stays out of the pod: it is in a Secret of the same name.
    const pod = await core.readNamespacedPod({ name: browserPodName(wanted.browserId), namespace });
    expect(JSON.stringify(pod.spec)).not.toContain('orgId');
    const secret = await core.readNamespacedSecret({ name: browserPodName(wanted.browserId), namespace });
    expect(Buffer.from(secret.data!.spec!, 'base64').toString()).toContain(wanted.browserId);

    await runtime.terminate(wanted.browserId, { graceMs: 5_000 });
    expect(await runtime.observe(wanted.browserId)).toBeUndefined();
    await expect(core.readNamespacedSecret({ name: browserPodName(wanted.browserId), namespace })).rejects.toMatchObject({ code: 404 });
    expect(node.containers(namespace, browserPodName(wanted.browserId))).toEqual([]);
  });

  it('shares one pod between concurrent launches of an id, and a relaunch of a live browser returns it', async () => {
    const wanted = spec();
    const [first, second] = await Promise.all([runtime.launch(wanted, { signal: signal() }), runtime.launch(wanted, { signal: signal() })]);
    expect(first.agentUrl).toBe(second.agentUrl);
    const again = await runtime.launch(wanted, { signal: signal() });
    expect(again).toMatchObject({ phase: 'Ready', agentUrl: first.agentUrl });
    const pods = await core.listNamespacedPod({ namespace, labelSelector: 'browserplane.dev/browser-id' });
    expect(pods.items.filter((p) => p.metadata?.annotations?.['browserplane.dev/browser-id'] === wanted.browserId)).toHaveLength(1);
    await runtime.terminate(wanted.browserId, { graceMs: 5_000 });
  });

  it('has a pod agent that serves only its token: a page in the pod reaching the agent gets nothing, a probe only the phase', async () => {
    const wanted = spec();
    const launched = await runtime.launch(wanted, { signal: signal() });
    const url = launched.agentUrl!;
    for (const headers of [{}, agentAuth('another-browser')]) {
      const refused = await fetch(`${url}/fs/read_file?path=/x`, { headers });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ code: 'unauthorized' });
    }
    expect(await (await fetch(`${url}/health`)).json()).toEqual({ status: 'ready' });
    const secret = await core.readNamespacedSecret({ name: browserPodName(wanted.browserId), namespace });
    expect(Buffer.from(secret.data!['agent-token']!, 'base64').toString()).toBe(testAgentTokens(wanted.browserId));

    const browser = await chromium.connectOverCDP(url, { headers: agentAuth(wanted.browserId) });
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${pages.url}/hello`);
      const fromPage = await page.evaluate(
        (agent) =>
          new Promise<string>((resolve) => {
            const ws = new (globalThis as unknown as { WebSocket: new (url: string) => { onopen: () => void; onerror: () => void; close(): void } }).WebSocket(`${agent.replace(/^http/, 'ws')}/cdp`);
            ws.onopen = () => (ws.close(), resolve('opened'));
            ws.onerror = () => resolve('refused');
          }),
        url,
      );
      console.log(`a page in the pod opening its agent's /cdp: ${fromPage}`);
      expect(fromPage).toBe('refused');
    } finally {
      await browser.close();
    }
    await runtime.terminate(wanted.browserId, { graceMs: 5_000 });
  });

  it('applies settings to and resets a running browser through its agent, and refuses both for one that is not running', async () => {
    const wanted = spec();
    const launched = await runtime.launch(wanted, { signal: signal() });
    await runtime.applySettings(wanted.browserId, { viewport: { width: 800, height: 600 } });
    const browser = await chromium.connectOverCDP(launched.agentUrl!, { headers: agentAuth(wanted.browserId) });
    const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
    const screen = await page.evaluate(() => {
      const { width, height } = (globalThis as unknown as { screen: { width: number; height: number } }).screen;
      return [width, height];
    });
    expect(screen).toEqual([800, 600]);
    await page.goto(`${pages.url}/hello`);
    const report = await runtime.reset(wanted.browserId, {});
    expect(report.closedConnections).toBeGreaterThanOrEqual(1);
    await browser.close().catch(() => undefined);
    await runtime.terminate(wanted.browserId, { graceMs: 5_000 });
    await expect(runtime.applySettings(wanted.browserId, { viewport: { width: 640, height: 480 } })).rejects.toBeInstanceOf(BrowserSettingsError);
    await expect(runtime.reset(wanted.browserId, {})).rejects.toBeInstanceOf(BrowserResetError);
  });

  it('reports a browser whose agent died as Failed with the kubelet’s reason, and a relaunch replaces the pod', async () => {
    const wanted = spec();
    const launched = await runtime.launch(wanted, { signal: signal() });
    const [agent] = node.containers(namespace, browserPodName(wanted.browserId));
    process.kill(agent!.pid, 'SIGKILL');
    const observed = await eventually(() => runtime.observe(wanted.browserId), {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: 'the browser to be Failed',
      accept: (o) => o?.phase === 'Failed',
    });
    expect(observed).toMatchObject({ phase: 'Failed' });
    expect(observed!.reason).toContain('exit code 137');

    const relaunched = await runtime.launch(wanted, { signal: signal() });
    expect(relaunched.phase).toBe('Ready');
    expect((await fetch(`${relaunched.agentUrl!}/health`, { headers: agentAuth(wanted.browserId) }).then((r) => r.json())) as { browser_id: string }).toMatchObject({ browser_id: wanted.browserId });
    expect(launched.browserId).toBe(relaunched.browserId);
    await runtime.terminate(wanted.browserId, { graceMs: 5_000 });
  });

  it('fails a launch whose pod never becomes ready, and removes what it created', async () => {
    const slow = createKubernetesRuntime({
      config: kubeConfig(),
      namespace,
      // No node agent runs this image: the pod is bound but never starts.
      pod: { image: 'registry.invalid/not-a-browser:1' },
      log: pino({ level: 'silent' }),
      agentTokens: testAgentTokens,
      launchTimeoutMs: 3_000,
    });
    try {
      const wanted = spec();
      const result = await slow.launch(wanted, { signal: signal() });
      expect(result.phase).toBe('Failed');
      expect(result.reason).toMatch(/not ready within 3000 ms/);
      await expect(core.readNamespacedSecret({ name: browserPodName(wanted.browserId), namespace })).rejects.toMatchObject({ code: 404 });
    } finally {
      await slow.close();
    }
  });
});
