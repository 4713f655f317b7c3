import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { canonicalEntryText, type CanonicalEntryInput } from '../../src/audit/canonical-entry.js';
import { AuditVerifyError, DigestPool } from '../../src/audit/digest-pool.js';
import { RecordedDigests, writeDigestRecords, type RecordedEntry } from '../../src/audit/digest-records.js';
import { AuditLogEntry, type AuditEntry } from '../../src/audit/entry.js';
import { EntryDigests } from '../../src/audit/entry-digests.js';
import { carriedByWire, decodeEntries, encodeEntries } from '../../src/audit/entry-wire.js';
import { verifyChainParallel } from '../../src/audit/verify.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { chain, hmacKeys as keys, projectId } from '../support/audit-chains.js';
import { outcome, recordsOf, reshaped } from '../support/canonical-records.js';

const FIELDS = Object.keys(AuditLogEntry.shape).filter((key) => key !== 'prev_hash' && key !== 'entry_hash');
const HASHES = ['prev_hash', 'entry_hash'];
const canonical = (entry: object) => outcome(() => canonicalEntryText(entry as CanonicalEntryInput));

describe('entries on the wire to a digest worker', () => {
  it('arrive with the canonical text and prev_hash they left with, or not at all', () => {
    fc.assert(
      fc.property(fc.oneof(recordsOf(FIELDS, HASHES), reshaped(recordsOf(FIELDS, HASHES), FIELDS)), (record) => {
        const decoded = decodeEntries(encodeEntries([record as RecordedEntry]))[0] ?? null;
        expect(decoded === null).toBe(!carriedByWire(record as RecordedEntry));
        if (decoded === null) return;
        expect(canonical(decoded)).toEqual(canonical(record));
        expect(typeof canonical(record)).toBe('string');
        expect(decoded.prev_hash).toBe(record.prev_hash);
      }),
      { numRuns: 2_000 },
    );
  });

  it('carry stored entries, and leave to the calling thread what JSON would change or reading throws', () => {
    const [entry] = chain(1, true) as [AuditEntry];
    expect(carriedByWire(entry)).toBe(true);
    const odd: object[] = [
      { ...entry, latency_ms: Number.NaN },
      { ...entry, latency_ms: Number.POSITIVE_INFINITY },
      { ...entry, sql: undefined },
      { ...entry, tables_read: [undefined] },
      { ...entry, tables_read: Array.from({ length: 2 }) },
      { ...entry, gap: new Date(0) },
      { ...entry, bytes_out: 10n },
      { ...entry, extra: 1 },
      { ...entry, prev_hash: undefined },
      Object.defineProperty({ ...entry }, 'sql', { enumerable: true, get: () => { throw new Error('no'); } }),
    ];
    for (const record of odd) expect(carriedByWire(record as RecordedEntry)).toBe(false);
    expect(decodeEntries(encodeEntries(odd as RecordedEntry[]))).toEqual(odd.map(() => null));
  });
});

describe('recorded digests', () => {
  it('give the walk what EntryDigests computes, recorded or not, found or not', () => {
    const entries = chain(6, true);
    const broken = { ...entries[2]!, prev_hash: 'not hex' };
    const unknownKey = { ...entries[3]!, key_id: 'k9' };
    const all = [entries[0]!, entries[1]!, broken, unknownKey, entries[4]!];
    const recorded = new RecordedDigests();
    recorded.push({ entries: all.slice(0, 2), records: writeDigestRecords(all.slice(0, 2), keys, new EntryDigests()) });
    recorded.push({ entries: all.slice(2), records: writeDigestRecords([all[2]!, null, all[4]!], keys, new EntryDigests()) });
    const reference = new EntryDigests();
    for (const entry of [...all, entries[5]!]) {
      recorded.load(entry);
      reference.load(entry);
      // In the walk's order, and only over a prev_hash of 64 hex digits, as the walk asks.
      const key = keys.get(entry.key_id ?? '');
      if (entry !== broken) expect(recorded.entryHash(entry.prev_hash, key)).toBe(reference.entryHash(entry.prev_hash, key));
      expect(recorded.leafDigest()).toBe(reference.leafDigest());
    }
  });
});

describe('a digest worker that fails', () => {
  const pools: DigestPool[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.close()));
  });

  it('fails the verification with AuditVerifyError, never a report', async () => {
    class GarblingPool extends DigestPool {
      override digest(_entries: string, hmacKeys: ReadonlyMap<string, Uint8Array>): Promise<Buffer> {
        return super.digest('not JSON', hmacKeys);
      }
    }
    const pool = new GarblingPool(1);
    pools.push(pool);
    pool.start();
    await vi.waitFor(() => expect(pool.free).toBeGreaterThan(0), { timeout: 20_000, interval: 20 });
    const anchor = loadAnchorKey(generateAnchorKey());
    const input = { projectId, entries: chain(40, true), checkpoints: [], hmacKeys: keys, anchorPublicKey: anchor.publicKey, verifiedAt: '2025-02-01T00:00:00.000Z' };
    const failure = verifyChainParallel(input, { pool, minEntries: 0, chunkEntries: 1 });
    await expect(failure).rejects.toThrow(AuditVerifyError);
    await expect(failure).rejects.toMatchObject({ code: 'WORKER_FAILED' });
  });
});

describe('the shared digest workers', () => {
  it('let the process end once a verification is done', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'test/support/verify-in-parallel.ts', '5000'], { encoding: 'utf8', timeout: 60_000 });
    expect(run.error).toBeUndefined();
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, verified_count: 5000, keyed_count: 5000 });
  });
});
