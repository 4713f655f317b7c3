/** Ingest's events of a bus message's decisions: each as encodeParsed writes it with its own metadata, though the metadata is checked and written once a message. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decisionDefinition } from '../../src/events/audit.js';
import { encodeParsed } from '../../src/events/envelope.js';
import { decisionEvents, decisionKey, ingestMetadata } from '../../src/ingest/decision-event.js';
import { decision, decisionV1 } from '../support/decisions.js';

const at = fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }).map((d) => d.toISOString());

describe('decisionEvents', () => {
  it('encode each decision of a message with the metadata of its own key', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(decision, decisionV1), { maxLength: 8 }), at, (decisions, receivedAt) => {
        const expected = decisions.map((d) => ({
          ...encodeParsed(decisionDefinition(d), d, ingestMetadata(decisionKey(d.proxy_id, d.boot_epoch, d.seq), receivedAt)),
          decision: d,
        }));
        expect(decisionEvents(decisions, receivedAt)).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('refuse a time the metadata schema does not take, as encodeParsed does', () => {
    const [d] = fc.sample(decision, { numRuns: 1, seed: 3 });
    expect(() => decisionEvents([d!, d!], '2026-01-01T00:00:00Z')).toThrow();
  });
});
