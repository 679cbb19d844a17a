import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'unit',
    include: ['test/unit/**/*.test.ts'],
    environment: 'node',
    reporters: ['default', ['json', { outputFile: '.test-results/unit.json' }]],
  },
});
