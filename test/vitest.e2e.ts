import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'e2e',
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file starts its own service with its own embedded Postgres; two at a time fit
    // the two cores.
    maxWorkers: 2,
    reporters: ['default', ['json', { outputFile: '.test-results/e2e.json' }]],
  },
});
