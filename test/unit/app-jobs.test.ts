import { describe, expect, it } from 'vitest';
import type { V1Job } from '@kubernetes/client-node';
import {
  APP_JOB_TOKEN_ENV,
  DEFAULT_APP_JOB_RESOURCES,
  appJobOutcome,
  appJobSecret,
  buildJob,
  buildJobName,
  runJob,
  runJobName,
  type AppJobOptions,
} from '../../api/src/modules/apps/app-jobs.js';

const options: AppJobOptions = { namespace: 'ns', image: 'localhost/browserplane/runner:1', apiUrl: 'http://api.ns.svc:8080' };
const run = { invocationId: 'inv_abc123', deploymentId: 'dep_x9', appName: 'my-app', actionName: 'say-hello', timeoutMs: 90_500 };

describe('runJob', () => {
  const made = runJob(run, options);
  const pod = made.spec!.template.spec!;
  const container = pod.containers[0]!;

  it('is never retried and gets the invocation timeout plus the startup allowance as its deadline', () => {
    expect(made.spec).toMatchObject({ backoffLimit: 0, activeDeadlineSeconds: 91 + 60, ttlSecondsAfterFinished: 600 });
    expect(runJob(run, { ...options, startupAllowanceSeconds: 5 }).spec!.activeDeadlineSeconds).toBe(96);
  });

  it('mounts no service account token and runs unprivileged with a read-only root', () => {
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
  });

  it('carries the labels a NetworkPolicy selects and the ids, and the default resource limits', () => {
    expect(made.metadata!.name).toBe('app-run-inv-abc123');
    expect(made.spec!.template.metadata!.labels).toMatchObject({
      'app.kubernetes.io/name': 'browserplane-app',
      'app.kubernetes.io/component': 'app-run',
      'browserplane.dev/invocation-id': 'inv_abc123',
      'browserplane.dev/deployment-id': 'dep_x9',
    });
    expect(container.resources).toEqual({ requests: DEFAULT_APP_JOB_RESOURCES.run.requests, limits: DEFAULT_APP_JOB_RESOURCES.run.limits });
    expect(pod.volumes).toContainEqual({ name: 'work', emptyDir: { sizeLimit: '1Gi' } });
    const custom = { requests: { cpu: '1' }, limits: { memory: '4Gi' }, workSize: '8Gi' };
    const bigger = runJob(run, { ...options, resources: { run: custom } }).spec!.template.spec!;
    expect(bigger.containers[0]!.resources).toEqual({ requests: { cpu: '1' }, limits: { memory: '4Gi' } });
    // The defaults are not shared objects a caller could change through a Job.
    container.resources!.limits!.memory = '1Ki';
    expect(DEFAULT_APP_JOB_RESOURCES.run.limits.memory).toBe('1536Mi');
  });

  it('passes the ids as arguments and the token only by reference to its Secret, never the payload or env vars', () => {
    expect(container.args).toEqual(['invoke', 'inv_abc123', 'my-app', 'say-hello']);
    expect(container.env).toContainEqual({ name: APP_JOB_TOKEN_ENV, valueFrom: { secretKeyRef: { name: 'app-run-inv-abc123', key: 'token' } } });
    expect(container.env).toContainEqual({ name: 'BROWSERPLANE_INTERNAL_URL', value: 'http://api.ns.svc:8080' });
    expect(JSON.stringify(made)).not.toMatch(/secret-token-value/);
  });

  it('leaves out empty placement and sets the given one', () => {
    const empty = runJob(run, { ...options, imagePullSecrets: [], nodeSelector: {}, tolerations: [], runtimeClassName: '' }).spec!.template.spec!;
    expect(empty).not.toHaveProperty('runtimeClassName');
    expect(empty).not.toHaveProperty('nodeSelector');
    const placed = runJob(run, { ...options, runtimeClassName: 'gvisor', nodeSelector: { pool: 'apps' } }).spec!.template.spec!;
    expect(placed).toMatchObject({ runtimeClassName: 'gvisor', nodeSelector: { pool: 'apps' } });
  });

  it('makes DNS-1123 names of any id', () => {
    expect(runJobName('Inv_A.B')).toBe('app-run-inv-a-b');
    expect(runJobName('x'.repeat(100))).toHaveLength(63);
    expect(buildJobName('dep_-')).toBe('app-build-dep');
  });
});

describe('egress and CA settings of app pods', () => {
  const envOf = (job: V1Job) => Object.fromEntries(job.spec!.template.spec!.containers[0]!.env!.map((entry) => [entry.name, entry.value]));

  it('gives no proxy or CA variables and no CA volume when none is set', () => {
    const made = buildJob({ deploymentId: 'dep_1', buildTimeoutMs: 60_000 }, options);
    expect(Object.keys(envOf(made)).filter((name) => /proxy|CERT|CA_BUNDLE/i.test(name))).toEqual([]);
    expect(made.spec!.template.spec!.volumes!.map((volume) => volume.name)).toEqual(['work', 'tmp']);
  });

  it('sets the proxy in both spellings, with the API host always in NO_PROXY', () => {
    const made = runJob(run, { ...options, proxy: { https: 'http://proxy.corp:3128', noProxy: '10.0.0.0/8, .svc' } });
    const env = envOf(made);
    expect(env).toMatchObject({ HTTPS_PROXY: 'http://proxy.corp:3128', https_proxy: 'http://proxy.corp:3128', NO_PROXY: 'api.ns.svc,10.0.0.0/8,.svc', no_proxy: 'api.ns.svc,10.0.0.0/8,.svc' });
    expect(env.HTTP_PROXY).toBeUndefined();
  });

  it('mounts a CA ConfigMap read-only and points Node, pip and OpenSSL at it', () => {
    const made = buildJob({ deploymentId: 'dep_1', buildTimeoutMs: 60_000 }, { ...options, caConfigMap: 'corp-ca' });
    const pod = made.spec!.template.spec!;
    expect(pod.volumes).toContainEqual({ name: 'ca', configMap: { name: 'corp-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] } });
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'ca', mountPath: '/etc/browserplane/ca', readOnly: true });
    expect(envOf(made)).toMatchObject({ NODE_EXTRA_CA_CERTS: '/etc/browserplane/ca/ca.crt', PIP_CERT: '/etc/browserplane/ca/ca.crt', SSL_CERT_FILE: '/etc/browserplane/ca/ca.crt', GIT_SSL_CAINFO: '/etc/browserplane/ca/ca.crt' });
  });
});

describe('buildJob', () => {
  it('builds one deployment with the build timeout and the build resources', () => {
    const made = buildJob({ deploymentId: 'dep_x9', buildTimeoutMs: 600_000 }, options);
    expect(made.metadata!.name).toBe('app-build-dep-x9');
    expect(made.spec).toMatchObject({ backoffLimit: 0, activeDeadlineSeconds: 660 });
    const pod = made.spec!.template.spec!;
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.containers[0]!.args).toEqual(['build', 'dep_x9']);
    expect(pod.containers[0]!.resources!.limits).toEqual(DEFAULT_APP_JOB_RESOURCES.build.limits);
    expect(made.spec!.template.metadata!.labels).toMatchObject({ 'app.kubernetes.io/component': 'app-build', 'browserplane.dev/deployment-id': 'dep_x9' });
    expect(made.spec!.template.metadata!.labels).not.toHaveProperty('browserplane.dev/invocation-id');
  });
});

describe('appJobSecret', () => {
  it('holds the token under the Job name, owned by the Job once its uid is known', () => {
    const made = runJob(run, options);
    const secret = appJobSecret(made, 'secret-token-value', { uid: 'u-1' });
    expect(secret.metadata).toMatchObject({ name: 'app-run-inv-abc123', namespace: 'ns' });
    expect(secret.stringData).toEqual({ token: 'secret-token-value' });
    expect(secret.metadata!.ownerReferences).toEqual([{ apiVersion: 'batch/v1', kind: 'Job', name: 'app-run-inv-abc123', uid: 'u-1', controller: true, blockOwnerDeletion: false }]);
    expect(appJobSecret(made, 't').metadata).not.toHaveProperty('ownerReferences');
  });
});

describe('appJobOutcome', () => {
  const withConditions = (conditions: object[], extra: Partial<V1Job> = {}): V1Job => ({ ...runJob(run, options), status: { conditions } as V1Job['status'], ...extra });

  it('fails a Job that is gone or being deleted', () => {
    expect(appJobOutcome(undefined)).toEqual({ state: 'failed', reason: 'the Job was deleted before it finished' });
    const deleting = withConditions([]);
    deleting.metadata!.deletionTimestamp = new Date();
    expect(appJobOutcome(deleting)).toEqual({ state: 'failed', reason: 'the Job was deleted before it finished' });
  });

  it('names a deadline as a timeout and passes other failure reasons on', () => {
    expect(appJobOutcome(withConditions([{ type: 'Failed', status: 'True', reason: 'DeadlineExceeded' }]))).toEqual({
      state: 'failed',
      reason: "timed out after 151s (the Job's activeDeadlineSeconds)",
    });
    expect(appJobOutcome(withConditions([{ type: 'FailureTarget', status: 'True', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' }]))).toEqual({
      state: 'failed',
      reason: 'the Job failed (BackoffLimitExceeded): Job has reached the specified backoff limit',
    });
  });

  it('reads success, and a Job without a true final condition as pending', () => {
    expect(appJobOutcome(withConditions([{ type: 'Complete', status: 'True' }]))).toEqual({ state: 'succeeded' });
    expect(appJobOutcome(withConditions([{ type: 'SuccessCriteriaMet', status: 'True' }]))).toEqual({ state: 'succeeded' });
    expect(appJobOutcome(withConditions([{ type: 'Failed', status: 'False' }]))).toEqual({ state: 'pending' });
    expect(appJobOutcome(withConditions([]))).toEqual({ state: 'pending' });
  });
});
