/**
 * The Kubernetes objects of the app runtime in Kubernetes mode (docs/apps.md, "Kubernetes
 * mode"): a build Job per deployment and a run Job per invocation, each from the runner
 * image, each with a Secret holding the short-lived token its pod presents to the API to
 * fetch its input (the source, or the bundle and env vars) and to report back. Pure
 * builders and the reading of a Job's outcome; nothing here talks to a cluster.
 *
 * The token travels in a Secret, not in the pod spec (pod specs are readable by far more
 * people than secrets), and the pod's service account token is never mounted: the app's
 * code runs in that pod and must not act as anyone in the cluster.
 */
import type { V1Job, V1JobCondition, V1ResourceRequirements, V1Secret, V1Toleration } from '@kubernetes/client-node';
import { labelValue } from '../../../../contract/kinds.js';
import { podPlacement } from '../../../../contract/placement.js';

export type AppJobKind = 'build' | 'run';

/** Labels every app Job and its pods carry; a NetworkPolicy selects the pods by them. */
export const APP_JOB_LABELS = {
  'app.kubernetes.io/name': 'browserplane-app',
  'app.kubernetes.io/managed-by': 'browserplane-api',
} as const;
export const COMPONENT_LABEL = 'app.kubernetes.io/component';
export const DEPLOYMENT_ID_LABEL = 'browserplane.dev/deployment-id';
export const INVOCATION_ID_LABEL = 'browserplane.dev/invocation-id';
/** The unprivileged user of the runner image (the same uid as the other images). */
export const RUNNER_UID = 10001;
/** Key of the token in a Job's Secret. */
export const APP_JOB_TOKEN_KEY = 'token';
/** The Secret's environment variable in the pod. */
export const APP_JOB_TOKEN_ENV = 'BROWSERPLANE_APP_JOB_TOKEN';

export interface AppJobResources {
  requests: Record<string, string>;
  limits: Record<string, string>;
  /** sizeLimit of the pod's writable emptyDir (/work: source, node_modules, bundle). */
  workSize: string;
}

/**
 * Defaults: a build runs npm and esbuild on an app of up to BROWSERPLANE_APP_MAX_UNPACKED_MB
 * and its node_modules; a run holds one Node process whose V8 heap is capped at
 * BROWSERPLANE_APP_HEAP_MB (1024 MiB by default), so its memory limit leaves room above
 * the heap for Node itself (a limit under the heap cap turns a heap error into an OOM kill
 * without a message).
 */
export const DEFAULT_APP_JOB_RESOURCES: Readonly<Record<AppJobKind, AppJobResources>> = {
  build: { requests: { cpu: '500m', memory: '512Mi' }, limits: { cpu: '2', memory: '2Gi', 'ephemeral-storage': '4Gi' }, workSize: '3Gi' },
  run: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '1536Mi', 'ephemeral-storage': '2Gi' }, workSize: '1Gi' },
};

/** Time a pod gets beyond the app's own timeout to start (image pull, fetching its input) and report. */
export const DEFAULT_STARTUP_ALLOWANCE_SECONDS = 60;
/** How long a finished Job stays for the API to read its outcome before Kubernetes deletes it. */
export const DEFAULT_FINISHED_TTL_SECONDS = 600;

export interface AppJobOptions {
  namespace: string;
  image: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** The API as pods reach it (BROWSERPLANE_INTERNAL_URL). */
  apiUrl: string;
  resources?: Partial<Record<AppJobKind, AppJobResources>>;
  startupAllowanceSeconds?: number;
  finishedTtlSeconds?: number;
  /** Placement, as the browser pods take it; empty values leave the field out. */
  imagePullSecrets?: readonly { name: string }[] | null;
  nodeSelector?: Record<string, string> | null;
  tolerations?: readonly V1Toleration[] | null;
  runtimeClassName?: string | null;
  priorityClassName?: string | null;
  /** Egress of build and run pods (npm, pip, the app): HTTP_PROXY, HTTPS_PROXY, NO_PROXY; the API's host is always in NO_PROXY. */
  proxy?: { http?: string | undefined; https?: string | undefined; noProxy?: string | undefined } | undefined;
  /** A ConfigMap (key ca.crt: a whole CA bundle) the pods trust instead of the image's (egress that inspects TLS). */
  caConfigMap?: string | undefined;
}

/** Where a CA ConfigMap is mounted in the pods. */
export const CA_BUNDLE_PATH = '/etc/browserplane/ca/ca.crt';

export interface BuildJobInput {
  deploymentId: string;
  buildTimeoutMs: number;
}

export interface RunJobInput {
  invocationId: string;
  deploymentId: string;
  appName: string;
  actionName: string;
  timeoutMs: number;
}

/** A DNS-1123 name from a prefix and an id (ids are lower-case base32 with `_`, maybe upper case from elsewhere). */
function objectName(prefix: string, id: string): string {
  return `${prefix}-${id.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}
export const buildJobName = (deploymentId: string) => objectName('app-build', deploymentId);
export const runJobName = (invocationId: string) => objectName('app-run', invocationId);

/** Proxy variables in both spellings (npm and pip read the upper case, many tools the lower). */
function proxyEnv(options: AppJobOptions): { name: string; value: string }[] {
  const { proxy } = options;
  if (!proxy?.http && !proxy?.https) return [];
  const apiHost = new URL(options.apiUrl).hostname;
  const noProxy = [apiHost, ...(proxy.noProxy ?? '').split(',').map((part) => part.trim()).filter(Boolean)].join(',');
  const pairs: [string, string | undefined][] = [
    ['HTTP_PROXY', proxy.http],
    ['HTTPS_PROXY', proxy.https],
    ['NO_PROXY', noProxy],
  ];
  return pairs.flatMap(([name, value]) => (value ? [{ name, value }, { name: name.toLowerCase(), value }] : []));
}

function caEnv(options: AppJobOptions): { name: string; value: string }[] {
  if (!options.caConfigMap) return [];
  // Node adds it to its own store; pip, OpenSSL (Python's ssl), requests and git (its
  // libcurl reads GIT_SSL_CAINFO, not SSL_CERT_FILE) replace theirs with it.
  return ['NODE_EXTRA_CA_CERTS', 'PIP_CERT', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO'].map((name) => ({ name, value: CA_BUNDLE_PATH }));
}

function resourcesOf(kind: AppJobKind, options: AppJobOptions): AppJobResources {
  return options.resources?.[kind] ?? DEFAULT_APP_JOB_RESOURCES[kind];
}

interface JobShape {
  kind: AppJobKind;
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  args: string[];
  activeDeadlineSeconds: number;
}

function job(shape: JobShape, options: AppJobOptions): V1Job {
  const resources = resourcesOf(shape.kind, options);
  const labels = { ...APP_JOB_LABELS, [COMPONENT_LABEL]: `app-${shape.kind}`, ...shape.labels };
  const containerResources: V1ResourceRequirements = { requests: { ...resources.requests }, limits: { ...resources.limits } };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: shape.name, namespace: options.namespace, labels, annotations: shape.annotations },
    spec: {
      // Never retried: an action has side effects, and a build that failed once fails again.
      backoffLimit: 0,
      activeDeadlineSeconds: shape.activeDeadlineSeconds,
      ttlSecondsAfterFinished: options.finishedTtlSeconds ?? DEFAULT_FINISHED_TTL_SECONDS,
      template: {
        metadata: { labels, annotations: shape.annotations },
        spec: {
          restartPolicy: 'Never',
          // The app's code runs here: it must not act as anyone in the cluster.
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 5,
          ...podPlacement(options),
          securityContext: {
            runAsNonRoot: true,
            runAsUser: RUNNER_UID,
            runAsGroup: RUNNER_UID,
            fsGroup: RUNNER_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'runner',
              image: options.image,
              imagePullPolicy: options.imagePullPolicy ?? 'IfNotPresent',
              args: shape.args,
              env: [
                { name: 'BROWSERPLANE_INTERNAL_URL', value: options.apiUrl },
                { name: APP_JOB_TOKEN_ENV, valueFrom: { secretKeyRef: { name: shape.name, key: APP_JOB_TOKEN_KEY } } },
                { name: 'HOME', value: '/work/home' },
                { name: 'TMPDIR', value: '/tmp' },
                ...proxyEnv(options),
                ...caEnv(options),
              ],
              terminationMessagePolicy: 'FallbackToLogsOnError',
              resources: containerResources,
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              volumeMounts: [
                { name: 'work', mountPath: '/work' },
                { name: 'tmp', mountPath: '/tmp' },
                ...(options.caConfigMap ? [{ name: 'ca', mountPath: '/etc/browserplane/ca', readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'work', emptyDir: { sizeLimit: resources.workSize } },
            { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
            ...(options.caConfigMap ? [{ name: 'ca', configMap: { name: options.caConfigMap, items: [{ key: 'ca.crt', path: 'ca.crt' }] } }] : []),
          ],
        },
      },
    },
  };
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/** The build Job of a deployment: fetches the stored source, builds it, uploads the bundle and the registry. */
export function buildJob(input: BuildJobInput, options: AppJobOptions): V1Job {
  return job(
    {
      kind: 'build',
      name: buildJobName(input.deploymentId),
      labels: { [DEPLOYMENT_ID_LABEL]: labelValue(input.deploymentId) },
      // The id as written: label values cannot hold every id character.
      annotations: { [DEPLOYMENT_ID_LABEL]: input.deploymentId },
      args: ['build', input.deploymentId],
      activeDeadlineSeconds: seconds(input.buildTimeoutMs) + (options.startupAllowanceSeconds ?? DEFAULT_STARTUP_ALLOWANCE_SECONDS),
    },
    options,
  );
}

/**
 * The run Job of an invocation. The app, action and ids are arguments (not secret); the
 * payload and the deployment's env vars (which may be secrets) are fetched with the token.
 */
export function runJob(input: RunJobInput, options: AppJobOptions): V1Job {
  return job(
    {
      kind: 'run',
      name: runJobName(input.invocationId),
      labels: { [DEPLOYMENT_ID_LABEL]: labelValue(input.deploymentId), [INVOCATION_ID_LABEL]: labelValue(input.invocationId) },
      annotations: { [DEPLOYMENT_ID_LABEL]: input.deploymentId, [INVOCATION_ID_LABEL]: input.invocationId },
      args: ['invoke', input.invocationId, input.appName, input.actionName],
      activeDeadlineSeconds: seconds(input.timeoutMs) + (options.startupAllowanceSeconds ?? DEFAULT_STARTUP_ALLOWANCE_SECONDS),
    },
    options,
  );
}

/**
 * The Secret a Job's pod reads its token from, same name as the Job. Given the created
 * Job's uid it is owned by the Job, so Kubernetes' garbage collector deletes it with the
 * Job (the TTL, or a cancel).
 */
export function appJobSecret(created: V1Job, token: string, owner?: { uid: string }): V1Secret {
  const name = created.metadata!.name!;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: created.metadata!.namespace!,
      labels: { ...(created.metadata?.labels ?? {}) },
      ...(owner ? { ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid: owner.uid, controller: true, blockOwnerDeletion: false }] } : {}),
    },
    type: 'Opaque',
    stringData: { [APP_JOB_TOKEN_KEY]: token },
  };
}

export type AppJobOutcome = { state: 'pending' } | { state: 'succeeded' } | { state: 'failed'; reason: string };

const isTrue = (conditions: V1JobCondition[] | undefined, type: string) => conditions?.find((c) => c.type === type && c.status === 'True');

/**
 * What a Job says of its pod's work, as the API reads it from a watch or a list: undefined
 * (the Job is gone before it finished) fails, as do the Job's Failed condition and, since
 * Kubernetes 1.31, FailureTarget (set before the pod is gone). The pod's own report to the
 * API carries the action's result; this is what fails an invocation whose pod never reported.
 */
export function appJobOutcome(found: V1Job | undefined): AppJobOutcome {
  if (!found) return { state: 'failed', reason: 'the Job was deleted before it finished' };
  const conditions = found.status?.conditions;
  if (isTrue(conditions, 'Complete') || isTrue(conditions, 'SuccessCriteriaMet')) return { state: 'succeeded' };
  const failed = isTrue(conditions, 'Failed') ?? isTrue(conditions, 'FailureTarget');
  if (failed) {
    if (failed.reason === 'DeadlineExceeded') return { state: 'failed', reason: `timed out after ${found.spec?.activeDeadlineSeconds ?? '?'}s (the Job's activeDeadlineSeconds)` };
    const detail = failed.message ? `: ${failed.message}` : '';
    return { state: 'failed', reason: `the Job failed (${failed.reason ?? 'no reason given'})${detail}` };
  }
  if (found.metadata?.deletionTimestamp) return { state: 'failed', reason: 'the Job was deleted before it finished' };
  return { state: 'pending' };
}
