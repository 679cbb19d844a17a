import { randomBytes } from 'node:crypto';
import { AppsV1Api, CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { eventually } from '../../support/eventually.js';
import { clusterKubeConfig, TEST_IMAGE } from './cluster.js';

export const core = (): CoreV1Api => clusterKubeConfig(inject('cluster')).makeApiClient(CoreV1Api);
export const apps = (): AppsV1Api => clusterKubeConfig(inject('cluster')).makeApiClient(AppsV1Api);

/** A namespace of its own, once the serviceaccount controller made its `default` account (pods are refused before). */
export async function freshNamespace(prefix = 'node'): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  await core().createNamespace({ body: { metadata: { name } } });
  await eventually(() => core().readNamespacedServiceAccount({ name: 'default', namespace: name }), { timeoutMs: 30_000, intervalMs: 250, what: 'default service account', retryErrors: true });
  return name;
}

/** The test image's HTTP server as a container; override what a test needs. */
export function testContainer(overrides: Partial<V1Container> = {}): V1Container {
  return {
    name: 'box',
    image: TEST_IMAGE,
    imagePullPolicy: 'Never',
    ports: [{ containerPort: 8080, name: 'http' }],
    ...overrides,
  };
}

export function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

export async function waitForPod(namespace: string, name: string, check: (pod: V1Pod) => boolean, what: string, timeoutMs = 60_000): Promise<V1Pod> {
  return eventually(
    async () => {
      const pod = await core().readNamespacedPod({ name, namespace });
      return check(pod) ? pod : undefined;
    },
    { timeoutMs: timeoutMs, intervalMs: 250, what: `pod ${name}: ${what}`, retryErrors: true },
  );
}

/** GET http://<pod IP>:8080<path> from the test process (pod IPs route in the cluster's network namespace). */
export async function podGet(pod: V1Pod, path: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`http://${pod.status!.podIP}:8080${path}`, { signal: AbortSignal.timeout(5000) });
  const text = await response.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { text };
  }
  return { status: response.status, json };
}
