import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { auditProjection, auditStream, prepareStreamEvents } from '../../projections/audit.js';
import { recordingTx } from '../support/recording-tx.js';
import type { HmacKeyring } from '../../src/audit/chain.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { RecordedEvent } from '../../src/store/port.js';
import { decision } from '../support/decisions.js';

const PROJECT = 'prj_preparedentries000000000000';
const keyrings: HmacKeyring[] = [{ keys: new Map() }, { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 1)]]) }];

/** Decisions of one project whose counts fit an entry (at most 2^53 - 1). */
const entryDecision = fc
  .tuple(decision, fc.maxSafeNat(), fc.maxSafeNat(), fc.maxSafeNat(), fc.constantFrom(null, -0, 0, 7))
  .map(([d, rows, bytes, seq, latency]) => ({ ...d, project_id: PROJECT, rows_returned: String(rows), bytes_out: String(bytes), seq: d.seq === null ? null : String(seq), latency_us: d.latency_us === null ? null : (latency ?? d.latency_us) }));

/** Events appended at revisions from `first` on, as ingest hands them over, and as the store returns them. */
function appended(decisions: readonly StatementDecided[], first: number) {
  const handed = decisions.map((d, i) => ({ ...encodeEvent(StatementDecided, d, { event_id: `00000000-0000-4000-8000-${String(first + i).padStart(12, '0')}`, correlation_id: 'ingest', actor: 'ingest', at: d.ts }), decision: d }));
  const recorded: RecordedEvent[] = handed.map(({ id, type, data, metadata }, i) => ({ id, type, data: Buffer.from(data), metadata, stream: auditStream(PROJECT), revision: first + i, position: BigInt(first + i) }));
  return { handed, recorded };
}

function handOver(memo: PreparedEntries, handed: ReturnType<typeof appended>['handed'], first: number, keyring: HmacKeyring): void {
  prepareStreamEvents(handed, first, keyring).forEach((entry, i) => entry && memo.put(auditStream(PROJECT), handed[i]!, first + i, entry));
}

/** Every statement, parameter and copied row the audit projection sends for `events`, as text (-0 and 0 are both written 0). */
async function writes(events: readonly RecordedEvent[], keyring: HmacKeyring, memo?: PreparedEntries): Promise<string> {
  const { tx, sent } = recordingTx();
  await (await auditProjection(keyring, memo).prepare!(events))(tx);
  return JSON.stringify(sent);
}

describe('entries handed from ingest to the audit projection', () => {
  it('make the projection write exactly what it writes from the stored bytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(entryDecision, { minLength: 1, maxLength: 5 }), fc.nat(1_000_000), fc.constantFrom(...keyrings), async (decisions, first, keyring) => {
        const { handed, recorded } = appended(decisions, first);
        const probe = new PreparedEntries();
        handOver(probe, handed, first, keyring);
        expect(recorded.every((event) => probe.take(event, keyring) !== undefined)).toBe(true);
        const memo = new PreparedEntries();
        handOver(memo, handed, first, keyring);
        expect(await writes(recorded, keyring, memo)).toBe(await writes(recorded, keyring));
        expect(memo.size).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('are taken only for the very event they were prepared from, under the same key, and once', () => {
    const [d] = fc.sample(entryDecision, { numRuns: 1, seed: 5 });
    const { handed, recorded } = appended([d!], 3);
    const [event] = recorded;
    const flipped = Buffer.from(event!.data);
    flipped.writeUInt8(flipped.readUInt8(flipped.length - 2) ^ 1, flipped.length - 2);
    const others: [RecordedEvent, HmacKeyring][] = [
      [{ ...event!, data: flipped }, keyrings[0]!],
      [{ ...event!, revision: 4 }, keyrings[0]!],
      [{ ...event!, stream: auditStream('prj_another00000000000000000000') }, keyrings[0]!],
      [{ ...event!, type: 'AuditGapRecorded.v1' }, keyrings[0]!],
      [event!, keyrings[1]!],
      [event!, { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 2)]]) }],
    ];
    for (const [other, keyring] of others) {
      const memo = new PreparedEntries();
      handOver(memo, handed, 3, keyrings[0]!);
      expect(memo.take(other, keyring)).toBeUndefined();
      expect(memo.take(event!, keyrings[0]!)).toBeUndefined();
    }
    const memo = new PreparedEntries();
    handOver(memo, handed, 3, keyrings[0]!);
    expect(memo.take(event!, keyrings[0]!)?.bytes).toEqual(prepareStreamEvents(recorded, 3, keyrings[0]!)[0]!.bytes);
    expect(memo.take(event!, keyrings[0]!)).toBeUndefined();
  });

  it('drop the oldest beyond their capacity', () => {
    const decisions = fc.sample(entryDecision, { numRuns: 3, seed: 9 });
    const { handed, recorded } = appended(decisions, 0);
    const memo = new PreparedEntries(2);
    handOver(memo, handed, 0, keyrings[0]!);
    expect(memo.size).toBe(2);
    expect(memo.take(recorded[0]!, keyrings[0]!)).toBeUndefined();
    expect(memo.take(recorded[1]!, keyrings[0]!)).toBeDefined();
    expect(memo.take(recorded[2]!, keyrings[0]!)).toBeDefined();
  });

  it('have an appender wait for room while half their capacity waits and the projection takes them', async () => {
    const decisions = fc.sample(entryDecision, { numRuns: 4, seed: 11 });
    const { handed, recorded } = appended(decisions, 0);
    const memo = new PreparedEntries(4);
    handOver(memo, handed, 0, keyrings[0]!);
    // The projection has found none yet: it may be a standby, and is not waited for.
    await memo.room();
    expect(memo.take(recorded[0]!, keyrings[0]!)).toBeDefined();
    let roomy = false;
    const waiting = memo.room().then(() => (roomy = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(roomy).toBe(false);
    const taking = performance.now();
    expect(memo.take(recorded[1]!, keyrings[0]!)).toBeDefined();
    expect(memo.take(recorded[2]!, keyrings[0]!)).toBeDefined();
    await waiting;
    expect(performance.now() - taking).toBeLessThan(500);
    expect(memo.size).toBe(1);
  });

  it('stop having an appender wait once the projection has found none of them for a second', async () => {
    const decisions = fc.sample(entryDecision, { numRuns: 3, seed: 13 });
    const { handed, recorded } = appended(decisions, 0);
    const memo = new PreparedEntries(4);
    handOver(memo, handed, 0, keyrings[0]!);
    expect(memo.take(recorded[0]!, keyrings[0]!)).toBeDefined();
    const started = performance.now();
    await memo.room();
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);
    expect(memo.size).toBe(2);
  });
});
