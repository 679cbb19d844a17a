import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'images',
    include: ['test/images/**/*.test.ts'],
    // Builds the images when they changed (make test-images has built them already), and
    // starts the Kubernetes tier's kube-apiserver + etcd for the api/operator image.
    globalSetup: ['test/images/support/global-setup.ts', 'test/k8s/support/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // One container at a time: Chromium in a container and a kube-apiserver share 2 cores.
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ['default', ['json', { outputFile: '.test-results/images.json' }]],
  },
});
