import { createHash, createHmac, generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AuditChainError, chainEntry, parseHmacKeyring, type AuditChainErrorCode, type HmacKeyring } from '../../src/audit/chain.js';
import { recordCheckpoint, signAuditCheckpoint } from '../../src/audit/checkpoints.js';
import {
  auditEntryId,
  AuditEntryError,
  AuditLogEntry,
  entryFromDecision,
  entryFromGap,
  genesisHash,
  type AuditEntry,
} from '../../src/audit/entry.js';
import { DigestPool } from '../../src/audit/digest-pool.js';
import { AuditChainVerification, verifyChain, verifyChainPages, verifyChainParallel, type AuditFailureReason, type VerifyChainInput } from '../../src/audit/verify.js';
import { canonicalize } from '../../src/crypto/canonical-json.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { merkleRoot } from '../../src/crypto/merkle.js';
import { KeyringError } from '../../src/crypto/seal.js';
import { AuditEventKind, AuditGapRecorded, decodeDecision, StatementDecided, StatementDecidedV1, type AuditCheckpointSigned, type DecisionRecord, type Placement } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { chainEvents } from '../../projections/audit.js';
import { canonicalEntryBytes, entryHash } from '../support/audit-hashes.js';

const projectId = 'prj_01jq3v5m8k2r7t9w4x6y0z1a2b';
const otherProjectId = 'prj_01jq3v5m8k2r7t9w4x6y0z9z9z';
const verifiedAt = '2025-02-01T00:00:00.000Z';
const anchor = loadAnchorKey(generateAnchorKey());
const forger = generateKeyPairSync('ed25519').privateKey;
const keys: ReadonlyMap<string, Buffer> = new Map([
  ['k1', Buffer.alloc(32, 1)],
  ['k2', Buffer.alloc(32, 2)],
]);

// ---- fixtures ------------------------------------------------------------------------------

interface Variant {
  readonly event?: AuditEventKind;
  readonly sql?: string;
  readonly credential?: boolean;
  readonly latencyUs?: number | null;
  /** A StatementDecided v2 that ran as this says (the v1 decision's cache status adjusted to agree); v1 without it. */
  readonly placed?: Placement;
}

function decision(project: string, seq: number, variant: Variant = {}): DecisionRecord {
  const v1 = decisionV1(project, seq, variant);
  const { placed } = variant;
  if (!placed) return v1;
  const cache = placed.ran_on === null ? 'none' : placed.ran_on === 'cache' ? 'hit' : 'miss';
  return StatementDecided.schema.parse({ ...v1, cache_status: cache, ...placed });
}

function decisionV1(project: string, seq: number, variant: Variant): StatementDecidedV1 {
  return StatementDecidedV1.schema.parse({
    event: variant.event ?? 'query',
    project_id: project,
    credential_id: variant.credential === false ? null : 'agt_01jq3v5m8k2r7t9w4x6y0z1a2b',
    session_id: 'sess-1',
    source: 'wire',
    region: 'eu-west-1',
    client_ip: '10.0.0.1',
    ts: new Date(Date.UTC(2025, 0, 31, 12, 0, seq)).toISOString(),
    sql: variant.sql ?? `select * from t where id = ${seq}`,
    normalized_sql: 'select * from t where id = $1',
    query_hash: '0123456789abcdef',
    statement_kind: 'select',
    decision_rule: '',
    reason: '',
    cache_status: 'miss',
    rows_returned: String(seq),
    bytes_out: String(seq * 100),
    latency_us: variant.latencyUs === undefined ? 1500 + seq : variant.latencyUs,
    tables_read: ['public.t'],
    tables_written: [],
    tables_blocked: [],
    parsed: true,
    proxy_id: 'proxy-1',
    boot_epoch: 1,
    seq: String(seq),
    approval_id: 'apr_01jq3v5m8k2r7t9w4x6y0z1a2b',
  });
}

function gap(project: string, seq: number): AuditGapRecorded {
  return AuditGapRecorded.schema.parse({
    project_id: project,
    proxy_id: 'proxy-1',
    boot_epoch: 1,
    from_seq: String(seq * 10),
    to_seq: String(seq * 10 + 4),
    count: '5',
    reason: 'buffer_full',
    ts: new Date(Date.UTC(2025, 0, 31, 12, 0, seq)).toISOString(),
  });
}

interface ChainSpec {
  readonly size: number;
  /** Entries 1..legacy are legacy (imported without hashes). */
  readonly legacy?: number;
  /** First seq keyed with k1; unkeyed throughout when absent. */
  readonly keyedFrom?: number;
  /** First seq keyed with k2 instead. */
  readonly rotateAt?: number;
  /** Checkpoint interval; none when absent. */
  readonly every?: number;
  readonly project?: string;
  readonly gaps?: readonly number[];
  readonly variants?: readonly Variant[];
}

interface Trail {
  readonly entries: AuditEntry[];
  readonly checkpoints: AuditCheckpointSigned[];
}

function keyringAt(seq: number, spec: ChainSpec): HmacKeyring {
  if (spec.keyedFrom === undefined || seq < spec.keyedFrom) return { keys };
  return { current: spec.rotateAt !== undefined && seq >= spec.rotateAt ? 'k2' : 'k1', keys };
}

function isLegacyLike(entry: AuditEntry): boolean {
  return entry.key_id === null && entry.prev_hash === '' && entry.entry_hash === '';
}

/** A checkpoint of entries 1..size, computed the slow way (recursive Merkle definition). */
function checkpointOf(entries: readonly AuditEntry[], size: number, project = projectId, privateKey = anchor.privateKey): AuditCheckpointSigned {
  const covered = entries.slice(0, size);
  return signAuditCheckpoint(
    { origin: project, size, root: merkleRoot(covered.map(canonicalEntryBytes)), chainStartSeq: covered.filter(isLegacyLike).length + 1 },
    { keyId: 'anchor1', privateKey },
    verifiedAt,
  );
}

function build(spec: ChainSpec): Trail {
  const project = spec.project ?? projectId;
  const entries: AuditEntry[] = [];
  const checkpoints: AuditCheckpointSigned[] = [];
  for (let seq = 1; seq <= spec.size; seq += 1) {
    const content = spec.gaps?.includes(seq) ? entryFromGap(gap(project, seq), seq) : entryFromDecision(decision(project, seq, spec.variants?.[seq - 1]), seq);
    entries.push(seq <= (spec.legacy ?? 0) ? { ...content, key_id: null, prev_hash: '', entry_hash: '' } : chainEntry(entries.at(-1), content, keyringAt(seq, spec), project));
    if (spec.every && seq % spec.every === 0) checkpoints.push(checkpointOf(entries, seq, project));
  }
  return { entries, checkpoints };
}

/** Every verification of this file with its report, which the last test repeats in pages. */
const verifications: { readonly input: VerifyChainInput; readonly report: AuditChainVerification }[] = [];

function verify(trail: Trail, options: Partial<VerifyChainInput> = {}): AuditChainVerification {
  const input = { projectId, entries: trail.entries, checkpoints: trail.checkpoints, hmacKeys: keys, anchorPublicKey: anchor.publicKey, verifiedAt, ...options };
  const report = verifyChain(input);
  verifications.push({ input, report });
  return report;
}

interface Counts {
  readonly verified: number;
  readonly keyed?: number;
  readonly unchained?: number;
  readonly start?: number | null;
  readonly end?: number | null;
}

/** The exact expected report; start and end default to a contiguous chained run after the legacy prefix. */
function outcome(firstBrokenSeq: number | null, reason: AuditFailureReason | null, counts: Counts): AuditChainVerification {
  const unchained = counts.unchained ?? 0;
  const start = counts.start !== undefined ? counts.start : counts.verified > 0 ? unchained + 1 : null;
  return {
    ok: reason === null,
    verified_count: counts.verified,
    keyed_count: counts.keyed ?? 0,
    unchained_count: unchained,
    chain_start_seq: start,
    chain_end_seq: counts.end !== undefined ? counts.end : start === null ? null : start + counts.verified - 1,
    first_broken_seq: firstBrokenSeq,
    failure_reason: reason,
    verified_at: verifiedAt,
  };
}

// ---- tampering -----------------------------------------------------------------------------

function at(entries: readonly AuditEntry[], seq: number): AuditEntry {
  return entries.find((e) => e.seq === seq)!;
}

function edit(entries: readonly AuditEntry[], seq: number, change: Partial<AuditEntry>): AuditEntry[] {
  return entries.map((e) => (e.seq === seq ? { ...e, ...change } : e));
}

function without(entries: readonly AuditEntry[], ...seqs: number[]): AuditEntry[] {
  return entries.filter((e) => !seqs.includes(e.seq));
}

/**
 * Recomputes prev_hash and entry_hash of the entries at array positions first..last in array
 * order, the way someone holding `hmac` (but never the anchor key) would; legacy-looking entries
 * are left alone.
 */
function rehash(entries: readonly AuditEntry[], first: number, last = entries.length - 1, hmac: ReadonlyMap<string, Buffer> = keys): AuditEntry[] {
  const out = [...entries];
  for (let i = first; i <= last; i += 1) {
    const entry = out[i]!;
    if (isLegacyLike(entry)) continue;
    const before = out[i - 1];
    const prevHash = before?.entry_hash || genesisHash(entry.project_id);
    out[i] = { ...entry, prev_hash: prevHash, entry_hash: entryHash(prevHash, canonicalEntryBytes(entry), entry.key_id === null ? undefined : hmac.get(entry.key_id)) };
  }
  return out;
}

function indexOf(entries: readonly AuditEntry[], seq: number): number {
  return entries.findIndex((e) => e.seq === seq);
}

/** Moves an entry to `seq`, id included, as someone reordering the trail would. */
function renumber(entry: AuditEntry, seq: number): AuditEntry {
  return { ...entry, seq, id: auditEntryId(entry.project_id, seq) };
}

function flipRootBit(record: AuditCheckpointSigned): AuditCheckpointSigned {
  const root = Buffer.from(record.root, 'base64');
  root[0]! ^= 1;
  return { ...record, root: root.toString('base64') };
}

function forged(record: AuditCheckpointSigned): AuditCheckpointSigned {
  return signAuditCheckpoint(recordCheckpoint(record), { keyId: record.key_id, privateKey: forger }, record.signed_at);
}

function replaceCheckpoint(trail: Trail, size: number, change: (record: AuditCheckpointSigned) => AuditCheckpointSigned): AuditCheckpointSigned[] {
  return trail.checkpoints.map((c) => (c.size === String(size) ? change(c) : c));
}

/** Entries as the read model returns them: ascending seq (copies of one seq side by side), `size` at a time. */
async function* pages(entries: readonly AuditEntry[], size: number): AsyncGenerator<AuditEntry[]> {
  const sorted = [...entries].sort((a, b) => a.seq - b.seq);
  for (let i = 0; i < sorted.length; i += size) yield sorted.slice(i, i + size);
}

/** Two workers, so that chunks also come back out of order; tests hand it chunks of a few entries. */
const pool = new DigestPool(2);

beforeAll(async () => {
  pool.start();
  await vi.waitFor(() => expect(pool.free).toBe(4), { timeout: 20_000, interval: 20 });
});

afterAll(async () => {
  await pool.close();
});

// ---- tests ---------------------------------------------------------------------------------

describe('audit entries', () => {
  it('carries every field of the decision, hashed exactly as the schema states', () => {
    const entry = chainEntry(undefined, entryFromDecision(decision(projectId, 1), 1), { keys }, projectId);
    expect(AuditLogEntry.parse(entry)).toEqual(entry);
    expect(entry).toMatchObject({ seq: 1, event: 'query', rows_returned: 1, bytes_out: 100, latency_ms: 1.501, latency_us: 1501, proxy_seq: 1, gap: null, key_id: null });
    expect(entryFromDecision(decision(projectId, 2, { latencyUs: null, event: 'blocked' }), 2)).toMatchObject({ latency_ms: 0, latency_us: null, event: 'blocked' });
  });

  it('turns a gap marker into a gap_marker entry with no credential, statement or latency', () => {
    const entry = chainEntry(undefined, entryFromGap(gap(projectId, 3), 1), { keys }, projectId);
    expect(AuditLogEntry.parse(entry)).toEqual(entry);
    expect(entry).toMatchObject({ event: 'gap_marker', credential_id: null, source: 'control', region: '', reason: 'buffer_full', latency_ms: 0, gap: { from_seq: 30, to_seq: 34, count: 5 } });
  });

  it('derives ids from project and seq: deterministic, distinct, in the aud_ id form', () => {
    expect(auditEntryId(projectId, 7)).toBe(auditEntryId(projectId, 7));
    expect(auditEntryId(projectId, 7)).not.toBe(auditEntryId(projectId, 8));
    expect(auditEntryId(projectId, 7)).not.toBe(auditEntryId(otherProjectId, 7));
    expect(AuditLogEntry.shape.id.parse(auditEntryId(projectId, 7))).toMatch(/^aud_[a-z2-7]{26}$/);
  });

  it('makes a counter_out_of_range gap marker of a decision whose counts a JSON number cannot carry exactly, and refuses seq 0', () => {
    const d = decision(projectId, 1);
    expect(entryFromDecision({ ...d, bytes_out: '9007199254740991', rows_returned: '9007199254740991' }, 1)).toMatchObject({ event: d.event, bytes_out: 2 ** 53 - 1, rows_returned: 2 ** 53 - 1 });
    const marker = { event: 'gap_marker', reason: 'counter_out_of_range', ts: d.ts, proxy_id: d.proxy_id, credential_id: null, sql: '', bytes_out: 0, rows_returned: 0, proxy_seq: null };
    const proxySeq = Number(d.seq);
    for (const changes of [{ bytes_out: '9007199254740992' }, { rows_returned: '9223372036854775807' }]) {
      expect(entryFromDecision({ ...d, ...changes }, 3)).toMatchObject({ ...marker, seq: 3, gap: { from_seq: proxySeq, to_seq: proxySeq, count: 1 } });
    }
    expect(entryFromDecision({ ...d, seq: '9007199254740993' }, 3)).toMatchObject({ ...marker, gap: null });
    expect(() => entryFromDecision(d, 0)).toThrow(AuditEntryError);
  });

  it('hashes RFC 8785 canonical JSON of everything but prev_hash and entry_hash', () => {
    const entry = build({ size: 1, keyedFrom: 1 }).entries[0]!;
    const { prev_hash: _prev, entry_hash: _hash, ...content } = entry;
    expect(Buffer.from(canonicalEntryBytes(entry)).toString('utf8')).toBe(canonicalize(content));
    expect(Buffer.from(canonicalEntryBytes(entry)).toString('utf8')).toContain('"key_id":"k1"');
  });

  it('uses a per-project genesis: SHA-256("pgward-audit-genesis\\0" ‖ project id)', () => {
    expect(genesisHash(projectId)).toBe('d4312fba64ee4c68cbf8a787215d4f11b9178b7ca5aa697517d083fdb834698c');
    expect(genesisHash(otherProjectId)).not.toBe(genesisHash(projectId));
  });
});

describe('appending to the chain', () => {
  function chainError(run: () => unknown): AuditChainErrorCode {
    try {
      run();
    } catch (error) {
      expect(error).toBeInstanceOf(AuditChainError);
      return (error as AuditChainError).code;
    }
    throw new Error('expected an AuditChainError');
  }

  it('links the first entry (and the first after legacy entries) to genesis, the rest to their predecessor', () => {
    const [first, second] = build({ size: 2 }).entries as [AuditEntry, AuditEntry];
    const content = canonicalEntryBytes(first);
    expect(first.prev_hash).toBe(genesisHash(projectId));
    expect(first.entry_hash).toBe(createHash('sha256').update(Buffer.from(first.prev_hash, 'hex')).update(content).digest('hex'));
    expect(second.prev_hash).toBe(first.entry_hash);
    const afterLegacy = build({ size: 3, legacy: 2 }).entries[2]!;
    expect(afterLegacy.prev_hash).toBe(genesisHash(projectId));
  });

  it('keys entries with HMAC-SHA-256 under the current key and records its id', () => {
    const [entry] = build({ size: 1, keyedFrom: 1 }).entries as [AuditEntry];
    expect(entry.key_id).toBe('k1');
    expect(entry.entry_hash).toBe(createHmac('sha256', keys.get('k1')!).update(Buffer.from(entry.prev_hash, 'hex')).update(canonicalEntryBytes(entry)).digest('hex'));
  });

  it('never downgrades a keyed chain, and refuses a current key it does not hold or another project', () => {
    const [keyed] = build({ size: 1, keyedFrom: 1 }).entries as [AuditEntry];
    const next = entryFromDecision(decision(projectId, 2), 2);
    expect(chainError(() => chainEntry(keyed, next, { keys }, projectId))).toBe('KEY_DOWNGRADE');
    expect(chainError(() => chainEntry(keyed, next, { current: 'k9', keys }, projectId))).toBe('UNKNOWN_KEY');
    expect(chainError(() => chainEntry(keyed, next, { current: 'k1', keys }, otherProjectId))).toBe('PROJECT_MISMATCH');
    expect(chainEntry(keyed, next, { current: 'k2', keys }, projectId).key_id).toBe('k2');
  });

  it('parses PGWARD_AUDIT_HMAC_KEYS with the first key current, never quoting a secret in errors', () => {
    const a = Buffer.alloc(32, 3).toString('base64');
    const b = Buffer.alloc(32, 4).toString('base64');
    const ring = parseHmacKeyring(`old:${a},new:${b}`);
    expect(ring.current).toBe('old');
    expect([...ring.keys.keys()]).toEqual(['old', 'new']);
    const short = Buffer.alloc(16, 5).toString('base64');
    expect(() => parseHmacKeyring(`k1:${short}`)).toThrow(KeyringError);
    expect(() => parseHmacKeyring(`k1:${short}`)).not.toThrow(short);
  });
});

describe('verifying an honest chain', () => {
  it('verifies unkeyed, keyed with rotation, legacy-prefixed and gap-marked chains', () => {
    expect(verify(build({ size: 12, every: 5 }))).toEqual(outcome(null, null, { verified: 12 }));
    expect(verify(build({ size: 12, every: 5, keyedFrom: 1, rotateAt: 7 }))).toEqual(outcome(null, null, { verified: 12, keyed: 12 }));
    expect(verify(build({ size: 12, every: 5, legacy: 3, keyedFrom: 6 }))).toEqual(outcome(null, null, { verified: 9, keyed: 7, unchained: 3 }));
    expect(verify(build({ size: 12, every: 5, gaps: [2, 11] }))).toEqual(outcome(null, null, { verified: 12 }));
  });

  it('reports an empty trail as ok with nothing verified, and a checkpoint over it as truncated', () => {
    expect(verify({ entries: [], checkpoints: [] })).toEqual(outcome(null, null, { verified: 0 }));
    expect(verify({ entries: [], checkpoints: build({ size: 5, every: 5 }).checkpoints })).toEqual(outcome(1, 'truncated', { verified: 0 }));
  });

  it('counts an all-legacy trail as unchained, not tampered', () => {
    expect(verify(build({ size: 4, legacy: 4, every: 2 }))).toEqual(outcome(null, null, { verified: 0, unchained: 4 }));
  });
});

describe('tamper suite (12 entries, checkpoints at 5 and 10)', () => {
  const plain = build({ size: 12, every: 5 });
  const keyed = build({ size: 12, every: 5, keyedFrom: 1, rotateAt: 7 });

  it('edit one field', () => {
    expect(verify({ ...plain, entries: edit(plain.entries, 7, { sql: 'select 1' }) })).toEqual(outcome(7, 'hash_mismatch', { verified: 6 }));
  });

  it('edit a field and recompute that entry hash', () => {
    const edited = edit(plain.entries, 7, { sql: 'select 1' });
    expect(verify({ ...plain, entries: rehash(edited, 6, 6) })).toEqual(outcome(8, 'broken_link', { verified: 7 }));
    const keyedEdit = edit(keyed.entries, 7, { sql: 'select 1' });
    expect(verify({ ...keyed, entries: rehash(keyedEdit, 6, 6, new Map()) })).toEqual(outcome(7, 'hash_mismatch', { verified: 6, keyed: 6 }));
    expect(verify({ ...keyed, entries: rehash(keyedEdit, 6, 6) })).toEqual(outcome(8, 'broken_link', { verified: 7, keyed: 7 }));
  });

  it('delete the first, a middle and the last entry', () => {
    expect(verify({ ...plain, entries: without(plain.entries, 1) })).toEqual(outcome(1, 'missing_entry', { verified: 0 }));
    expect(verify({ ...plain, entries: without(plain.entries, 6) })).toEqual(outcome(6, 'missing_entry', { verified: 5 }));
    const headCheckpoint = [...plain.checkpoints, checkpointOf(plain.entries, 12)];
    expect(verify({ entries: without(plain.entries, 12), checkpoints: headCheckpoint })).toEqual(outcome(12, 'truncated', { verified: 11 }));
  });

  it('swap two entries', () => {
    const swapped = plain.entries.map((e) => (e.seq === 3 ? renumber(at(plain.entries, 8), 3) : e.seq === 8 ? renumber(at(plain.entries, 3), 8) : e));
    expect(verify({ ...plain, entries: swapped })).toEqual(outcome(3, 'hash_mismatch', { verified: 2 }));
  });

  it('insert a forged entry', () => {
    const forgedEntry = chainEntry(at(plain.entries, 6), entryFromDecision(decision(projectId, 7, { sql: 'drop table t' }), 7), { keys }, projectId);
    const shifted = [...plain.entries.slice(0, 6), forgedEntry, ...plain.entries.slice(6).map((e) => renumber(e, e.seq + 1))];
    expect(verify({ ...plain, entries: shifted })).toEqual(outcome(8, 'hash_mismatch', { verified: 7 }));
    expect(verify({ ...plain, entries: [...plain.entries, forgedEntry] })).toEqual(outcome(7, 'broken_link', { verified: 6 }));
  });

  it('truncate the tail below and above the last checkpoint', () => {
    expect(verify({ ...plain, entries: plain.entries.slice(0, 8) })).toEqual(outcome(9, 'truncated', { verified: 8 }));
    // Past the last checkpoint a shorter trail is still a valid chain: only the next checkpoint can tell.
    expect(verify({ ...plain, entries: plain.entries.slice(0, 11) })).toEqual(outcome(null, null, { verified: 11 }));
  });

  it('strip the keys from the tail and re-chain it unkeyed', () => {
    const stripped = keyed.entries.map((e) => (e.seq >= 9 ? { ...e, key_id: null } : e));
    expect(verify({ ...keyed, entries: rehash(stripped, 8) })).toEqual(outcome(9, 'key_downgrade', { verified: 8, keyed: 8 }));
  });

  it('an entry naming an unknown key id', () => {
    expect(verify({ ...keyed, entries: edit(keyed.entries, 4, { key_id: 'k9' }) })).toEqual(outcome(4, 'unknown_key', { verified: 3, keyed: 3 }));
    expect(verify(keyed, { hmacKeys: new Map([['k2', keys.get('k2')!]]) })).toEqual(outcome(1, 'unknown_key', { verified: 0 }));
  });

  it('a checkpoint with a flipped root bit, a wrong size, a signature from another key', () => {
    expect(verify({ ...plain, checkpoints: replaceCheckpoint(plain, 10, flipRootBit) })).toEqual(outcome(10, 'checkpoint_unverifiable', { verified: 10 }));
    expect(verify({ ...plain, checkpoints: replaceCheckpoint(plain, 10, (c) => ({ ...c, size: '11' })) })).toEqual(outcome(11, 'checkpoint_unverifiable', { verified: 11 }));
    expect(verify({ ...plain, checkpoints: replaceCheckpoint(plain, 10, forged) })).toEqual(outcome(10, 'checkpoint_unverifiable', { verified: 10 }));
  });

  it('a replayed older checkpoint is consistent and passes', () => {
    expect(verify({ ...plain, checkpoints: [...plain.checkpoints, plain.checkpoints[0]!] })).toEqual(outcome(null, null, { verified: 12 }));
  });

  it('a full re-chain from genesis by someone without the anchor key', () => {
    const rechained = rehash(edit(plain.entries, 3, { sql: 'select 1' }), 0);
    expect(verify({ ...plain, entries: rechained })).toEqual(outcome(5, 'root_mismatch', { verified: 5 }));
    const resigned = [checkpointOf(rechained, 5, projectId, forger), checkpointOf(rechained, 10, projectId, forger)];
    expect(verify({ entries: rechained, checkpoints: resigned })).toEqual(outcome(5, 'checkpoint_unverifiable', { verified: 5 }));
    const keyedRechain = rehash(edit(keyed.entries, 3, { sql: 'select 1' }), 0);
    expect(verify({ ...keyed, entries: keyedRechain })).toEqual(outcome(5, 'root_mismatch', { verified: 5, keyed: 5 }));
  });

  it('a chain copied from another project', () => {
    const copied = build({ size: 12, every: 5, project: otherProjectId });
    expect(verify(copied)).toEqual(outcome(1, 'broken_link', { verified: 0 }));
    const adopted = rehash(
      copied.entries.map((e) => ({ ...e, project_id: projectId, id: auditEntryId(projectId, e.seq) })),
      0,
    );
    expect(verify({ entries: adopted, checkpoints: copied.checkpoints })).toEqual(outcome(5, 'checkpoint_unverifiable', { verified: 5 }));
  });

  it('legacy-looking entries: only a prefix is legacy; later ones cannot hide an edit', () => {
    const legacy = build({ size: 12, every: 5, legacy: 3 });
    const hidden = edit(legacy.entries, 7, { sql: 'select 1', key_id: null, prev_hash: '', entry_hash: '' });
    expect(verify({ ...legacy, entries: hidden })).toEqual(outcome(7, 'hash_mismatch', { verified: 3, unchained: 3 }));
    const keyedLegacy = build({ size: 12, every: 5, legacy: 3, keyedFrom: 4 });
    const hiddenKeyed = edit(keyedLegacy.entries, 7, { sql: 'select 1', key_id: null, prev_hash: '', entry_hash: '' });
    expect(verify({ ...keyedLegacy, entries: hiddenKeyed })).toEqual(outcome(7, 'key_downgrade', { verified: 3, keyed: 3, unchained: 3 }));
    const widened = legacy.entries.map((e) => (e.seq === 4 || e.seq === 5 ? { ...e, sql: 'select 1', key_id: null, prev_hash: '', entry_hash: '' } : e));
    expect(verify({ ...legacy, entries: widened })).toEqual(outcome(5, 'root_mismatch', { verified: 0, unchained: 5 }));
    expect(verify({ entries: widened, checkpoints: [] })).toEqual(outcome(6, 'broken_link', { verified: 0, unchained: 5 }));
  });
});

describe('StatementDecided v2 in the chain (where a statement ran)', () => {
  const onReplica: Placement = { ran_on: 'replica', replica_id: 'rep_01jq3v5m8k2r7t9w4x6y0z1a2b', upstream_region: 'eu-west-1' };
  const placements: (Placement | undefined)[] = [
    undefined,
    { ran_on: 'primary', replica_id: null, upstream_region: 'eu-west-1' },
    onReplica,
    undefined,
    { ran_on: 'cache', replica_id: null, upstream_region: null },
    { ran_on: null, replica_id: null, upstream_region: null },
    { ran_on: 'relay', replica_id: null, upstream_region: 'us-east-1' },
    undefined,
  ];
  const variants: Variant[] = placements.map((placed) => (placed ? { placed } : {}));
  const mixed = build({ size: 8, every: 4, gaps: [4], variants });

  it('hashes the entry of a v1 decision as before v2: its hash was pinned on the code before v2', () => {
    // The first decision of `decision()` at seq 1 (v1), chained first, unkeyed and under a key of 32 bytes of 7.
    const v1 = entryFromDecision(decision(projectId, 1), 1);
    expect('ran_on' in v1).toBe(false);
    const golden = new Map([['k1', Buffer.alloc(32, 7)]]);
    expect(chainEntry(undefined, v1, { keys: golden }, projectId).entry_hash).toBe('265de088eb0e18cb079a6d70acb07519bcda7354825b0f5d73505bae562bdbeb');
    expect(chainEntry(undefined, v1, { current: 'k1', keys: golden }, projectId).entry_hash).toBe('0b3254c323bbf051858b1f42c1e29efee949033aa7847713b47706d6ee5cac78');
  });

  it('gives v2 entries where they ran, in their hash; v1 entries and gap markers none', () => {
    const { entries } = mixed;
    expect(entries.map((e) => e.ran_on)).toEqual([undefined, 'primary', 'replica', undefined, 'cache', null, 'relay', undefined]);
    expect(at(entries, 3)).toMatchObject({ replica_id: onReplica.replica_id, upstream_region: 'eu-west-1', cache_status: 'miss' });
    expect(at(entries, 7)).toMatchObject({ ran_on: 'relay', replica_id: null, upstream_region: 'us-east-1' });
    for (const entry of entries) {
      expect(AuditLogEntry.parse(entry)).toEqual(entry);
      const { prev_hash: _prev, entry_hash: _hash, ...content } = entry;
      const text = Buffer.from(canonicalEntryBytes(entry)).toString('utf8');
      expect(text).toBe(canonicalize(content));
      expect(text.includes('"ran_on"')).toBe(entry.ran_on !== undefined);
    }
  });

  it('verifies a mixed v1/v2 chain with gap markers, plain and keyed', () => {
    expect(verify(mixed)).toEqual(outcome(null, null, { verified: 8 }));
    expect(verify(build({ size: 8, every: 4, gaps: [4], variants, keyedFrom: 3, rotateAt: 6 }))).toEqual(outcome(null, null, { verified: 8, keyed: 6 }));
  });

  it('finds an edit of where a statement ran, and a placement added to or taken from an entry', () => {
    expect(verify({ ...mixed, entries: edit(mixed.entries, 3, { ran_on: 'primary', replica_id: null }) })).toEqual(outcome(3, 'hash_mismatch', { verified: 2 }));
    expect(verify({ ...mixed, entries: edit(mixed.entries, 7, { upstream_region: 'eu-west-1' }) })).toEqual(outcome(7, 'hash_mismatch', { verified: 6 }));
    // Absent is not null: a v1 entry given null placement members, or a v2 refusal stripped of them, no longer hashes.
    expect(verify({ ...mixed, entries: edit(mixed.entries, 1, { ran_on: null, replica_id: null, upstream_region: null }) })).toEqual(outcome(1, 'hash_mismatch', { verified: 0 }));
    const stripped = mixed.entries.map((e) => {
      if (e.seq !== 6) return e;
      const { ran_on: _r, replica_id: _i, upstream_region: _u, ...rest } = e;
      return rest;
    });
    expect(verify({ ...mixed, entries: stripped })).toEqual(outcome(6, 'hash_mismatch', { verified: 5 }));
  });

  it('chains stored v1 and v2 events as the projection and audit verify --from-events do, v1 upcast on read', () => {
    const meta = (n: number) => ({ event_id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`, correlation_id: 'test', actor: 'ingest', at: verifiedAt });
    const stored = placements.map((placed, i) => {
      const d = decision(projectId, i + 1, placed ? { placed } : {});
      const encoded = placed ? encodeEvent(StatementDecided, d as StatementDecided, meta(i)) : encodeEvent(StatementDecidedV1, d, meta(i));
      return { ...encoded, stream: `audit-${projectId}`, revision: i, position: BigInt(i) };
    });
    expect(stored.map((e) => e.type)).toEqual(placements.map((p) => (p ? 'StatementDecided.v2' : 'StatementDecided.v1')));
    // The upcaster: a v1 payload reads as v2 with its placement absent.
    const upcast = decodeDecision(stored[0]!);
    expect('ran_on' in upcast).toBe(false);
    expect(decodeDecision(stored[2]!)).toMatchObject(onReplica);
    const chained = chainEvents(stored, new Map(), { keys });
    const entries = chained.map(({ entry }) => entry);
    expect(entries.map((e) => e.ran_on)).toEqual(placements.map((p) => p?.ran_on));
    expect(verify({ entries, checkpoints: [] })).toEqual(outcome(null, null, { verified: 8 }));
    // The same bytes as entries built from the decisions directly.
    const direct = build({ size: 8, variants });
    expect(entries.map((e) => e.entry_hash)).toEqual(direct.entries.map((e) => e.entry_hash));
  });
});

describe('precedence when several failures apply', () => {
  const plain = build({ size: 12, every: 5 });
  const keyed = build({ size: 12, every: 5, keyedFrom: 1, rotateAt: 7 });
  const rechained = rehash(edit(plain.entries, 3, { sql: 'select 1' }), 0);

  it('on one entry: unknown_key, then key_downgrade, then hash_mismatch, then broken_link', () => {
    expect(verify({ ...keyed, entries: edit(keyed.entries, 4, { key_id: 'k9', sql: 'select 1' }) })).toEqual(outcome(4, 'unknown_key', { verified: 3, keyed: 3 }));
    expect(verify({ ...keyed, entries: edit(keyed.entries, 9, { key_id: null, sql: 'select 1' }) })).toEqual(outcome(9, 'key_downgrade', { verified: 8, keyed: 8 }));
    const relinked = rehash(edit(plain.entries, 7, { prev_hash: 'f'.repeat(64) }), 6, 6);
    const misplaced = relinked.map((e) => (e.seq === 7 ? { ...e, prev_hash: 'f'.repeat(64), entry_hash: entryHash('f'.repeat(64), canonicalEntryBytes(e), undefined) } : e));
    expect(verify({ ...plain, entries: misplaced })).toEqual(outcome(7, 'broken_link', { verified: 6 }));
    expect(verify({ ...plain, entries: edit(misplaced, 7, { sql: 'select 1' }) })).toEqual(outcome(7, 'hash_mismatch', { verified: 6 }));
  });

  it('a duplicated seq is a broken link before either copy is checked, whatever the order', () => {
    const copy = { ...at(plain.entries, 7), sql: 'select 1' };
    expect(verify({ ...plain, entries: [...plain.entries, copy] })).toEqual(outcome(7, 'broken_link', { verified: 6 }));
    expect(verify({ ...plain, entries: [copy, ...plain.entries] })).toEqual(outcome(7, 'broken_link', { verified: 6 }));
  });

  it('across seqs: the lowest seq wins, whatever its kind', () => {
    expect(verify({ ...plain, entries: edit(without(plain.entries, 4), 8, { sql: 'select 1' }) })).toEqual(outcome(4, 'missing_entry', { verified: 3 }));
    expect(verify({ ...plain, entries: edit(rechained, 8, { sql: 'select 1' }) })).toEqual(outcome(5, 'root_mismatch', { verified: 5 }));
  });

  it('at one seq the entry is checked before the checkpoint its seq completes', () => {
    const edited = edit(plain.entries, 10, { sql: 'select 1' });
    expect(verify({ ...plain, entries: edited })).toEqual(outcome(10, 'hash_mismatch', { verified: 9 }));
    expect(verify({ ...plain, entries: rehash(edited, 9, 9) })).toEqual(outcome(10, 'root_mismatch', { verified: 10 }));
  });

  it('at one size, an unverifiable checkpoint before a root mismatch', () => {
    const checkpoints = [...plain.checkpoints, forged(plain.checkpoints[0]!)];
    expect(verify({ entries: rechained, checkpoints })).toEqual(outcome(5, 'checkpoint_unverifiable', { verified: 5 }));
  });

  it('past the tail, an unverifiable checkpoint before truncation (its size is not to be believed)', () => {
    expect(verify({ ...plain, checkpoints: replaceCheckpoint(plain, 10, (c) => ({ ...c, size: '13' })) })).toEqual(outcome(13, 'checkpoint_unverifiable', { verified: 12 }));
    const truncated = { entries: plain.entries.slice(0, 8), checkpoints: [...plain.checkpoints, forged(checkpointOf(plain.entries, 12))] };
    expect(verify(truncated)).toEqual(outcome(9, 'checkpoint_unverifiable', { verified: 8 }));
  });
});

describe('verifying a window', () => {
  const plain = build({ size: 12, every: 5 });

  it('checks the entries of the window, linked to the entry before it', () => {
    expect(verify(plain, { fromSeq: 6 })).toEqual(outcome(null, null, { verified: 7, start: 6, end: 12 }));
    expect(verify(plain, { fromSeq: 6, toSeq: 9 })).toEqual(outcome(null, null, { verified: 4, start: 6, end: 9 }));
    expect(verify({ ...plain, entries: edit(plain.entries, 8, { sql: 'select 1' }) }, { fromSeq: 6 })).toEqual(outcome(8, 'hash_mismatch', { verified: 2, start: 6, end: 7 }));
  });

  it('needs the entry before the window as its anchor', () => {
    expect(verify({ ...plain, entries: plain.entries.slice(5) }, { fromSeq: 6 })).toEqual(outcome(5, 'missing_entry', { verified: 0 }));
  });

  it('starts inside a legacy prefix when the entry before the window is legacy', () => {
    const legacy = build({ size: 12, every: 5, legacy: 3 });
    expect(verify(legacy, { fromSeq: 3 })).toEqual(outcome(null, null, { verified: 9, unchained: 1, start: 4, end: 12 }));
  });

  it('checks signatures and truncation of checkpoints in the window, and roots only from seq 1', () => {
    expect(verify({ ...plain, checkpoints: replaceCheckpoint(plain, 10, flipRootBit) }, { fromSeq: 6 })).toEqual(
      outcome(10, 'checkpoint_unverifiable', { verified: 5, start: 6, end: 10 }),
    );
    const rechained = rehash(edit(plain.entries, 3, { sql: 'select 1' }), 0);
    expect(verify({ ...plain, entries: rechained }, { fromSeq: 6 })).toEqual(outcome(null, null, { verified: 7, start: 6, end: 12 }));
    const truncated = { ...plain, entries: plain.entries.slice(0, 8) };
    expect(verify(truncated, { toSeq: 8 })).toEqual(outcome(null, null, { verified: 8 }));
    expect(verify(truncated, { toSeq: 10 })).toEqual(outcome(9, 'truncated', { verified: 8 }));
  });

  it('refuses a window that is not one, and entries no store could hold', () => {
    expect(() => verify(plain, { fromSeq: 0 })).toThrow(RangeError);
    expect(() => verify(plain, { fromSeq: 5, toSeq: 4 })).toThrow(RangeError);
    expect(() => verify({ ...plain, entries: [...plain.entries, { ...at(plain.entries, 3), seq: 3.5 }] })).toThrow(RangeError);
  });
});

describe('properties', () => {
  const variant = fc.record({
    event: fc.constantFrom(...AuditEventKind.options),
    sql: fc.string({ maxLength: 40 }).filter((s) => !s.includes('\0')),
    credential: fc.boolean(),
    latencyUs: fc.option(fc.nat({ max: 10_000_000 }), { nil: null }),
  });
  const chainSpec = fc
    .record({
      size: fc.integer({ min: 1, max: 30 }),
      legacy: fc.nat({ max: 30 }),
      keyedFrom: fc.option(fc.integer({ min: 1, max: 31 }), { nil: undefined }),
      rotateAt: fc.option(fc.integer({ min: 1, max: 31 }), { nil: undefined }),
      every: fc.integer({ min: 1, max: 8 }),
      gaps: fc.uniqueArray(fc.integer({ min: 1, max: 30 }), { maxLength: 5 }),
      variants: fc.array(variant, { minLength: 30, maxLength: 30 }),
    })
    .map((spec): ChainSpec & { legacy: number } => ({ ...spec, legacy: Math.min(spec.legacy, spec.size) }));

  function shuffled<T>(items: readonly T[], seed: number): T[] {
    return items
      .map((item, i) => ({ item, key: (i * 2_654_435_761 + seed) % 4_294_967_291 }))
      .sort((a, b) => a.key - b.key)
      .map(({ item }) => item);
  }

  it('any honest sequence of appends verifies, in any storage order', () => {
    fc.assert(
      fc.property(chainSpec, fc.nat(), (spec, seed) => {
        const trail = build(spec);
        const chained = spec.size - spec.legacy;
        const keyedCount = spec.keyedFrom === undefined ? 0 : Math.max(0, spec.size - Math.max(spec.legacy, spec.keyedFrom - 1));
        const expected = outcome(null, null, { verified: chained, keyed: keyedCount, unchained: spec.legacy });
        expect(verify(trail)).toEqual(expected);
        expect(verify({ entries: shuffled(trail.entries, seed), checkpoints: shuffled(trail.checkpoints, seed) })).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  function mutate(value: unknown, nullify: boolean): unknown {
    if (value === null) return 'x';
    if (nullify) return null;
    if (typeof value === 'string') return `${value}x`;
    if (typeof value === 'number') return value + 1;
    if (typeof value === 'boolean') return !value;
    if (Array.isArray(value)) return [...(value as unknown[]), 'x'];
    return { ...(value as object), x: 1 };
  }

  it('any single mutation of a checkpointed entry is detected, by the checkpoint that covers it at the latest', () => {
    const fields = Object.keys(AuditLogEntry.shape) as (keyof AuditEntry)[];
    fc.assert(
      fc.property(chainSpec, fc.nat(), fc.constantFrom(...fields), fc.boolean(), fc.constantFrom('raw', 'own', 'rest'), fc.nat(), (spec, pick, field, nullify, mode, seed) => {
        const trail = build(spec);
        const covered = trail.checkpoints.length * spec.every!;
        fc.pre(covered > 0);
        const seq = 1 + (pick % covered);
        const coveringSize = Math.ceil(seq / spec.every!) * spec.every!;
        const index = indexOf(trail.entries, seq);
        const mutated = trail.entries.map((e, i) => (i === index ? ({ ...e, [field]: mutate(e[field], nullify && field !== 'seq') } as AuditEntry) : e));
        const hashField = field === 'prev_hash' || field === 'entry_hash';
        const tampered = mode === 'raw' || hashField ? mutated : rehash(mutated, index, mode === 'own' ? index : undefined);
        const result = verify({ ...trail, entries: tampered });
        expect(result.ok).toBe(false);
        expect(result.first_broken_seq).toBeGreaterThanOrEqual(seq);
        expect(result.first_broken_seq).toBeLessThanOrEqual(coveringSize);
        expect(verify({ entries: shuffled(tampered, seed), checkpoints: trail.checkpoints })).toEqual(result);
      }),
      { numRuns: 300 },
    );
  });

  it('on worker threads, in one array or in pages, reports exactly what verifyChain reports, honest or after a single mutation', async () => {
    const fields = Object.keys(AuditLogEntry.shape) as (keyof AuditEntry)[];
    const mutation = fc.option(fc.record({ pick: fc.nat(), field: fc.constantFrom(...fields), nullify: fc.boolean(), mode: fc.constantFrom('raw', 'own', 'rest') }), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(chainSpec, mutation, fc.nat(), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 7 }), async (spec, change, seed, chunkEntries, pageSize) => {
        const trail = build(spec);
        let entries = trail.entries;
        if (change) {
          const index = change.pick % entries.length;
          const mutated = entries.map((e, i) => (i === index ? ({ ...e, [change.field]: mutate(e[change.field], change.nullify && change.field !== 'seq') } as AuditEntry) : e));
          const hashField = change.field === 'prev_hash' || change.field === 'entry_hash';
          entries = change.mode === 'raw' || hashField ? mutated : rehash(mutated, index, change.mode === 'own' ? index : undefined);
        }
        const { checkpoints } = trail;
        const options = { projectId, checkpoints, hmacKeys: keys, anchorPublicKey: anchor.publicKey, verifiedAt };
        const input = { ...options, entries: shuffled(entries, seed) };
        const expected = verifyChain(input);
        const parallel = { pool, minEntries: 0, chunkEntries };
        expect(await verifyChainParallel(input, parallel)).toEqual(expected);
        expect(await verifyChainPages(options, pages(entries, pageSize), parallel)).toEqual(expected);
      }),
      { numRuns: 200 },
    );
  });
});

describe('verifying in pages', () => {
  it('reports what verifyChain reports for every trail verified above (honest, tampered, windows), whatever the page size', async () => {
    expect(verifications.length).toBeGreaterThan(300);
    for (const { input, report } of verifications) {
      const { entries, ...options } = input;
      for (const size of [1, 2, 5, 1_000]) expect(await verifyChainPages(options, pages(entries, size))).toEqual(report);
    }
  });

  it('reports the same with digests from worker threads, in one array or in pages', async () => {
    const parallel = { pool, minEntries: 0, chunkEntries: 2 };
    for (const { input, report } of verifications) {
      const { entries, ...options } = input;
      expect(await verifyChainParallel(input, parallel)).toEqual(report);
      expect(await verifyChainPages(options, pages(entries, 3), parallel)).toEqual(report);
    }
  });

  it('refuses pages out of seq order and a window that is not one', async () => {
    const { entries, checkpoints } = build({ size: 4 });
    const options = { projectId, checkpoints, hmacKeys: keys, anchorPublicKey: anchor.publicKey, verifiedAt };
    async function* reversed(): AsyncGenerator<AuditEntry[]> {
      yield [...entries].reverse();
    }
    await expect(verifyChainPages(options, reversed())).rejects.toThrow(RangeError);
    await expect(verifyChainPages({ ...options, fromSeq: 3, toSeq: 2 }, pages(entries, 2))).rejects.toThrow(RangeError);
  });
});
