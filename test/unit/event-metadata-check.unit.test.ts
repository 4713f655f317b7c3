import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventMetadata, isEventMetadata } from '../../src/events/envelope.js';
import { mutatedRecords } from '../support/mutations.js';

const FIELDS = Object.keys(EventMetadata.shape);

/** Values at the edges of the members' formats and bounds, and of other types. */
const EDGES: unknown[] = [
  '', 'a', ' ', 'x'.repeat(200), 'x'.repeat(201), '\ud800', 'é', 'ingest',
  '00000000-0000-4000-8000-000000000001', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF',
  '00000000-0000-9000-8000-000000000001', '00000000-0000-4000-c000-000000000001', '00000000-0000-4000-8000-00000000000', '00000000-0000-4000-8000-0000000000001',
  '00000000000040008000000000000001', '{00000000-0000-4000-8000-000000000001}',
  '2026-01-01T00:00:00.000Z', '2024-02-29T23:59:59.999Z', '2026-02-29T00:00:00.000Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.0000Z', '2026-01-01T24:00:00.000Z',
  '2026-01-01T00:00:00.000+00:00', '2026-01-01T00:00:00.000', '2026-01-01 00:00:00.000Z',
  0, 1, Number.NaN, 1n, null, undefined, true, {}, [], ['ingest'],
];

const metadata = fc.record({
  event_id: fc.uuid(),
  correlation_id: fc.string({ minLength: 1, maxLength: 200 }),
  actor: fc.string({ minLength: 1, maxLength: 200 }),
  at: fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString()),
});

/** Metadata with up to three members replaced by edge values, deleted, or joined by an unknown member. */
const mutated = mutatedRecords(metadata, FIELDS, EDGES);

function expectSameAsSchema(value: unknown): void {
  const parsed = EventMetadata.safeParse(value);
  expect(isEventMetadata(value)).toBe(parsed.success);
  if (parsed.success) expect(parsed.data).toEqual(value);
}

describe('the hand-written EventMetadata check', () => {
  it('accepts every metadata the schema accepts, and the schema gives it back unchanged', () => {
    fc.assert(fc.property(metadata, expectSameAsSchema), { numRuns: 1_000 });
  });

  it('accepts exactly what the schema accepts for metadata with edited, missing or unknown members', () => {
    fc.assert(fc.property(mutated, expectSameAsSchema), { numRuns: 5_000 });
  });

  it('accepts exactly what the schema accepts for any JSON value', () => {
    fc.assert(fc.property(fc.jsonValue(), expectSameAsSchema), { numRuns: 500 });
  });
});
