/**
 * Helm end to end on a real node. Everything is real: the images `make images` built from
 * docker/ (loaded into containerd), the chart installed with the helm binary, the kubelet
 * running the API, operator and browser pods with the chart's securityContext, kube-proxy
 * routing the API Service, kubectl applying a BrowserPool, Playwright driving a pod's
 * Chromium over the API's cdp_ws_url. Postgres is external to the cluster (the chart's
 * database.url): an embedded Postgres listening on the node IP, inside the tier's network
 * namespace, because no Postgres image can be pulled here.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import Kernel, { toFile } from '@onkernel/sdk';
import yazl from 'yazl';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BROWSER_ID_LABEL, labelValue } from '../../operator/src/k8s/browser-pod.js';
import { GROUP, VERSION } from '../../operator/src/k8s/crds.js';
import { idOfResourceName, LABELS, PLURALS } from '../../contract/kinds.js';
import { CHART, helm, succeeded } from '../k8s/support/helm.js';
import { ensureBinaries } from '../k8s/support/control-plane.js';
import { eventually } from '../support/eventually.js';
import { clusterKubeConfig, loadImage } from './support/cluster.js';
import { isReady } from './support/pods.js';
import { builtImages, startExternalPostgres, type ExternalPostgres } from './support/release.js';

const RELEASE = 'browserplane';
const cluster = inject('cluster');
const kube = clusterKubeConfig(cluster);
const core = kube.makeApiClient(CoreV1Api);
const apps = kube.makeApiClient(AppsV1Api);
const leases = kube.makeApiClient(CoordinationV1Api);
const custom = kube.makeApiClient(CustomObjectsApi);

const timings: Record<string, number> = {};
let namespace: string;
let scratch: string;
let postgres: ExternalPostgres | undefined;
let kernel: Kernel;
let apiUrl: string;
let valuesFile: string;
let installStartedAt: number;

const kubectl = async (...args: string[]) =>
  promisify(execFile)(path.join(await ensureBinaries('node'), 'kubectl'), ['--kubeconfig', cluster.kubeconfigPath, '-n', namespace, ...args]);

const helmIn = async (...args: string[]) => succeeded(await helm([...args, '--kubeconfig', cluster.kubeconfigPath, '-n', namespace]), `helm ${args[0]}`);

/** The pods of one component of the release (api, operator) or the browser pods (label app.kubernetes.io/component=browser). */
async function podsOf(selector: string): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace, labelSelector: selector })).items;
}

async function browserPodsOfPool(poolId: string): Promise<V1Pod[]> {
  const sessions = (await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURALS.BrowserSession, labelSelector: `${LABELS.poolId}=${labelValue(poolId)}` })) as { items: { metadata: { name: string } }[] };
  const pods: V1Pod[] = [];
  for (const session of sessions.items) {
    const browserId = labelValue(idOfResourceName(session.metadata.name));
    pods.push(...(await core.listNamespacedPod({ namespace, labelSelector: `${BROWSER_ID_LABEL}=${browserId}` })).items.filter((pod) => !pod.metadata!.deletionTimestamp));
  }
  return pods;
}

/** Milliseconds from a pod's creation to its Ready condition (the agent's readiness probe: CDP up). */
function startToReadyMs(pod: V1Pod): number {
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True');
  return new Date(ready!.lastTransitionTime!).getTime() - new Date(pod.metadata!.creationTimestamp!).getTime();
}

beforeAll(async () => {
  const images = builtImages('api', 'browser');
  scratch = await mkdtemp(path.join(os.tmpdir(), 'browserplane-helm-e2e-'));
  await chmod(scratch, 0o711); // Postgres runs as its own user and must reach its data dir
  namespace = `bp-${randomBytes(3).toString('hex')}`;
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await eventually(() => core.readNamespacedServiceAccount({ name: 'default', namespace }), { timeoutMs: 30_000, intervalMs: 250, what: 'default service account', retryErrors: true });
  let started = Date.now();
  await loadImage(cluster, images.api.archive);
  await loadImage(cluster, images.browser.archive);
  timings.loadImagesMs = Date.now() - started;
  postgres = await startExternalPostgres(scratch, cluster.nodeIp, 15432);

  valuesFile = path.join(scratch, 'values.json');
  await writeFile(
    valuesFile,
    JSON.stringify({
      image: { repository: images.api.repository, tag: images.api.tag, pullPolicy: 'Never' },
      database: { url: postgres.databaseUrl },
      postgresql: { enabled: false },
      // One node of two cores: small requests, so everything schedules.
      // Two warm spares: spare pods run beside the pools' until the upgrade below turns them off.
      api: { replicas: 1, spareBrowsers: 2, resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '1Gi' } } },
      operator: { replicas: 2, resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '512Mi' } } },
      browsers: { image: { repository: images.browser.repository, tag: images.browser.tag, pullPolicy: 'Never' }, resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '2Gi' } } },
    }),
  );
  started = Date.now();
  await helmIn('install', RELEASE, CHART, '-f', valuesFile, '--wait', '--timeout', '5m');
  timings.helmInstallMs = Date.now() - started;
  installStartedAt = started;
  const service = await core.readNamespacedService({ name: `${RELEASE}-api`, namespace });
  // As a client writes it (no :80), which is also how the API writes cdp_ws_url from the Host header.
  apiUrl = new URL(`http://${service.spec!.clusterIP}:${service.spec!.ports![0]!.port}`).origin;
  const secret = await core.readNamespacedSecret({ name: RELEASE, namespace });
  const apiKey = Buffer.from(secret.data!['api-key']!, 'base64').toString('utf8');
  kernel = new Kernel({ apiKey, baseURL: apiUrl, maxRetries: 0 });
}, 600_000);

afterAll(async () => {
  console.log(`helm e2e timings (ms): ${JSON.stringify(timings)}`);
  await helm(['uninstall', RELEASE, '--kubeconfig', cluster.kubeconfigPath, '-n', namespace, '--wait']).catch(() => undefined);
  await postgres?.stop().catch(() => undefined);
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 300_000);

describe('helm install of charts/browserplane on a real node', () => {
  let apiPoolId: string;
  let gitopsPoolId: string;

  it('runs the API and both operator replicas from the built image, as uid 10001 on a read-only root', async () => {
    const api = await podsOf('app.kubernetes.io/component=api');
    const operators = await podsOf('app.kubernetes.io/component=operator');
    expect(api.filter(isReady)).toHaveLength(1);
    expect(operators.filter((pod) => pod.status?.phase === 'Running')).toHaveLength(2);
    for (const pod of [...api, ...operators]) {
      expect(pod.spec!.containers[0]!.image).toContain('browserplane/api:');
      expect(pod.spec!.securityContext?.runAsUser).toBe(10001);
      expect(pod.spec!.containers[0]!.securityContext?.readOnlyRootFilesystem).toBe(true);
    }
    const ready = await fetch(`${apiUrl}/readyz`);
    expect(ready.status).toBe(200);
  });

  it('fills a pool made through the API and one applied with kubectl with real browser pods', async () => {
    const created = await kernel.browserPools.create({ name: 'api-pool', size: 1, headless: true, fill_rate_per_minute: 100 });
    apiPoolId = created.id;
    const manifest = path.join(scratch, 'pool.yaml');
    await writeFile(
      manifest,
      ['apiVersion: browserplane.dev/v1alpha1', 'kind: BrowserPool', 'metadata:', '  name: gitops-pool', 'spec:', '  name: gitops-pool', '  size: 1', '  fillRatePerMinute: 100', '  headless: true', ''].join('\n'),
    );
    const applied = await kubectl('apply', '-f', manifest);
    expect(applied.stdout).toContain('browserpool.browserplane.dev/gitops-pool created');

    const filled = async (name: string) => eventually(
      async () => {
        const pool = await kernel.browserPools.retrieve(name);
        return pool.available_count === 1 && pool;
      },
      { timeoutMs: 240_000, intervalMs: 500, what: `pool ${name} to fill`, retryErrors: true },
    );
    const apiPool = await filled('api-pool');
    timings.installToFirstWarmBrowserMs = Date.now() - installStartedAt;
    const gitopsPool = await filled('gitops-pool');
    gitopsPoolId = gitopsPool.id;
    expect(apiPool.id).toBe(apiPoolId);

    for (const poolId of [apiPoolId, gitopsPoolId]) {
      const pods = await browserPodsOfPool(poolId);
      expect(pods).toHaveLength(1);
      const pod = pods[0]!;
      expect(isReady(pod)).toBe(true);
      expect(pod.spec!.containers[0]!.image).toContain('browserplane/browser:');
      expect(pod.status!.containerStatuses![0]!.imageID).toBeTruthy();
      // The operator's file API limits reach the pod's agent (the documented default quota).
      expect(pod.spec!.containers[0]!.env!.find((e) => e.name === 'AGENT_FS_QUOTA_MB')?.value).toBe('1024');
      timings[`browserPodStartToReadyMs_${poolId === apiPoolId ? 'api' : 'gitops'}`] = startToReadyMs(pod);
    }
  }, 300_000);

  it('leases a warm browser, drives it with Playwright over cdp_ws_url through the API Service, runs a process, Playwright code, curl and a screenshot in its pod, and releases it', async () => {
    const lease = await kernel.browserPools.acquire('gitops-pool', { acquire_timeout_seconds: 60 });
    expect(lease.cdp_ws_url.startsWith(apiUrl.replace('http:', 'ws:'))).toBe(true);
    const browser = await chromium.connectOverCDP(lease.cdp_ws_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.setContent('<title>from a real pod</title><p id="who"></p><script>document.getElementById("who").textContent = navigator.userAgent</script>');
      expect(await page.title()).toBe('from a real pod');
      expect(await page.textContent('#who')).toMatch(/Chrome\//);
    } finally {
      await browser.close();
    }
    // What runs next to the browser works in the pod too (its agent, its container as the boundary).
    const id = lease.session_id;
    await kernel.browsers.fs.writeFile(id, Buffer.from('from the fs API'), { path: '/notes/pod.txt' });
    // No user namespaces under RuntimeDefault seccomp: processes run unconfined as the pod's user, in the session's files.
    const exec = await kernel.browsers.process.exec(id, { command: 'sh', args: ['-c', 'id -u; cat notes/pod.txt'] });
    expect(exec.exit_code, Buffer.from(exec.stderr_b64 ?? '', 'base64').toString()).toBe(0);
    expect(Buffer.from(exec.stdout_b64 ?? '', 'base64').toString()).toBe('10001\nfrom the fs API');
    const executed = await kernel.browsers.playwright.execute(id, { code: "await page.setContent('<title>pw in a pod</title>'); return await page.title();" });
    expect(executed, executed.error).toMatchObject({ success: true, result: 'pw in a pod' });
    const curled = await kernel.browsers.curl(id, { url: `${apiUrl}/healthz` });
    expect(curled.status).toBe(200);
    const shot = await kernel.browsers.computer.captureScreenshot(id);
    expect(Buffer.from(await shot.arrayBuffer()).subarray(1, 4).toString()).toBe('PNG');
    await kernel.browserPools.release('gitops-pool', { session_id: lease.session_id });
    await eventually(async () => (await kernel.browserPools.retrieve('gitops-pool')).available_count === 1, { timeoutMs: 240_000, intervalMs: 500, what: 'the released browser to be replaced', retryErrors: true });
  }, 300_000);

  it('keeps warm spare pods, and a create with their settings takes one through the API Service', async () => {
    const spareGauge = async () => Number(/^browserplane_spare_browsers\{phase="running"\} (\d+)/m.exec(await (await fetch(`${apiUrl}/metrics`)).text())?.[1] ?? 0);
    // The default headless and headful configurations of the default project, from the start.
    await eventually(async () => (await spareGauge()) === 2, { timeoutMs: 240_000, intervalMs: 1000, what: 'two running spares', retryErrors: true });
    const spareIds = (await podsOf('browserplane.dev/spare=true')).filter((pod) => !pod.metadata!.deletionTimestamp).map((pod) => pod.metadata!.labels![BROWSER_ID_LABEL]);
    expect(spareIds).toHaveLength(2);
    const session = await kernel.browsers.create({ headless: true, name: 'from-a-spare-pod' });
    expect(spareIds).toContain(labelValue(session.session_id));
    const browser = await chromium.connectOverCDP(session.cdp_ws_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.setContent('<title>spare pod</title>');
      expect(await page.title()).toBe('spare pod');
    } finally {
      await browser.close();
    }
    await kernel.browsers.deleteByID(session.session_id);
    // A replacement is warmed.
    await eventually(async () => (await spareGauge()) === 2, { timeoutMs: 240_000, intervalMs: 1000, what: 'the spare to be replaced', retryErrors: true });
  }, 600_000);

  it('replaces a browser whose container is killed', async () => {
    const [victim] = await browserPodsOfPool(apiPoolId);
    const containerId = victim!.status!.containerStatuses![0]!.containerID!.replace(/^containerd:\/\//, '');
    await promisify(execFile)('ctr', ['--address', cluster.containerdSocket, '-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', containerId]);
    const replacement = await eventually(
      async () => {
        const pods = await browserPodsOfPool(apiPoolId);
        return pods.find((pod) => pod.metadata!.uid !== victim!.metadata!.uid && isReady(pod));
      },
      { timeoutMs: 240_000, intervalMs: 500, what: 'a new ready browser pod for the pool', retryErrors: true },
    );
    expect(replacement.metadata!.name).not.toBe(victim!.metadata!.name);
    await eventually(async () => (await kernel.browserPools.retrieve('api-pool')).available_count === 1, { timeoutMs: 120_000, intervalMs: 500, what: 'the pool to be full again', retryErrors: true });
  }, 300_000);

  it('hands the operator lease to the standby when the leader pod is deleted, and the standby reconciles', async () => {
    const leaseName = `${RELEASE}-operator`;
    const before = (await leases.readNamespacedLease({ name: leaseName, namespace })).spec!.holderIdentity!;
    const operators = (await podsOf('app.kubernetes.io/component=operator')).map((pod) => pod.metadata!.name!);
    expect(operators).toContain(before);
    const started = Date.now();
    await core.deleteNamespacedPod({ name: before, namespace });
    const after = await eventually(
      async () => {
        const holder = (await leases.readNamespacedLease({ name: leaseName, namespace })).spec!.holderIdentity;
        // Released on SIGTERM, the Lease has no holder ('') until a replica takes it.
        return holder && holder !== before ? holder : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, what: 'another holder', retryErrors: true },
    );
    timings.operatorFailoverMs = Date.now() - started;
    // The deleted leader hands the Lease back on SIGTERM; whichever live replica campaigns
    // first takes it: the standby, or the pod the Deployment starts in the leader's place.
    const live = (await podsOf('app.kubernetes.io/component=operator')).filter((pod) => !pod.metadata!.deletionTimestamp).map((pod) => pod.metadata!.name!);
    expect(live).toContain(after);
    console.log(`operator failover: the Lease went to ${operators.includes(after) ? 'the standby' : 'the replacement pod'} (${after})`);
    // The new leader acts: a pool grown through the API fills.
    await kernel.browserPools.update('api-pool', { size: 2 });
    await eventually(async () => (await kernel.browserPools.retrieve('api-pool')).available_count === 2, { timeoutMs: 240_000, intervalMs: 500, what: 'the pool to grow to 2', retryErrors: true });
  }, 400_000);

  it('rolls out a changed value with helm upgrade', async () => {
    const before = (await podsOf('app.kubernetes.io/component=api')).map((pod) => pod.metadata!.uid);
    // Spares off as well: the new API closes the spare pods the old one kept (before the uninstall below).
    // And api.internalUrl: there is no cluster DNS in this tier, so browser pods reach the API's
    // side doors (extensions, telemetry, recordings) at its Service's clusterIP from now on.
    await helmIn('upgrade', RELEASE, CHART, '-f', valuesFile, '--set', 'api.logLevel=debug', '--set', 'api.spareBrowsers=0', '--set', `api.internalUrl=${apiUrl}`, '--wait', '--timeout', '5m');
    const deployment = await apps.readNamespacedDeployment({ name: `${RELEASE}-api`, namespace });
    const env = deployment.spec!.template.spec!.containers[0]!.env ?? [];
    expect(env.find((e) => e.name === 'LOG_LEVEL')?.value).toBe('debug');
    expect(env.find((e) => e.name === 'BROWSERPLANE_INTERNAL_URL')?.value).toBe(apiUrl);
    const pods = await eventually(
      async () => {
        const now = (await podsOf('app.kubernetes.io/component=api')).filter((pod) => !pod.metadata!.deletionTimestamp);
        return now.length === 1 && !before.includes(now[0]!.metadata!.uid) && isReady(now[0]!) && now;
      },
      { timeoutMs: 180_000, intervalMs: 500, what: 'the new API pod to be ready', retryErrors: true },
    );
    expect(pods).toHaveLength(1);
    // The data outlives the rollout: the pools are still there. The Service reaches the new
    // pod once kube-proxy has its endpoint, a moment after the pod is Ready: until then a
    // request can go to the old pod's address and time out.
    const pool = await eventually(async () => kernel.browserPools.retrieve('gitops-pool', { timeout: 10_000 }), { timeoutMs: 120_000, intervalMs: 1000, what: 'the API through its Service after the rollout', retryErrors: true });
    expect(pool.id).toBe(gitopsPoolId);
    await eventually(async () => (await podsOf('browserplane.dev/spare=true')).length === 0, { timeoutMs: 180_000, intervalMs: 500, what: 'the spare pods to end', retryErrors: true });
  }, 400_000);

  it('in a browser pod through the API Service: an uploaded extension marks pages, a replay records an MP4, telemetry sees console.log, and supervisor logs show Chromium', async () => {
    // A small MV3 extension whose content script marks every page.
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from(JSON.stringify({ manifest_version: 3, name: 'pod marker', version: '1.0', content_scripts: [{ matches: ['<all_urls>'], js: ['mark.js'], run_at: 'document_start' }] })), 'manifest.json');
    zip.addBuffer(Buffer.from("document.documentElement.dataset.ext = 'loaded';"), 'mark.js');
    zip.end();
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) chunks.push(chunk);
    const zipBytes = Buffer.concat(chunks);
    const uploaded = await kernel.extensions.upload({ file: await toFile(zipBytes, 'marker.zip'), name: 'pod-marker' });
    expect(uploaded.name).toBe('pod-marker');

    const created = await kernel.browsers.create({ headless: true, extensions: [{ name: 'pod-marker' }], telemetry: { enabled: true, browser: { console: { enabled: true } } } });
    const id = created.session_id;
    try {
      const replay = await kernel.browsers.replays.start(id, { framerate: 5, max_duration_in_seconds: 60 });
      const marked = await kernel.browsers.playwright.execute(id, {
        code: `await page.goto('data:text/html,<title>x</title>'); await page.setContent('<body style="background:#c00"><script>console.log("from a pod page")</script></body>'); await page.waitForTimeout(1500); await page.goto(${JSON.stringify(`${apiUrl}/healthz`)}); return await page.evaluate(() => document.documentElement.dataset.ext ?? 'none');`,
      });
      expect(marked, marked.error).toMatchObject({ success: true, result: 'loaded' });

      await kernel.browsers.replays.stop(replay.replay_id, { id });
      // The stop answers once the video is stored (or the recording failed: then the download says why).
      const video = Buffer.from(await (await kernel.browsers.replays.download(replay.replay_id, { id })).arrayBuffer());
      expect(video.subarray(4, 8).toString()).toBe('ftyp');
      expect((await kernel.browsers.replays.list(id)).map((r) => r.replay_id)).toContain(replay.replay_id);

      const consoleSeen = await eventually(
        async () => {
          const page = await kernel.browsers.telemetry.events(id, { category: ['console'] });
          return page.getPaginatedItems().find((e) => JSON.stringify(e.event).includes('from a pod page'));
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'the console event in telemetry' },
      );
      expect(consoleSeen.event.category).toBe('console');

      const lines: string[] = [];
      for await (const event of await kernel.browsers.logs.stream(id, { source: 'supervisor', follow: false })) lines.push(event.message);
      expect(lines.length).toBeGreaterThan(0);
    } finally {
      await kernel.browsers.deleteByID(id);
    }
  }, 300_000);

  it('helm uninstall leaves no pod, lease or Secret behind but the kept encryption key', async () => {
    await kubectl('delete', 'browserpool', 'gitops-pool', '--wait=true', '--timeout=120s');
    await kernel.browserPools.delete('api-pool', { force: true });
    await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=browser' })).items.length === 0, { timeoutMs: 180_000, intervalMs: 500, what: 'browser pods to end', retryErrors: true });
    await helmIn('uninstall', RELEASE, '--wait', '--timeout', '3m');
    await eventually(async () => (await core.listNamespacedPod({ namespace })).items.length === 0, { timeoutMs: 180_000, intervalMs: 500, what: 'every pod to be gone', retryErrors: true });
    expect((await leases.listNamespacedLease({ namespace })).items).toEqual([]);
    const secrets = (await core.listNamespacedSecret({ namespace })).items;
    // The one Secret the chart keeps on purpose (helm.sh/resource-policy: keep): the key that
    // seals stored credentials, which an external Postgres outlives.
    expect(secrets.map((s) => [s.metadata!.name, s.metadata!.annotations?.['helm.sh/resource-policy']])).toEqual([[RELEASE, 'keep']]);
  }, 400_000);
});
