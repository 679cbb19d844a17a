import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, LABELS, PLURALS } from '../../contract/kinds.js';
import { eventually } from '../support/eventually.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { freshDatabase, type TestDatabase } from '../support/database.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { assertOperatorBuilt, OPERATOR_LEASE_TIMINGS_UNSET, startOperatorProcess, type OperatorProcess } from './support/operator-process.js';
import { testEncryptionKey } from '../support/agent-access.js';

// The GitOps path through the real processes: a BrowserPool applied as kubectl applies it;
// the built operator (with DATABASE_URL) reconciles it into a pool row; the built API in
// Kubernetes mode fills the pool, each browser a BrowserSession the same operator runs as a
// pod on the suite's node agent (real agent, real Chromium); a client leases one through
// the SDK and drives it over CDP through the API; kubectl delete drains the pool.

let namespace: string;
let node: NodeAgent;
let database: TestDatabase;
let service: RunningService;
let operator: OperatorProcess | undefined;
let operatorDataDir: string;
let pages: TestPageServer;

const poolPath = (name: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserPool}/${name}`;

beforeAll(async () => {
  assertOperatorBuilt();
  await installCrds();
  namespace = await freshNamespace('gitops');
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses: { first: 160, last: 179 }, log: { info: () => {}, warn: () => {} } });
  database = await freshDatabase();
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello from a GitOps pool</title>' });
  const kubeconfig = writeKubeconfig();
  service = await startService({
    env: {
      DATABASE_URL: database.url,
      // The operator's key (support/operator-process.ts): both derive the pods' agent tokens from it, as the chart gives both the same.
      BROWSERPLANE_ENCRYPTION_KEY: testEncryptionKey.toString('base64'),
      BROWSERPLANE_RUNTIME: 'kubernetes',
      KUBECONFIG: kubeconfig, BROWSERPLANE_NAMESPACE: namespace, BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000' },
  });
  operatorDataDir = await mkdtemp(path.join(os.tmpdir(), 'gitops-operator-'));
  operator = startOperatorProcess({
    kubeconfig,
    namespace,
    identity: 'operator-gitops',
    databaseUrl: database.url,
    env: {
      ...OPERATOR_LEASE_TIMINGS_UNSET,
      BROWSERPLANE_DATA_DIR: operatorDataDir,
      BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test`, imagePullPolicy: 'IfNotPresent' }),
    },
    stderr: 'lines',
  });
}, 180_000);
afterAll(async () => {
  await cleanupServices();
  if (operator && operator.child.exitCode === null) {
    operator.child.kill('SIGTERM');
    await operator.exited;
  }
  await node?.stop();
  await pages?.close();
  await database?.drop();
  if (operatorDataDir) await rm(operatorDataDir, { recursive: true, force: true });
}, 120_000);

describe('a BrowserPool applied with kubectl, through the built API and operator', () => {
  it('appears in the API, fills with pod browsers a client leases over CDP, refuses API changes, and drains on kubectl delete', async () => {
    const name = 'checkout';
    const applied = await rawRequest(
      'PATCH',
      `${poolPath(name)}?fieldManager=kubectl&fieldValidation=Strict`,
      { apiVersion: API_VERSION, kind: 'BrowserPool', metadata: { name }, spec: { size: 1, headless: true, viewport: { width: 1280, height: 800 } } },
      'application/apply-patch+yaml',
    );
    expect(applied.status, JSON.stringify(applied.body)).toBeLessThan(300);

    const client = service.client();
    const pool = await eventually(
      async () => {
        const found = await client.browserPools.retrieve(name);
        return found.available_count === 1 && found;
      },
      { timeoutMs: 150_000, intervalMs: 250, what: 'the pool to fill', retryErrors: true, detail: () => `--- operator\n${operator?.logTail()}` },
    );
    expect(pool).toMatchObject({ name, acquired_count: 0 });
    const status = await eventually(
      async () => {
        const body = (await rawRequest('GET', poolPath(name))).body as { status?: Record<string, unknown> };
        // Counts are re-read on a requeue (every few seconds), so they may trail the API a moment.
        return body.status?.poolId === pool.id && body.status.availableCount === 1 && body.status;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'the resource to report the pool', retryErrors: true, detail: () => `--- operator\n${operator?.logTail()}` },
    );
    expect(status).toMatchObject({ poolId: pool.id, availableCount: 1, acquiredCount: 0 });
    // The warm browser is a BrowserSession of the pool, run as a pod by the operator.
    const sessions = (await rawRequest('GET', `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}?labelSelector=${encodeURIComponent(LABELS.poolId)}`)).body as { items: unknown[] };
    expect(sessions.items).toHaveLength(1);

    // Git owns it: the API refuses to change it and changes nothing.
    await expect(client.browserPools.update(name, { size: 3 })).rejects.toMatchObject({ status: 409 });
    expect((await client.browserPools.retrieve(name)).browser_pool_config.size).toBe(1);

    const lease = await client.browserPools.acquire(name, { acquire_timeout_seconds: 30 });
    const browser = await chromium.connectOverCDP(lease.cdp_ws_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${pages.url}/hello`);
      expect(await page.title()).toBe('hello from a GitOps pool');
    } finally {
      await browser.close();
    }
    await client.browserPools.release(name, { session_id: lease.session_id });

    // kubectl delete drains: the pool goes from the API, and its browsers with it.
    const deleted = await rawRequest('DELETE', poolPath(name), { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' });
    expect(deleted.status).toBeLessThan(300);
    await eventually(async () => (await rawRequest('GET', poolPath(name))).status === 404, { timeoutMs: 120_000, intervalMs: 250, what: 'the resource to be gone', retryErrors: true, detail: () => `--- operator\n${operator?.logTail()}` });
    await expect(client.browserPools.retrieve(name)).rejects.toMatchObject({ status: 404 });
    await eventually(
      async () => {
        const left = (await rawRequest('GET', `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`)).body as { items: unknown[] };
        return left.items.length === 0;
      },
      { timeoutMs: 120_000, intervalMs: 250, what: 'the pool browsers to be gone', retryErrors: true, detail: () => `--- operator\n${operator?.logTail()}` },
    );
  }, 420_000);
});
