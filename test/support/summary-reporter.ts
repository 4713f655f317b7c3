import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest files the summary names: where CI's time goes, run after run. */
const SLOWEST_SHOWN = 15;

/**
 * Ends the run with the slowest files (import and tests, in seconds) and the plain closing line
 * `N passed, N failed, N skipped` that CI reads.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed' || state === 'failed' || state === 'skipped') counts[state]++;
      }
    }
    const timed = testModules.map((module) => {
      const { collectDuration, duration } = module.diagnostic();
      return { file: module.relativeModuleId, seconds: (collectDuration + duration) / 1000 };
    });
    const slowest = timed.sort((a, b) => b.seconds - a.seconds).slice(0, SLOWEST_SHOWN);
    if (slowest.length > 0) {
      console.log(`\nslowest files (import + tests):`);
      for (const { file, seconds } of slowest) console.log(`${seconds.toFixed(1).padStart(7)} s  ${file}`);
    }
    console.log(`\ntests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  }
}
