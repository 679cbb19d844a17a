/**
 * What the kubelet does to a pod, observed from inside the container and from the host.
 *
 * Real here: kube-apiserver (ServiceAccount admission), kube-controller-manager (service
 * accounts, tokens, kube-root-ca.crt, deployments, endpoint slices), kube-scheduler, the kubelet
 * v1.36.3, containerd 1.6 with runc (real namespaces, cgroups, overlay root filesystems), the
 * CNI bridge, kube-proxy's iptables rules. Nothing is faked: the test image is a static Go
 * binary (test/cluster/image) that reports its uid, capabilities, env, cgroup limit and
 * filesystem writes over HTTP, and reaches the API server with its projected token.
 */
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { core, apps, freshNamespace, isReady, podGet, testContainer, waitForPod } from './support/pods.js';

describe('a pod on the real node', () => {
  it('runs with the spec applied: env from a Secret, emptyDir, read-only root, non-root uid, no capabilities, memory limit, readiness', async () => {
    const namespace = await freshNamespace();
    await core().createNamespacedSecret({ namespace, body: { metadata: { name: 'creds' }, stringData: { token: 's3cret-value' } } });
    const created = Date.now();
    await core().createNamespacedPod({
      namespace,
      body: {
        metadata: { name: 'locked' },
        spec: {
          automountServiceAccountToken: false,
          securityContext: { runAsUser: 10001, runAsGroup: 10001, runAsNonRoot: true },
          containers: [
            testContainer({
              env: [{ name: 'SECRET_VALUE', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } }],
              securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
              resources: { limits: { memory: '64Mi', cpu: '200m' }, requests: { memory: '32Mi', cpu: '50m' } },
              volumeMounts: [
                { name: 'scratch', mountPath: '/scratch' },
                { name: 'tmp', mountPath: '/tmp' },
              ],
              readinessProbe: { httpGet: { path: '/ready', port: 8080 }, periodSeconds: 1, failureThreshold: 1 },
            }),
          ],
          volumes: [
            { name: 'scratch', emptyDir: {} },
            { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
          ],
        },
      },
    });

    // Running but not Ready: /ready answers 503 until /tmp/ready exists.
    const running = await waitForPod(namespace, 'locked', (p) => p.status?.containerStatuses?.[0]?.state?.running !== undefined && !!p.status.podIP, 'running');
    const runningMs = Date.now() - created;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(isReady(await core().readNamespacedPod({ name: 'locked', namespace }))).toBe(false);
    const touched = Date.now();
    expect((await podGet(running, '/touch?path=/tmp/ready')).status).toBe(200);
    await waitForPod(namespace, 'locked', isReady, 'Ready after /tmp/ready', 15_000);
    console.log(`pod created → running ${runningMs} ms; readiness flipped ${Date.now() - touched} ms after the probe started passing`);

    const { json: me } = await podGet(running, '/whoami');
    expect(me.uid).toBe(10001);
    expect(me.gid).toBe(10001);
    expect(me.capEff).toBe('0000000000000000');
    expect(me.noNewPrivs).toBe('1');
    expect(me.secretValue).toBe('s3cret-value');
    expect(me.rootWrite).toMatch(/read-only file system/);
    expect(me.scratchWrite).toBe('ok');
    expect(me.hostname).toBe('locked');
    expect(me.memoryLimit).toBe(String(64 * 1024 * 1024));

    // The same limit seen from the host: the container's own memory cgroup under the kubelet's root.
    const containerId = running.status!.containerStatuses![0]!.containerID!.replace(/^containerd:\/\//, '');
    const podCgroups = path.join('/sys/fs/cgroup/memory', process.env.BROWSERPLANE_CLUSTER_CGROUP_ROOT!, 'kubepods', 'burstable', `pod${running.metadata!.uid}`);
    expect((await readdir(podCgroups)).includes(containerId)).toBe(true);
    expect(readFileSync(path.join(podCgroups, containerId, 'memory.limit_in_bytes'), 'utf8').trim()).toBe(String(64 * 1024 * 1024));
  });

  it('restarts a container whose liveness probe fails', async () => {
    const namespace = await freshNamespace();
    await core().createNamespacedPod({
      namespace,
      body: {
        metadata: { name: 'sickly' },
        spec: {
          automountServiceAccountToken: false,
          containers: [
            testContainer({
              env: [{ name: 'FAIL_LIVENESS_AFTER', value: '3' }],
              livenessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 1, failureThreshold: 2 },
            }),
          ],
          terminationGracePeriodSeconds: 2,
        },
      },
    });
    const pod = await waitForPod(namespace, 'sickly', (p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1, 'restarted', 60_000);
    expect(pod.status!.containerStatuses![0]!.lastState?.terminated).toBeDefined();
    const events = await core().listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=sickly' });
    expect(events.items.some((e) => e.reason === 'Unhealthy' && /Liveness probe failed/.test(e.message ?? ''))).toBe(true);
  });

  it('sends SIGTERM on delete and the pod is gone within its grace period', async () => {
    const namespace = await freshNamespace();
    const { sharedDir } = inject('cluster');
    const marker = path.join(sharedDir, `${namespace}-term`);
    await core().createNamespacedPod({
      namespace,
      body: {
        metadata: { name: 'graceful' },
        spec: {
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 10,
          containers: [
            testContainer({
              env: [
                { name: 'TERM_MARKER', value: `/shared/${namespace}-term` },
                { name: 'TERM_DELAY_MS', value: '500' },
              ],
              volumeMounts: [{ name: 'shared', mountPath: '/shared' }],
            }),
          ],
          volumes: [{ name: 'shared', hostPath: { path: sharedDir, type: 'Directory' } }],
        },
      },
    });
    await waitForPod(namespace, 'graceful', (p) => p.status?.phase === 'Running', 'running');
    const deleted = Date.now();
    await core().deleteNamespacedPod({ name: 'graceful', namespace });
    await eventually(() => Promise.resolve(existsSync(marker)), { timeoutMs: 10_000, intervalMs: 100, what: 'SIGTERM marker', retryErrors: true });
    expect(readFileSync(marker, 'utf8')).toMatch(/^SIGTERM \d+/);
    await eventually(
      async () => {
        try {
          await core().readNamespacedPod({ name: 'graceful', namespace });
          return false;
        } catch (error) {
          return (error as { code?: number }).code === 404;
        }
      },
      { timeoutMs: 12_000, intervalMs: 250, what: 'pod gone', retryErrors: true },
    );
    const goneMs = Date.now() - deleted;
    console.log(`delete → pod gone ${goneMs} ms (grace 10 s, the container exits 500 ms after SIGTERM)`);
    expect(goneMs).toBeLessThan(10_000);
  });
});

describe('Services through kube-proxy', () => {
  it('a ClusterIP Service reaches a Deployment pod from another pod and from the test process', async () => {
    const namespace = await freshNamespace();
    await apps().createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [testContainer({ readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 1 } })] },
          },
        },
      },
    });
    const service = await core().createNamespacedService({
      namespace,
      body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] } },
    });
    const clusterIp = service.spec!.clusterIP!;
    expect(clusterIp).toMatch(/^10\.96\.0\./);
    await core().createNamespacedPod({ namespace, body: { metadata: { name: 'client' }, spec: { containers: [testContainer()] } } });
    const client = await waitForPod(namespace, 'client', isReady, 'Ready');

    // From the test process: nat OUTPUT → KUBE-SERVICES → the pod.
    const fromTest = await eventually(
      async () => {
        const response = await fetch(`http://${clusterIp}/whoami`, { signal: AbortSignal.timeout(2000) });
        return response.ok ? ((await response.json()) as { hostname: string }) : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'Service from the test process', retryErrors: true },
    );
    expect(fromTest.hostname).toMatch(/^web-/);

    // From another pod: PREROUTING on the node → the pod.
    const fromPod = await podGet(client, `/fetch?url=${encodeURIComponent(`http://${clusterIp}/whoami`)}`);
    expect(fromPod.json.status).toBe(200);
    expect((JSON.parse(fromPod.json.body as string) as { hostname: string }).hostname).toBe(fromTest.hostname);
  });

  it('a pod reaches the API server through the kubernetes Service with its projected ServiceAccount token', async () => {
    const namespace = await freshNamespace();
    const created = Date.now();
    await core().createNamespacedPod({ namespace, body: { metadata: { name: 'incluster' }, spec: { containers: [testContainer()] } } });
    const pod = await waitForPod(namespace, 'incluster', isReady, 'Ready');
    console.log(`pod created → Ready ${Date.now() - created} ms (no probes; scheduling, sandbox, CNI, token volume, container start)`);
    expect(pod.spec!.volumes!.some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken))).toBe(true);
    const { json } = await podGet(pod, '/kube');
    expect(json.url).toBe('https://10.96.0.1:443/apis/authentication.k8s.io/v1/selfsubjectreviews');
    expect(json.status).toBe(201);
    const review = json.body as { status: { userInfo: { username: string; extra?: Record<string, string[]> } } };
    expect(review.status.userInfo.username).toBe(`system:serviceaccount:${namespace}:default`);
    // A bound token: the API server names the pod it was issued for.
    expect(review.status.userInfo.extra?.['authentication.kubernetes.io/pod-name']).toEqual(['incluster']);
  });
});
