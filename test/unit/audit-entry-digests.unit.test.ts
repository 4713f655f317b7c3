import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EntryDigests } from '../../src/audit/entry-digests.js';
import { entryFromDecision } from '../../src/audit/entry.js';
import { leafHash } from '../../src/crypto/merkle.js';
import { StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { canonicalEntryBytes, entryHash } from '../support/audit-hashes.js';

const decided = StatementDecidedV1.schema.parse({
    event: 'query', project_id: 'prj_01jq3v5m8k2r7t9w4x6y0z1a2b', credential_id: null, session_id: 's1', source: 'wire', region: 'eu-west-1', client_ip: '',
    ts: '2025-01-31T12:00:00.000Z', sql: 'select 1', normalized_sql: 'select $1', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '',
    cache_status: 'none', rows_returned: '1', bytes_out: '10', latency_us: null, tables_read: [], tables_written: [], tables_blocked: [], parsed: true,
    proxy_id: 'px-1', boot_epoch: 0, seq: '1', approval_id: null,
});
const v1 = entryFromDecision(decided, 1);
/** An entry of a v2 decision: where it ran is part of what is hashed. */
const v2 = entryFromDecision(StatementDecided.schema.parse({ ...decided, cache_status: 'miss', ran_on: 'replica', replica_id: 'rep_01jq3v5m8k2r7t9w4x6y0z1a2b', upstream_region: 'eu-west-1' }), 1);

/** Any UTF-16 code units (lone surrogates and characters JSON escapes included), up to past the digests' first buffer. */
const text = fc.oneof(
  fc.string({ unit: fc.nat(0xffff).map((code) => String.fromCharCode(code)), maxLength: 60 }),
  fc.string({ unit: 'grapheme', minLength: 1_000, maxLength: 3_000 }),
);

describe('entry digests over one reusable buffer', () => {
  it('are entryHash and leafHash of the canonical bytes, keyed or not, entry after entry, loaded as the entry or as its canonical bytes (past the first buffer too)', () => {
    const digests = new EntryDigests();
    fc.assert(
      fc.property(
        fc.constantFrom(v1, v2), text, text, fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.option(fc.uint8Array({ minLength: 32, maxLength: 32 }), { nil: undefined }), fc.boolean(),
        (base, sql, reason, prev, key, asBytes) => {
          const entry = { ...base, sql, reason, key_id: key ? 'k1' : null, prev_hash: '', entry_hash: '' };
          const prevHash = Buffer.from(prev).toString('hex');
          const hmacKey = key && Buffer.from(key);
          const canonical = canonicalEntryBytes(entry);
          if (asBytes) digests.loadBytes(canonical);
          else digests.load(entry);
          expect(digests.entryHash(prevHash, hmacKey)).toBe(entryHash(prevHash, canonical, hmacKey));
          expect(Buffer.from(digests.leafDigest(), 'latin1')).toEqual(leafHash(canonical));
        },
      ),
      { numRuns: 1_000 },
    );
  });
});
