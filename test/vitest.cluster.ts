import { defineConfig } from 'vitest/config';

// Run through `make test-cluster` (scripts/cluster-test.sh): the cluster and vitest live in
// network/mount/PID namespaces of their own, and the global setup refuses to start elsewhere.
export default defineConfig({
  test: {
    name: 'cluster',
    include: ['test/cluster/**/*.test.ts'],
    // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy.
    globalSetup: ['test/cluster/support/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    maxWorkers: 2,
    reporters: ['default', ['json', { outputFile: '.test-results/cluster.json' }]],
  },
});
