import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserPodName } from '../../operator/src/k8s/browser-pod.js';
import { ANNOTATIONS, API_VERSION, LABELS, PLURALS, resourceNameOf } from '../../contract/kinds.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { startBrowserOperator } from './support/browser-operator.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { testEncryptionKey } from '../support/agent-access.js';

// The whole path of the API in Kubernetes mode: the built service (its own embedded
// Postgres) with BROWSERPLANE_RUNTIME=kubernetes writes BrowserSessions; the operator's
// BrowserSession reconciler (in-process) turns them into pods; the suite's node agent
// runs each pod's agent with a real Chromium. A client drives it through the SDK and CDP.

let namespace: string;
let operator: Awaited<ReturnType<typeof startBrowserOperator>> | undefined;
let pages: TestPageServer;
let kubeconfigDir: string;
let service: RunningService;
const core = kubeConfig().makeApiClient(CoreV1Api);

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('apimode');
  operator = await startBrowserOperator(namespace, { first: 140, last: 159 });
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello through the API</title>' });
  kubeconfigDir = await mkdtemp(path.join(os.tmpdir(), 'apimode-kubeconfig-'));
  const kubeconfigFile = path.join(kubeconfigDir, 'config');
  await writeFile(kubeconfigFile, kubeConfig().exportConfig(), { mode: 0o600 });
  service = await startService({
    env: { BROWSERPLANE_RUNTIME: 'kubernetes', BROWSERPLANE_ENCRYPTION_KEY: testEncryptionKey.toString('base64'), KUBECONFIG: kubeconfigFile, BROWSERPLANE_NAMESPACE: namespace, BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000' },
  });
}, 180_000);
afterAll(async () => {
  await cleanupServices();
  await operator?.stop();
  await pages?.close();
  if (kubeconfigDir) await rm(kubeconfigDir, { recursive: true, force: true });
}, 120_000);

const resourcePath = (id: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}/${resourceNameOf(id)}`;
const podExists = (id: string) => core.readNamespacedPod({ name: browserPodName(id), namespace }).then(
  () => true,
  () => false,
);

describe('the API in Kubernetes mode', () => {
  it('runs a browser created through the SDK as a pod, drives it over CDP through the API, and deletes the pod with the session', async () => {
    const client = service.client();
    const session = await client.browsers.create({ headless: true });
    const resource = await rawRequest('GET', resourcePath(session.session_id));
    expect(resource.status).toBe(200);
    const metadata = resource.body.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
    expect(metadata.labels[LABELS.sessionId]).toBe(session.session_id);
    expect(metadata.annotations[ANNOTATIONS.createdBy]).toBe('api');
    expect(resource.body.status).toMatchObject({ phase: 'Running', agentUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.(14\d|15\d):9222$/) });
    expect(await podExists(session.session_id)).toBe(true);

    // CDP goes to the API, which relays it to the pod's agent.
    expect(new URL(session.cdp_ws_url).port).toBe(new URL(service.url).port);
    const browser = await chromium.connectOverCDP(session.cdp_ws_url);
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(`${pages.url}/hello`);
    expect(await page.title()).toBe('hello through the API');
    await browser.close();

    await client.browsers.deleteByID(session.session_id);
    expect((await rawRequest('GET', resourcePath(session.session_id))).status).toBe(404);
    await expect.poll(() => podExists(session.session_id), { timeout: 30_000 }).toBe(false);
  }, 180_000);

  it('leaves browsers running when the API stops: they are the cluster’s', async () => {
    const session = await service.client().browsers.create({ headless: true });
    expect(await service.stop('SIGTERM')).toMatchObject({ code: 0 });
    expect((await rawRequest('GET', resourcePath(session.session_id))).status).toBe(200);
    expect(await podExists(session.session_id)).toBe(true);
    expect((await rawRequest('DELETE', resourcePath(session.session_id))).status).toBe(200);
    await expect.poll(() => podExists(session.session_id), { timeout: 30_000 }).toBe(false);
  }, 180_000);
});
