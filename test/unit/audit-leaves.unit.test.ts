import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { leavesOf } from '../../projections/audit.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { decision } from '../support/decisions.js';

const metadata = { event_id: '00000000-0000-4000-8000-000000000001', correlation_id: 'test', actor: 'ingest', at: '2025-01-31T12:00:00.000Z' };
/** The leaves, or the error that refuses them (a count beyond 2^53 - 1 cannot be an entry). */
function outcome(leaves: () => Buffer[]): Buffer[] | Error {
  try {
    return leaves();
  } catch (error) {
    return error as Error;
  }
}

/** Decisions whose counts fit an entry (at most 2^53 - 1). */
const entryDecision = fc
  .tuple(decision, fc.maxSafeNat(), fc.maxSafeNat(), fc.maxSafeNat())
  .map(([d, rows, bytes, seq]) => ({ ...d, rows_returned: String(rows), bytes_out: String(bytes), seq: d.seq === null ? null : String(seq) }));

const keyrings = [{ keys: new Map() }, { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 1)]]) }];

describe('Merkle leaves of appended decisions', () => {
  it('are the same from the decision an event was encoded from as from its payload bytes', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(entryDecision, decision), { minLength: 1, maxLength: 5 }), fc.nat(1_000_000), fc.constantFrom(...keyrings), (decisions, firstRevision, keyring) => {
        const events = decisions.map((d) => ({ ...encodeEvent(StatementDecided, d, metadata), decision: d }));
        const fromBytes = outcome(() => leavesOf(events.map(({ type, data }) => ({ type, data })), firstRevision, keyring));
        expect(outcome(() => leavesOf(events, firstRevision, keyring))).toEqual(fromBytes);
      }),
      { numRuns: 300 },
    );
  });

  it('are the same for a latency of -0, which the payload bytes write as 0', () => {
    const d = { ...fc.sample(entryDecision, { numRuns: 1, seed: 3 })[0]!, latency_us: -0 };
    const event = encodeEvent(StatementDecided, d, metadata);
    const leaves = leavesOf([event], 0, keyrings[0]!);
    expect(leaves).toHaveLength(1);
    expect(leavesOf([{ ...event, decision: d }], 0, keyrings[0]!)).toEqual(leaves);
  });
});
