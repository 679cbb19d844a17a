import { apiErrorCode } from '../../../lib/k8s-errors.js';
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease, type V1ObjectMeta } from '@kubernetes/client-node';
import type { LeaseRecord, LeaseStore, StoredLease } from './leader-election.js';

/** One coordination.k8s.io/v1 Lease, read and compare-and-swapped through the API server. */
export function kubernetesLeaseStore(config: KubeConfig, namespace: string, name: string): LeaseStore {
  const api = config.makeApiClient(CoordinationV1Api);
  // The labels and annotations last read, written back on update: a replace without them
  // would strip what others set (the chart renders this Lease, and Helm tracks it by them).
  let kept: Pick<V1ObjectMeta, 'labels' | 'annotations'> = {};
  const toLease = (record: LeaseRecord, resourceVersion?: string): V1Lease => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(resourceVersion ? { ...kept, resourceVersion } : {}) },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: new V1MicroTime(record.acquireTime),
      renewTime: new V1MicroTime(record.renewTime),
      leaseTransitions: record.leaseTransitions,
    },
  });
  return {
    async get(): Promise<StoredLease | undefined> {
      try {
        const lease = await api.readNamespacedLease({ name, namespace });
        const spec = lease.spec ?? {};
        kept = { ...(lease.metadata?.labels ? { labels: lease.metadata.labels } : {}), ...(lease.metadata?.annotations ? { annotations: lease.metadata.annotations } : {}) };
        return {
          resourceVersion: lease.metadata!.resourceVersion!,
          record: {
            holderIdentity: spec.holderIdentity ?? '',
            leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
            acquireTime: spec.acquireTime ? new Date(spec.acquireTime).toISOString() : new Date(0).toISOString(),
            renewTime: spec.renewTime ? new Date(spec.renewTime).toISOString() : new Date(0).toISOString(),
            leaseTransitions: spec.leaseTransitions ?? 0,
          },
        };
      } catch (error) {
        if (apiErrorCode(error) === 404) return undefined;
        throw error;
      }
    },
    async create(record: LeaseRecord): Promise<boolean> {
      try {
        await api.createNamespacedLease({ namespace, body: toLease(record) });
        return true;
      } catch (error) {
        if (apiErrorCode(error) === 409) return false;
        throw error;
      }
    },
    async update(record: LeaseRecord, resourceVersion: string): Promise<boolean> {
      try {
        await api.replaceNamespacedLease({ name, namespace, body: toLease(record, resourceVersion) });
        return true;
      } catch (error) {
        if (apiErrorCode(error) === 409) return false;
        throw error;
      }
    },
  };
}
