/**
 * The app runtime in Kubernetes mode on a real node (docs/apps.md, "Kubernetes mode"):
 * charts/browserplane installed with the api and runner images `make images` built, the
 * API creating a build Job per deployment and a run Job per invocation, their pods (the
 * runner image, uid 10001, read-only root, no service account token) building with real
 * npm and PyPI and running the app's actions, driven with @onkernel/sdk as any client.
 *
 * The tier's network namespace has no way out but its egress proxy (scripts/cluster-test.sh
 * starts an HTTP forward proxy on the host, support/egress.ts bridges <node ip>:3128 to it),
 * so the chart gives the pods apps.proxy; this machine's egress inspects TLS, so its CA
 * bundle (NODE_EXTRA_CA_CERTS) goes in a ConfigMap named by apps.caConfigMap. Postgres is
 * external (support/release.ts). There is no cluster DNS in this tier: api.internalUrl is
 * set to the API Service's clusterIP by a helm upgrade right after the install.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import Kernel, { toFile } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CHART, helm, succeeded } from '../k8s/support/helm.js';
import { eventually } from '../support/eventually.js';
import { clusterKubeConfig, loadImage } from './support/cluster.js';
import { freshNamespace, waitForPod } from './support/pods.js';
import { builtImages, startExternalPostgres, type ExternalPostgres } from './support/release.js';

const RELEASE = 'browserplane';
const CA_CONFIGMAP = 'egress-ca';
const cluster = inject('cluster');
const egressProxy = inject('egressProxy');
const kube = clusterKubeConfig(cluster);
const core = kube.makeApiClient(CoreV1Api);
const batch = kube.makeApiClient(BatchV1Api);
const images = builtImages('api', 'runner');
const timings: Record<string, number> = {};
let namespace: string;
let scratch: string;
/** The host's CA bundle when its egress inspects TLS (NODE_EXTRA_CA_CERTS), else none. */
const caBundle = process.env.NODE_EXTRA_CA_CERTS && existsSync(process.env.NODE_EXTRA_CA_CERTS) ? readFileSync(process.env.NODE_EXTRA_CA_CERTS, 'utf8') : undefined;

const helmIn = async (...args: string[]) => succeeded(await helm([...args, '--kubeconfig', cluster.kubeconfigPath, '-n', namespace]), `helm ${args[0]}`);

/** Lines the tier's egress proxy logged (`<verb> <host:port> allowed|refused`). */
const egressLog = () => (process.env.BROWSERPLANE_CLUSTER_EGRESS_LOG ? readFileSync(process.env.BROWSERPLANE_CLUSTER_EGRESS_LOG, 'utf8').split('\n') : []);

beforeAll(async () => {
  if (!egressProxy) throw new Error('no egress proxy: run through scripts/cluster-test.sh');
  scratch = await mkdtemp(path.join(os.tmpdir(), 'browserplane-apps-e2e-'));
  await chmod(scratch, 0o711); // Postgres runs as its own user and must reach its data dir
  namespace = await freshNamespace('apps');
  const started = Date.now();
  await loadImage(cluster, images.api.archive);
  await loadImage(cluster, images.runner.archive);
  timings.loadImagesMs = Date.now() - started;
  if (caBundle) await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: CA_CONFIGMAP }, data: { 'ca.crt': caBundle } } });
}, 300_000);

afterAll(async () => {
  console.log(`apps e2e timings (ms): ${JSON.stringify(timings)}`);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe("the tier's egress", () => {
  it('takes a pod of the runner image, as the Jobs run it, to npm and PyPI through the proxy on the node IP', async () => {
    const name = 'egress-probe';
    const caFile = '/etc/browserplane/ca/ca.crt';
    const script = [
      'npm view @onkernel/sdk@0.84.0 version',
      `python3 -c 'import urllib.request; print("pypi", urllib.request.urlopen("https://pypi.org/simple/kernel/", timeout=30).status)'`,
    ].join(' && ');
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'probe',
              image: `${images.runner.repository}:${images.runner.tag}`,
              imagePullPolicy: 'Never',
              command: ['sh', '-c', script],
              env: [
                { name: 'HTTPS_PROXY', value: egressProxy },
                { name: 'https_proxy', value: egressProxy },
                { name: 'npm_config_cache', value: '/tmp/npm-cache' },
                { name: 'npm_config_update_notifier', value: 'false' },
                ...(caBundle ? ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'PIP_CERT'].map((variable) => ({ name: variable, value: caFile })) : []),
              ],
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              volumeMounts: [
                { name: 'work', mountPath: '/work' },
                { name: 'tmp', mountPath: '/tmp' },
                ...(caBundle ? [{ name: 'ca', mountPath: '/etc/browserplane/ca', readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'work', emptyDir: {} },
            { name: 'tmp', emptyDir: {} },
            ...(caBundle ? [{ name: 'ca', configMap: { name: CA_CONFIGMAP } }] : []),
          ],
        },
      },
    });
    const pod = await waitForPod(namespace, name, (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed', 'finished', 120_000);
    const log = await core.readNamespacedPodLog({ namespace, name });
    expect(pod.status!.phase, log).toBe('Succeeded');
    expect(log.split('\n')).toEqual(expect.arrayContaining(['0.84.0', 'pypi 200']));
    expect(egressLog()).toEqual(expect.arrayContaining(['CONNECT registry.npmjs.org:443 allowed', 'CONNECT pypi.org:443 allowed']));
  }, 180_000);
});

describe('apps on a helm install of charts/browserplane', () => {
  let postgres: ExternalPostgres | undefined;
  let kernel: Kernel;
  let apiUrl: string;

  const JS_APP = (name: string) => `
import { existsSync, writeFileSync } from 'node:fs';
import Kernel from '@onkernel/sdk';

const kernel = new Kernel();
const app = kernel.app(${JSON.stringify(name)});

app.action('shout', async (_ctx: unknown, payload?: { text: string }) => {
  let rootWritable = true;
  try {
    writeFileSync('/probe', 'x');
  } catch {
    rootWritable = false;
  }
  console.log('shouting ' + payload!.text);
  return {
    shout: payload!.text.toUpperCase(),
    uid: process.getuid!(),
    rootWritable,
    serviceAccountToken: existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token'),
  };
});

app.action('boom', async (_ctx: unknown) => {
  throw new Error('boom in a pod');
});
`;

  const PY_APP = (name: string) => `
import os
import kernel

app = kernel.App(${JSON.stringify(name)})


@app.action("shout")
def shout(ctx, payload):
    return {"shout": payload["text"].upper(), "uid": os.getuid(), "python": True}


@app.action("boom")
def boom(ctx):
    raise RuntimeError("python boom in a pod")
`;

  async function zipOf(files: Record<string, string>): Promise<Buffer> {
    const { default: yazl } = await import('yazl');
    const zip = new yazl.ZipFile();
    for (const [file, text] of Object.entries(files)) zip.addBuffer(Buffer.from(text), file);
    zip.end();
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /** Deploys and waits until the build ended; returns the deployment as it ended. */
  async function deploy(file: Awaited<ReturnType<typeof toFile>>, entrypoint: string) {
    const created = await kernel.deployments.create({ file, entrypoint_rel_path: entrypoint, version: '1' });
    return eventually(
      async () => {
        const deployment = await kernel.deployments.retrieve(created.id);
        return !['queued', 'in_progress'].includes(deployment.status) && deployment;
      },
      { timeoutMs: 420_000, intervalMs: 2000, what: `deployment ${created.id} to finish building`, retryErrors: true },
    );
  }

  async function appPods(): Promise<V1Pod[]> {
    return (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=browserplane-app' })).items;
  }

  beforeAll(async () => {
    postgres = await startExternalPostgres(scratch, cluster.nodeIp, 15433);
    const valuesFile = path.join(scratch, 'values.json');
    await writeFile(
      valuesFile,
      JSON.stringify({
        image: { repository: images.api.repository, tag: images.api.tag, pullPolicy: 'Never' },
        database: { url: postgres.databaseUrl },
        postgresql: { enabled: false },
        // One node of two cores, maybe shared with helm.test.ts: small requests, so everything schedules.
        api: { replicas: 1, resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '1Gi' } } },
        operator: { replicas: 1, resources: { requests: { cpu: '20m', memory: '128Mi' }, limits: { memory: '512Mi' } } },
        apps: {
          runner: { image: { repository: images.runner.repository, tag: images.runner.tag, pullPolicy: 'Never' } },
          proxy: { http: egressProxy, https: egressProxy },
          caConfigMap: caBundle ? CA_CONFIGMAP : '',
          build: { resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi', 'ephemeral-storage': '4Gi' }, workSize: '3Gi' } },
          run: { resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '1', memory: '1536Mi', 'ephemeral-storage': '2Gi' }, workSize: '1Gi' } },
        },
      }),
    );
    // No cluster DNS here: the pods reach the API at its Service's clusterIP, known once the
    // Service exists; the upgrade rolls the first API pod before it was ever ready.
    const started = Date.now();
    await helmIn('install', RELEASE, CHART, '-f', valuesFile);
    const service = await core.readNamespacedService({ name: `${RELEASE}-api`, namespace });
    apiUrl = new URL(`http://${service.spec!.clusterIP}:${service.spec!.ports![0]!.port}`).origin;
    await helmIn('upgrade', RELEASE, CHART, '-f', valuesFile, '--set', `api.internalUrl=${apiUrl}`, '--set', `apps.proxy.noProxy=${service.spec!.clusterIP}`, '--wait', '--timeout', '5m');
    timings.helmInstallMs = Date.now() - started;
    const secret = await core.readNamespacedSecret({ name: RELEASE, namespace });
    const apiKey = Buffer.from(secret.data!['api-key']!, 'base64').toString('utf8');
    kernel = new Kernel({ apiKey, baseURL: apiUrl, maxRetries: 0, timeout: 300_000 });
    // kube-proxy routes the Service a moment after the pod is Ready.
    await eventually(async () => (await fetch(`${apiUrl}/readyz`, { signal: AbortSignal.timeout(5000) })).status === 200, { timeoutMs: 60_000, intervalMs: 500, what: 'the API through its Service', retryErrors: true });
  }, 600_000);

  afterAll(async () => {
    await helm(['uninstall', RELEASE, '--kubeconfig', cluster.kubeconfigPath, '-n', namespace, '--wait']).catch(() => undefined);
    await postgres?.stop().catch(() => undefined);
  }, 300_000);

  it('builds a one-file TypeScript app in a build Job (npm through the proxy), runs an action in a run Job with its output, and fails one that throws with its message', async () => {
    const name = `js-${randomBytes(3).toString('hex')}`;
    let started = Date.now();
    const deployment = await deploy(await toFile(Buffer.from(JS_APP(name)), 'index.ts'), 'index.ts');
    timings.jsBuildMs = Date.now() - started;
    expect(deployment.status, deployment.status_reason ?? '').toBe('running');
    const builds = await batch.listNamespacedJob({ namespace, labelSelector: 'app.kubernetes.io/component=app-build' });
    expect(builds.items.map((job) => job.metadata!.annotations!['browserplane.dev/deployment-id'])).toContain(deployment.id);
    expect(egressLog()).toContain('CONNECT registry.npmjs.org:443 allowed');

    started = Date.now();
    const shout = await kernel.invocations.create({ app_name: name, action_name: 'shout', version: '1', payload: JSON.stringify({ text: 'from a pod' }) });
    timings.jsInvokeMs = Date.now() - started;
    expect(shout.status, shout.status_reason ?? '').toBe('succeeded');
    // The action saw the pod as the Job made it: uid 10001, a read-only root, no service account token.
    expect(JSON.parse(shout.output!)).toEqual({ shout: 'FROM A POD', uid: 10001, rootWritable: false, serviceAccountToken: false });
    const runs = await batch.listNamespacedJob({ namespace, labelSelector: 'app.kubernetes.io/component=app-run' });
    expect(runs.items.map((job) => job.metadata!.annotations!['browserplane.dev/invocation-id'])).toContain(shout.id);
    // Its log line reached the invocation's events.
    const frames = [];
    for await (const frame of await kernel.invocations.follow(shout.id)) frames.push(frame);
    expect(frames.some((frame) => frame.event === 'log' && frame.message === 'shouting from a pod')).toBe(true);

    const boom = await kernel.invocations.create({ app_name: name, action_name: 'boom', version: '1' });
    expect(boom).toMatchObject({ status: 'failed', status_reason: 'boom in a pod' });

    // The app pods so far (one build, two runs, while their Jobs' TTL keeps them) ran as the Job specs say.
    const pods = await appPods();
    expect(pods.map((pod) => pod.metadata!.labels!['app.kubernetes.io/component'])).toEqual(expect.arrayContaining(['app-build', 'app-run']));
    for (const pod of pods) {
      const container = pod.spec!.containers[0]!;
      expect(container.image).toBe(`${images.runner.repository}:${images.runner.tag}`);
      expect(pod.spec!.securityContext?.runAsUser).toBe(10001);
      expect(container.securityContext?.readOnlyRootFilesystem).toBe(true);
      expect(pod.spec!.automountServiceAccountToken).toBe(false);
      expect((container.volumeMounts ?? []).map((mount) => mount.mountPath)).not.toContain('/var/run/secrets/kubernetes.io/serviceaccount');
      expect(container.env?.find((variable) => variable.name === 'BROWSERPLANE_INTERNAL_URL')?.value?.startsWith(apiUrl)).toBe(true);
    }
  }, 900_000);

  it('builds a Python app with kernel from PyPI and runs its actions', async () => {
    const name = `py-${randomBytes(3).toString('hex')}`;
    const files = { 'main.py': PY_APP(name), 'pyproject.toml': `[project]\nname = "cluster-py"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["kernel==0.131.0"]\n` };
    const started = Date.now();
    const deployment = await deploy(await toFile(await zipOf(files), 'app.zip'), 'main.py');
    timings.pythonBuildMs = Date.now() - started;
    expect(deployment.status, deployment.status_reason ?? '').toBe('running');
    expect(egressLog()).toEqual(expect.arrayContaining(['CONNECT pypi.org:443 allowed', 'CONNECT files.pythonhosted.org:443 allowed']));
    const shout = await kernel.invocations.create({ app_name: name, action_name: 'shout', version: '1', payload: JSON.stringify({ text: 'from python' }) });
    expect(shout.status, shout.status_reason ?? '').toBe('succeeded');
    expect(JSON.parse(shout.output!)).toEqual({ shout: 'FROM PYTHON', uid: 10001, python: true });
    const boom = await kernel.invocations.create({ app_name: name, action_name: 'boom', version: '1' });
    expect(boom).toMatchObject({ status: 'failed', status_reason: 'python boom in a pod' });
  }, 900_000);
});
