/**
 * Sums of audit counts (rows, bytes) that stay exact past 2^53 - 1: a number while it is exact,
 * past that a bigint. A rounded sum would depend on how the entries were batched, and a rebuild
 * of the read model would differ.
 */
export type ExactSum = number | bigint;

export function addExact(sum: ExactSum, value: ExactSum): ExactSum {
  if (typeof sum === 'bigint' || typeof value === 'bigint') return BigInt(sum) + BigInt(value);
  const added = sum + value;
  return Number.isSafeInteger(added) ? added : BigInt(sum) + BigInt(value);
}

/** A count as stored (a decimal string): a number when exact, else a bigint. */
export function exactCount(text: string): ExactSum {
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : BigInt(text);
}
