/** Ingest's events of a bus message's decisions: each as encodeParsed writes it with its own metadata, though the metadata is checked and written once a message. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decisionDefinition } from '../../src/events/audit.js';
import { encodeParsed } from '../../src/events/envelope.js';
import { PROXY_ID_PATTERN, type DecisionRecord } from '../../src/events/audit.js';
import { EventMetadata } from '../../src/events/envelope.js';
import { decisionEventId, decisionEvents, decisionKey, ingestMetadata, legacyDecisionEventId } from '../../src/ingest/decision-event.js';
import { decision, decisionV1 } from '../support/decisions.js';

const at = fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString());

describe('decisionEvents', () => {
  it('encode each decision of a message with the metadata of its own key', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(decision, decisionV1), { maxLength: 8 }), at, (decisions, receivedAt) => {
        const metadata = (d: DecisionRecord): EventMetadata => ({ event_id: decisionEventId(d.proxy_id, d.boot_epoch, d.seq), correlation_id: 'ingest', actor: 'ingest', at: receivedAt });
        const expected = decisions.map((d) => ({ ...encodeParsed(decisionDefinition(d), d, metadata(d)), decision: d }));
        expect(decisionEvents(decisions, receivedAt, 'sequential')).toEqual(expected);
        // In a store of hashed ids.
        const legacy = decisions.map((d) => ({ ...encodeParsed(decisionDefinition(d), d, ingestMetadata(decisionKey(d.proxy_id, d.boot_epoch, d.seq), receivedAt)), decision: d }));
        expect(decisionEvents(decisions, receivedAt, 'hashed')).toEqual(legacy);
      }),
      { numRuns: 300 },
    );
  });

  it('refuse a time the metadata schema does not take, as encodeParsed does', () => {
    const [d] = fc.sample(decision, { numRuns: 1, seed: 3 });
    expect(() => decisionEvents([d!, d!], '2026-01-01T00:00:00Z', 'sequential')).toThrow();
  });
});

const boot = fc.record({ proxy: fc.stringMatching(PROXY_ID_PATTERN), epoch: fc.nat() });
const seq = fc.bigInt({ min: 0n, max: (1n << 48n) - 1n });
/** A UUID's 16 bytes in the order the store's uuid index compares them. */
const bytesOf = (id: string): string => id.replaceAll('-', '');

describe('decisionEventId', () => {
  it('is a version 8 UUID the metadata schema takes, never the hashed form, and orders one boot’s decisions by sequence', () => {
    fc.assert(
      fc.property(boot, seq, seq, ({ proxy, epoch }, a, b) => {
        const [idA, idB] = [decisionEventId(proxy, epoch, a), decisionEventId(proxy, epoch, String(b))];
        expect(EventMetadata.shape.event_id.safeParse(idA).success).toBe(true);
        expect(idA[14]).toBe('8');
        expect('89ab').toContain(idA[19]);
        expect(idA).not.toBe(legacyDecisionEventId(proxy, epoch, a));
        const [x, y] = [bytesOf(idA), bytesOf(idB)];
        expect(x < y ? -1 : x > y ? 1 : 0).toBe(a === b ? 0 : a < b ? -1 : 1);
        // One boot's ids share their first ten bytes; the sequence is the last six.
        expect(bytesOf(idA).slice(0, 20)).toBe(bytesOf(idB).slice(0, 20));
        expect(BigInt(`0x${bytesOf(idA).slice(20)}`)).toBe(a);
      }),
      { numRuns: 500 },
    );
  });

  it('differs between boots of a proxy and between proxies', () => {
    fc.assert(
      fc.property(boot, boot, seq, (x, y, n) => {
        fc.pre(x.proxy !== y.proxy || x.epoch !== y.epoch);
        expect(decisionEventId(x.proxy, x.epoch, n)).not.toBe(decisionEventId(y.proxy, y.epoch, n));
      }),
      { numRuns: 500 },
    );
  });

  it('is the hashed form for a decision without its proxy’s identity, and for a sequence past 48 bits', () => {
    expect(decisionEventId(null, null, null)).toBe(legacyDecisionEventId(null, null, null));
    expect(decisionEventId('px-1', 1, 1n << 48n)).toBe(legacyDecisionEventId('px-1', 1, 1n << 48n));
    expect(decisionEventId('px-1', 1, '9223372036854775807')).toBe(legacyDecisionEventId('px-1', 1, '9223372036854775807'));
    expect(decisionEventId('px-1', 1, (1n << 48n) - 1n)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-ffffffffffff$/);
    expect(decisionEventId('px-1', 1, 0n)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-000000000000$/);
  });

  it('is derived as it was (stored ids must stay what they are)', () => {
    expect(decisionEventId('px-1', 1, 42n)).toBe('1e284a34-ab65-86b6-b0e6-00000000002a');
    expect(decisionEventId('px-1', 1, '43')).toBe('1e284a34-ab65-86b6-b0e6-00000000002b');
    expect(decisionEventId('px-1', 2, 42n)).toBe('2deb859b-ff4c-8760-8fb4-00000000002a');
  });
});
