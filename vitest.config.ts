import { defineConfig } from 'vitest/config';

const UNIT = 'test/unit/**/*.test.ts';
// It watches for a deprecation warning, which fastify emits once a process: another file could have taken it.
const UNIT_OWN_PROCESS = ['test/unit/logger.unit.test.ts'];
const shared = { testTimeout: 30_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    // Run once for the whole run (the root project's); the projects see what it provides.
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['verbose', './test/support/summary-reporter.ts'],
    projects: [
      // Each unit file restores what it changes (timers, env), so they share one module graph per worker
      // instead of a fresh process each: importing pgward's modules costs more than most unit files' tests.
      { test: { ...shared, name: 'unit', include: [UNIT], exclude: UNIT_OWN_PROCESS, isolate: false } },
      { test: { ...shared, name: 'isolated', include: ['test/**/*.test.ts'], exclude: [UNIT, 'test/bench/**', 'node_modules/**'] } },
      { test: { ...shared, name: 'unit-isolated', include: UNIT_OWN_PROCESS } },
    ],
  },
});
