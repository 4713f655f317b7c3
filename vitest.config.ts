import { defineConfig } from 'vitest/config';

const UNIT = 'test/unit/**/*.test.ts';
const E2E = 'test/e2e/**/*.test.ts';
/** Files that need no fresh module graph: they share one per worker (importing pgward's modules costs more than many files' tests). */
const SHARED = ['test/security/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/contract/**/*.test.ts'];
const OWN_PROCESS = [
  // It watches for a deprecation warning, which fastify emits once a process: another file could have taken it.
  'test/unit/logger.unit.test.ts',
  // It bounds the wall time of refusals: no heap or timers left by earlier files.
  'test/security/analyzer-limits.e2e.test.ts',
];
const shared = { testTimeout: 30_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    // Vitest's default is one worker fewer than the cores: one, on the 2-core CI machine. Most files wait on
    // processes, sockets and databases (a whole run keeps the cores about half busy), so two run side by side.
    maxWorkers: 2,
    // Run once for the whole run (the root project's); the projects see what it provides.
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['verbose', './test/support/summary-reporter.ts'],
    projects: [
      // Each of these files restores what it changes (timers, env) and closes what it opens, so they share
      // one module graph per worker instead of a fresh process each.
      { test: { ...shared, name: 'unit', include: [UNIT], exclude: OWN_PROCESS, isolate: false } },
      { test: { ...shared, name: 'shared', include: SHARED, exclude: OWN_PROCESS, isolate: false } },
      // A worker of their own: the end-to-end files' browsers, processes and pools do not grow the other files' heap.
      { test: { ...shared, name: 'e2e', include: [E2E], exclude: OWN_PROCESS, isolate: false } },
      // Last and alone (a group of its own): one of them bounds wall time, which other files' load would stretch.
      { test: { ...shared, name: 'own-process', include: OWN_PROCESS, sequence: { groupOrder: 1 } } },
      // Any other test file gets a fresh process, as every file used to.
      { test: { ...shared, name: 'isolated', include: ['test/**/*.test.ts'], exclude: [UNIT, E2E, ...SHARED, 'test/bench/**', 'node_modules/**'] } },
    ],
  },
});
