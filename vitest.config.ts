import { defineConfig } from 'vitest/config';

// Test tiers by suffix: *.unit.spec.ts are pure; *.int.spec.ts and *.e2e.spec.ts talk to the real
// services started by scripts/services (npm test starts them and exports their URLs).
export default defineConfig({
  test: {
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.unit.spec.ts'] } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.int.spec.ts', 'test/**/*.e2e.spec.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
    pool: 'forks',
    reporters: ['default'],
  },
});
