import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'faults',
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    // Fault tests kill processes and restart Postgres under load: one file at a time, so
    // one test's load never starves another's recovery.
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ['default', ['json', { outputFile: '.test-results/faults.json' }]],
  },
});
