/**
 * When a failed delivery is tried again: exponential back-off with jitter. The n-th retry waits a
 * uniformly drawn time in [d/2, d], d = min(RETRY_CAP_MS, RETRY_BASE_MS · 2^(n−1)) (1 s, 2 s, 4 s, …,
 * then every hour at most). A message whose next try would fall past the horizon after its first
 * attempt is given up: it is marked failed, and so is its endpoint (docs/webhooks.md).
 */
export const RETRY_BASE_MS = 1_000;
export const RETRY_CAP_MS = 3_600_000;

export type Retry = { readonly kind: 'retry'; readonly at: Date } | { readonly kind: 'give_up' };

/**
 * What follows the `failures`-th failed attempt (1 for the first) of a message first tried at
 * `firstAttemptAt`, failing at `now`. `random` is in [0, 1).
 */
export function nextRetry(failures: number, firstAttemptAt: Date, now: Date, horizonMs: number, random: number): Retry {
  const ceiling = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** Math.min(failures - 1, 32));
  const delay = Math.round(ceiling / 2 + (ceiling / 2) * random);
  const at = new Date(now.getTime() + delay);
  return at.getTime() - firstAttemptAt.getTime() > horizonMs ? { kind: 'give_up' } : { kind: 'retry', at };
}
