import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { BatchV1Api, CoreV1Api, KubeConfig, type V1Job } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAppJobClient, type AppJobClient, type FinishedOutcome } from '../../api/src/modules/apps/app-job-client.js';
import { appJobOutcome, appJobSecret, buildJob, runJob, type AppJobOptions } from '../../api/src/modules/apps/app-jobs.js';
import { eventually } from '../support/eventually.js';
import { startControlPlane, type ControlPlane } from './support/control-plane.js';

// The app runtime's Job specs against a real kube-apiserver and kube-controller-manager
// (its Job, garbage-collector and service-account controllers; no scheduler or kubelet, so
// pods stay Pending): the API server takes them as built, the Job controller makes pods
// without a service account token, fails a Job past its deadline as appJobOutcome reads it,
// and deleting a Job deletes its token Secret.

let plane: ControlPlane;
let batch: BatchV1Api;
let core: CoreV1Api;
let namespace: string;
let config: KubeConfig;

beforeAll(async () => {
  plane = await startControlPlane({ controllerManager: true, serviceAccountAdmission: true });
  config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'test', server: plane.server, caData: readFileSync(plane.caFile).toString('base64') }],
    users: [{ name: 'test', token: plane.adminToken }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  batch = config.makeApiClient(BatchV1Api);
  core = config.makeApiClient(CoreV1Api);
  namespace = `apps-${randomBytes(4).toString('hex')}`;
  await core.createNamespace({ body: { metadata: { name: namespace } } });
}, 180_000);
afterAll(async () => {
  await plane?.stop();
});

const options = (): AppJobOptions => ({ namespace, image: 'localhost/browserplane/runner:test', imagePullPolicy: 'Never', apiUrl: 'http://api:8080' });
const readJob = (name: string): Promise<V1Job | undefined> => batch.readNamespacedJob({ name, namespace }).catch(() => undefined);

describe('app Jobs in a real cluster', () => {
  it('creates a run Job and its Secret; the Job controller makes a pod with no service account token', async () => {
    const wanted = runJob({ invocationId: 'inv_pod1', deploymentId: 'dep_1', appName: 'a', actionName: 'b', timeoutMs: 600_000 }, options());
    const created = await batch.createNamespacedJob({ namespace, body: wanted });
    await core.createNamespacedSecret({ namespace, body: appJobSecret(created, 'token-1', { uid: created.metadata!.uid! }) });
    expect(created.spec).toMatchObject({ backoffLimit: 0, activeDeadlineSeconds: 660 });
    expect(appJobOutcome(created)).toEqual({ state: 'pending' });

    const pod = await eventually(
      async () => (await core.listNamespacedPod({ namespace, labelSelector: 'browserplane.dev/invocation-id=inv_pod1' })).items[0],
      { timeoutMs: 60_000, intervalMs: 250, what: 'the Job pod' },
    );
    // ServiceAccount admission is on: without automountServiceAccountToken: false the pod
    // would get the kube-api-access projected volume with a token of the default account.
    expect(pod.spec!.volumes!.map((volume) => volume.name).sort()).toEqual(['tmp', 'work']);
    expect(pod.spec!.containers[0]!.volumeMounts!.map((mount) => mount.mountPath).sort()).toEqual(['/tmp', '/work']);
    expect(pod.metadata!.labels).toMatchObject({ 'app.kubernetes.io/component': 'app-run', 'browserplane.dev/deployment-id': 'dep_1' });
  });

  it('fails a Job past its activeDeadlineSeconds, read as a timeout', async () => {
    const wanted = runJob({ invocationId: 'inv_late', deploymentId: 'dep_1', appName: 'a', actionName: 'b', timeoutMs: 1_000 }, { ...options(), startupAllowanceSeconds: 1 });
    await batch.createNamespacedJob({ namespace, body: wanted });
    const outcome = await eventually(async () => appJobOutcome(await readJob(wanted.metadata!.name!)), {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: 'the Job to fail',
      accept: (value) => value.state !== 'pending',
    });
    expect(outcome).toEqual({ state: 'failed', reason: "timed out after 2s (the Job's activeDeadlineSeconds)" });
  });

  it('deletes the token Secret with its build Job, and reads the deleted Job as failed', async () => {
    const wanted = buildJob({ deploymentId: 'dep_gone', buildTimeoutMs: 600_000 }, options());
    const created = await batch.createNamespacedJob({ namespace, body: wanted });
    const name = created.metadata!.name!;
    await core.createNamespacedSecret({ namespace, body: appJobSecret(created, 'token-2', { uid: created.metadata!.uid! }) });
    await batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' });
    await eventually(async () => (await readJob(name)) === undefined, { timeoutMs: 30_000, intervalMs: 250, what: 'the Job to go' });
    expect(appJobOutcome(await readJob(name))).toEqual({ state: 'failed', reason: 'the Job was deleted before it finished' });
    await eventually(async () => core.readNamespacedSecret({ name, namespace }).then(() => false, () => true), {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: 'the garbage collector to delete the Secret',
    });
  });
});

const silent = { warn: () => {}, error: () => {} };

/** A client as one API replica runs it, recording the outcomes it hears by Job name. */
function replica(): { client: AppJobClient; heard: Map<string, FinishedOutcome[]> } {
  const heard = new Map<string, FinishedOutcome[]>();
  const client = createAppJobClient({
    config,
    namespace,
    log: silent,
    onOutcome: (job, outcome) => heard.set(job.metadata!.name!, [...(heard.get(job.metadata!.name!) ?? []), outcome]),
  });
  return { client, heard };
}
const heardOf = (heard: Map<string, FinishedOutcome[]>, name: string) =>
  eventually(() => heard.get(name)?.[0], { timeoutMs: 60_000, intervalMs: 250, what: `an outcome of ${name}` });

describe('createAppJobClient', () => {
  it('starts a Job with its owned Secret, hears it time out, and a replica started afterwards hears it too', async () => {
    const first = replica();
    await first.client.ready();
    const wanted = runJob({ invocationId: 'inv_client1', deploymentId: 'dep_2', appName: 'a', actionName: 'b', timeoutMs: 1_000 }, { ...options(), startupAllowanceSeconds: 1 });
    const created = await first.client.start(wanted, 'token-3');
    const secret = await core.readNamespacedSecret({ name: created.metadata!.name!, namespace });
    expect(Buffer.from(secret.data!.token!, 'base64').toString()).toBe('token-3');
    expect(secret.metadata!.ownerReferences).toEqual([expect.objectContaining({ kind: 'Job', uid: created.metadata!.uid })]);
    const timeout = { state: 'failed', reason: "timed out after 2s (the Job's activeDeadlineSeconds)" };
    expect(await heardOf(first.heard, 'app-run-inv-client1')).toEqual(timeout);
    // The replica that started it goes away; one that starts later lists the ended Job.
    await first.client.close();
    const second = replica();
    await second.client.ready();
    expect(second.heard.get('app-run-inv-client1')?.[0]).toEqual(timeout);
    await second.client.close();
  });

  it('hears a cancelled Job as deleted before it finished, and cancelling an absent Job is no error', async () => {
    const { client, heard } = replica();
    await client.ready();
    const created = await client.start(runJob({ invocationId: 'inv_cancel', deploymentId: 'dep_2', appName: 'a', actionName: 'b', timeoutMs: 600_000 }, options()), 't');
    await client.cancel(created.metadata!.name!);
    expect(await heardOf(heard, 'app-run-inv-cancel')).toEqual({ state: 'failed', reason: 'the Job was deleted before it finished' });
    await expect(client.cancel('app-run-never-made')).resolves.toBeUndefined();
    await client.close();
  });

  it('deletes the Job again when its Secret cannot be made, and throws', async () => {
    const { client } = replica();
    const wanted = runJob({ invocationId: 'inv_clash', deploymentId: 'dep_2', appName: 'a', actionName: 'b', timeoutMs: 600_000 }, options());
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'app-run-inv-clash' }, stringData: { token: 'someone else' } } });
    await expect(client.start(wanted, 't')).rejects.toThrow(/already exists/);
    await eventually(async () => (await readJob('app-run-inv-clash')) === undefined, { timeoutMs: 30_000, intervalMs: 250, what: 'the Job to be deleted' });
    await client.close();
  });
});
