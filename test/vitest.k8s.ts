import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'k8s',
    include: ['test/k8s/**/*.test.ts'],
    // Starts etcd and kube-apiserver once (building them first on a fresh machine), and
    // one Postgres for the tests that run the API or a reconciler against it.
    globalSetup: ['test/k8s/support/global-setup.ts', 'test/support/postgres-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    reporters: ['default', ['json', { outputFile: '.test-results/k8s.json' }]],
  },
});
