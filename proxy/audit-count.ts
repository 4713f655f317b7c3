/**
 * The rule for the counts a decision records (rows_returned, bytes_out): an audit entry hashes them
 * as JSON numbers, exact up to 2^53 - 1 (Number.MAX_SAFE_INTEGER), so a count beyond that is
 * recorded as 2^53 - 1, meaning "at least this many". At a gigabyte a second, one statement takes
 * over a hundred days to return that many bytes. Without the cap, a count of 1e21 or more would be
 * written as `1e+21`, which the event schema refuses, and a count between would round.
 */
export function auditCount(count: number): number {
  return count <= Number.MAX_SAFE_INTEGER ? count : Number.MAX_SAFE_INTEGER;
}
