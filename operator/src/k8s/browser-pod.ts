/**
 * The browser pod: one agent container that launches Chromium, as the Kubernetes runtime
 * creates it and as a kubelet (or the test suite's node agent) runs it. The launch spec
 * travels in a Secret, not in the pod: it can hold decrypted proxy credentials, and pod
 * specs are readable by far more people than secrets. So does the agent token
 * (contract/agent-client.ts) that every request to the agent must present:
 * a page in the pod that reaches the agent's port gets 401.
 */
import type { V1Pod, V1Secret, V1Toleration } from '@kubernetes/client-node';
import { MANAGED_POLICY_DIR } from '../../../contract/agent-env.js';
import type { BrowserLaunchSpec } from '../../../contract/browser-runtime.js';

export const AGENT_PORT = 9222;
export const BROWSER_ID_LABEL = 'browserplane.dev/browser-id';
export const COMPONENT_LABELS = {
  'app.kubernetes.io/name': 'browserplane-browser',
  'app.kubernetes.io/component': 'browser',
  'app.kubernetes.io/managed-by': 'browserplane-operator',
} as const;
/** The unprivileged user of the browser image (docker/browser.Dockerfile). */
export const BROWSER_UID = 10001;

/** Pod and Secret name for a browser id: DNS-1123 (ids are lower-case base32 with `_`). */
export function browserPodName(browserId: string): string {
  return `browser-${browserId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

import { labelValue } from '../../../contract/kinds.js';
import { podPlacement } from '../../../contract/placement.js';

export { labelValue };

export interface BrowserPodOptions {
  namespace: string;
  image: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** Requests and limits for the agent container (Chromium included). */
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  serviceAccountName?: string;
  /** Extra pod labels, e.g. the pool's. */
  labels?: Record<string, string>;
  /** Where the pod may run and with what; empty values (the chart's defaults) leave the field out. */
  imagePullSecrets?: readonly { name: string }[] | null;
  nodeSelector?: Record<string, string> | null;
  tolerations?: readonly V1Toleration[] | null;
  runtimeClassName?: string | null;
  priorityClassName?: string | null;
  /** More agent environment, e.g. the file API's and log streams' limits (AGENT_FS_*, AGENT_LOGS_*). */
  agentEnv?: Readonly<Record<string, string>>;
}

/**
 * The placement fields of the pod spec, only those set: the chart passes its defaults
 * ("" and empty lists and maps), and the API server refuses a pod with runtimeClassName ""
 * (its RuntimeClass admission looks the empty name up: "resource name may not be empty").
 */
/** Keys of the browser's Secret. */
export const BROWSER_SECRET_KEYS = { spec: 'spec', agentToken: 'agent-token' } as const;

export function browserSecret(spec: BrowserLaunchSpec, options: BrowserPodOptions, agentToken: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: browserPodName(spec.browserId),
      namespace: options.namespace,
      labels: { ...COMPONENT_LABELS, [BROWSER_ID_LABEL]: labelValue(spec.browserId) },
    },
    type: 'Opaque',
    stringData: { [BROWSER_SECRET_KEYS.spec]: JSON.stringify(spec), [BROWSER_SECRET_KEYS.agentToken]: agentToken },
  };
}

export function browserPod(spec: BrowserLaunchSpec, options: BrowserPodOptions): V1Pod {
  const name = browserPodName(spec.browserId);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: options.namespace,
      labels: { ...COMPONENT_LABELS, ...options.labels, [BROWSER_ID_LABEL]: labelValue(spec.browserId) },
      // The id as written: label values cannot hold every id character.
      annotations: { [BROWSER_ID_LABEL]: spec.browserId },
    },
    spec: {
      restartPolicy: 'Never',
      // The service account token is of no use to a browser and would be readable from it.
      automountServiceAccountToken: false,
      ...(options.serviceAccountName ? { serviceAccountName: options.serviceAccountName } : {}),
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 15,
      ...podPlacement(options),
      securityContext: {
        runAsNonRoot: true,
        runAsUser: BROWSER_UID,
        runAsGroup: BROWSER_UID,
        fsGroup: BROWSER_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'agent',
          image: options.image,
          imagePullPolicy: options.imagePullPolicy ?? 'IfNotPresent',
          ports: [{ name: 'agent', containerPort: AGENT_PORT, protocol: 'TCP' }],
          env: [
            { name: 'AGENT_SPEC', valueFrom: { secretKeyRef: { name, key: BROWSER_SECRET_KEYS.spec } } },
            { name: 'AGENT_TOKEN', valueFrom: { secretKeyRef: { name, key: BROWSER_SECRET_KEYS.agentToken } } },
            { name: 'AGENT_HOST', value: '0.0.0.0' },
            { name: 'AGENT_PORT', value: String(AGENT_PORT) },
            // A folder inside the volume, not its mount point: the agent removes its work
            // dir at shutdown, and removing a mount point fails (EBUSY).
            { name: 'AGENT_WORK_DIR', value: '/work/browser' },
            ...Object.entries(options.agentEnv ?? {}).map(([envName, value]) => ({ name: envName, value })),
          ],
          // The agent's last log lines become the pod's termination message when it fails.
          terminationMessagePolicy: 'FallbackToLogsOnError',
          // Probes carry no token: /health answers them with {status} alone (agent/src/server.ts).
          readinessProbe: { httpGet: { path: '/health', port: 'agent' }, periodSeconds: 2, failureThreshold: 3 },
          livenessProbe: { httpGet: { path: '/health', port: 'agent' }, initialDelaySeconds: 30, periodSeconds: 10, failureThreshold: 6 },
          resources: options.resources ?? { requests: { cpu: '250m', memory: '512Mi' }, limits: { memory: '2Gi' } },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
          // The root filesystem is read-only (test/images runs the image so): these are
          // the only places the agent, Chromium and Xvfb write.
          volumeMounts: [
            { name: 'work', mountPath: '/work' },
            // Chromium needs more shared memory than a container's default 64 MiB.
            { name: 'dshm', mountPath: '/dev/shm' },
            // Xvfb's socket dir (/tmp/.X11-unix) and lock files of headful browsers.
            { name: 'tmp', mountPath: '/tmp' },
            // Where Chromium reads managed policy: the agent writes chrome_policy there
            // (agent/src/policy.ts); the fsGroup makes the emptyDir the agent's.
            { name: 'policies', mountPath: MANAGED_POLICY_DIR },
          ],
        },
      ],
      volumes: [
        { name: 'work', emptyDir: {} },
        { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '1Gi' } },
        { name: 'tmp', emptyDir: {} },
        { name: 'policies', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
      ],
    },
  };
}
