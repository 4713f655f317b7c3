/** When a worker that exited unexpectedly is started again. */
export interface BackoffPolicy {
  /** The delay before the first restart. */
  readonly initialMs: number;
  /** The delay never grows beyond this. */
  readonly maxMs: number;
  /** A worker that ran this long before exiting starts the series again at initialMs. */
  readonly resetAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 250, maxMs: 30_000, resetAfterMs: 60_000 };

/**
 * The delay before restart number `failures` (1 for the first exit after a healthy run), doubling
 * from initialMs up to maxMs.
 */
export function restartDelay(policy: BackoffPolicy, failures: number): number {
  if (!Number.isInteger(failures) || failures < 1) throw new RangeError(`failures must be an integer >= 1, got ${failures}`);
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(failures - 1, 30));
}

/** The failure count after an exit of a worker that had run `uptimeMs`, given the count before. */
export function failuresAfterExit(policy: BackoffPolicy, previous: number, uptimeMs: number): number {
  return uptimeMs >= policy.resetAfterMs ? 1 : previous + 1;
}
