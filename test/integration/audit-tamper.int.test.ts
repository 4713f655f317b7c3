/**
 * The tamper suite against the real PostgreSQL read model (issue #5): a chain built the way
 * production builds it (events appended to the PostgreSQL event store, the audit projection
 * running into rm.audit_entries, checkpoints signed through the API from the event log), then each
 * case changes the stored rows or checkpoint events with SQL and asserts the exact report of
 * GET /v1/projects/{id}/audit/verify. Every case starts from the same snapshot.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { auditStream, checkpointStream } from '../../projections/audit.js';
import { auditCheckpoints, auditEntries, auditEntryPages } from '../../queries/audit.js';
import { canonicalEntryBytes, entryHash } from '../support/audit-hashes.js';
import { createCheckpointer, signProjectCheckpoint } from '../../src/audit/checkpointer.js';
import { recordCheckpoint, signAuditCheckpoint } from '../../src/audit/checkpoints.js';
import { loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { auditEntryId, genesisHash, type AuditEntry } from '../../src/audit/entry.js';
import type { AuditChainVerification, AuditFailureReason } from '../../src/audit/verify.js';
import { merkleRoot } from '../../src/crypto/merkle.js';
import { AuditCheckpointSigned, AuditGapRecorded, StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { startApi, type TestApi } from '../support/api.js';
import { placed } from '../support/decisions.js';

const K1 = Buffer.alloc(32, 1);
const K2 = Buffer.alloc(32, 2);
const SIZE = 12;
const forger = generateKeyPairSync('ed25519').privateKey;

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;
let otherProjectId: string;

function decision(project: string, n: number): StatementDecided {
  return placed({
    event: n % 4 === 0 ? 'masked' : 'query', project_id: project, credential_id: 'agt_aaaaaaaaaaaaaaaaaaaaaaaa', session_id: 'px.1.1', source: 'wire', region: 'local',
    client_ip: '10.0.0.1', ts: new Date(Date.UTC(2026, 2, 1, 12, 0, n)).toISOString(), sql: `select * from orders where id = ${n} and project = '${project}'`, normalized_sql: 'select * from orders where id = $1',
    query_hash: '0123456789abcdef', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'miss', rows_returned: String(n), bytes_out: String(n * 100),
    latency_us: 1500 + n, tables_read: ['public.orders'], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'px', boot_epoch: 1, seq: String(n), approval_id: null,
  });
}

/** Entry n of a trail: decisions, with a gap marker at 2 so its jsonb `gap` round-trips too. */
function auditEvent(project: string, n: number) {
  const meta = { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: new Date(Date.UTC(2026, 2, 1, 12, 0, n)).toISOString() };
  if (n === 2) {
    const gap = { project_id: project, proxy_id: 'px', boot_epoch: 1, from_seq: '90', to_seq: '94', count: '5', reason: 'proxy_buffer_full', ts: meta.at };
    return encodeEvent(AuditGapRecorded, gap, meta);
  }
  return encodeEvent(StatementDecided, decision(project, n), meta);
}

async function projected(project: string, count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await api.pool.query<{ n: number }>('select count(*)::int as n from rm.audit_entries where project_id = $1', [project]);
    if (rows[0]!.n === count) return;
    if (Date.now() > deadline) throw new Error(`the audit projection holds ${rows[0]!.n} entries of ${project}, not ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function createProject(): Promise<string> {
  const database = { host: '127.0.0.1', port: 5432, name: 'shop', username: 'postgres', password: 'upstream-pw' };
  const response = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'Shop', org_id: owner.orgId, database } });
  expect(response.statusCode).toBe(201);
  return (response.json() as { project: { id: string } }).project.id;
}

async function signCheckpoint(project: string): Promise<AuditCheckpointSigned> {
  const response = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${project}/audit/checkpoints` });
  expect(response.statusCode).toBe(201);
  return response.json() as AuditCheckpointSigned;
}

/** Appends entries from+1..to to the project's audit stream, waits for the projection, and signs a checkpoint at `to` when asked. */
async function grow(project: string, from: number, to: number, checkpoint: boolean): Promise<void> {
  const events = Array.from({ length: to - from }, (_, i) => auditEvent(project, from + i + 1));
  await api.store.append(auditStream(project), events, 'any');
  await projected(project, to);
  if (checkpoint) expect((await signCheckpoint(project)).size).toBe(String(to));
}

async function verify(query = ''): Promise<AuditChainVerification> {
  const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/audit/verify${query}` });
  expect(response.statusCode).toBe(200);
  return response.json() as AuditChainVerification;
}

interface Counts {
  readonly verified: number;
  /** Defaults to verified: the deployment keys every entry. */
  readonly keyed?: number;
}

/** The exact report, with the chain starting at seq 1 (no legacy entries here). */
function outcome(firstBrokenSeq: number | null, reason: AuditFailureReason | null, counts: Counts) {
  const { verified } = counts;
  return {
    ok: reason === null,
    verified_count: verified,
    keyed_count: counts.keyed ?? verified,
    unchained_count: 0,
    chain_start_seq: verified > 0 ? 1 : null,
    chain_end_seq: verified > 0 ? verified : null,
    first_broken_seq: firstBrokenSeq,
    failure_reason: reason,
    verified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
  };
}

// ---- tampering with SQL --------------------------------------------------------------------

const sql = (text: string, values: unknown[] = []) => api.pool.query(text, values);

async function stored(project = projectId): Promise<AuditEntry[]> {
  return auditEntries(api.pool, project);
}

/** Stores entries as the rows of their (project_id, seq), replacing what is there: every column, as someone with write access to the read model would. */
async function put(entries: readonly AuditEntry[]): Promise<void> {
  for (const e of entries) {
    await sql('delete from rm.audit_entries where project_id = $1 and seq = $2', [e.project_id, e.seq]);
    // `placed`: whether the row's entry has where it ran (projections/audit.ts), as the projection writes it.
    await sql('insert into rm.audit_entries select * from json_populate_record(null::rm.audit_entries, $1::json)', [JSON.stringify({ ...e, ts_at: e.ts, position: 0, placed: 'ran_on' in e })]);
  }
}

/** Re-chains entries in seq order from the one at `firstSeq` on, as someone holding `key` (none: unkeyed SHA-256) but never the anchor key would. */
function rechain(entries: readonly AuditEntry[], firstSeq: number, key: (entry: AuditEntry) => Buffer | undefined): AuditEntry[] {
  const out = [...entries].sort((a, b) => a.seq - b.seq);
  for (let i = out.findIndex((e) => e.seq === firstSeq); i < out.length; i += 1) {
    const entry = out[i]!;
    const prevHash = i === 0 ? genesisHash(entry.project_id) : out[i - 1]!.entry_hash;
    out[i] = { ...entry, prev_hash: prevHash, entry_hash: entryHash(prevHash, canonicalEntryBytes(entry), key(entry)) };
  }
  return out;
}

const keyOf = (entry: AuditEntry) => (entry.key_id === 'k1' ? K1 : entry.key_id === 'k2' ? K2 : undefined);

/** Replaces the data of the project's stored checkpoint event of `size`. */
async function rewriteCheckpoint(size: number, change: (record: AuditCheckpointSigned) => AuditCheckpointSigned, project = projectId): Promise<void> {
  const record = (await auditCheckpoints(api.store, project)).find((c) => c.size === String(size))!;
  const { rowCount } = await sql(`update pgward.events set data = $3 where stream = $1 and convert_from(data, 'UTF8')::jsonb->>'size' = $2`, [
    checkpointStream(project),
    String(size),
    Buffer.from(JSON.stringify(change(record)), 'utf8'),
  ]);
  expect(rowCount).toBe(1);
}

function reSigned(record: AuditCheckpointSigned, root?: Buffer): AuditCheckpointSigned {
  return signAuditCheckpoint({ ...recordCheckpoint(record), ...(root ? { root } : {}) }, { keyId: record.key_id, privateKey: forger }, record.signed_at);
}

/** The RFC 6962 root of entries 1..size as they now stand. */
function rootOf(entries: readonly AuditEntry[], size: number): Buffer {
  return merkleRoot(entries.slice(0, size).map(canonicalEntryBytes));
}

// ---- setup ---------------------------------------------------------------------------------

beforeAll(async () => {
  api = await startApi('audit_tamper', { PGWARD_AUDIT_HMAC_KEYS: `k1:${K1.toString('base64')},k2:${K2.toString('base64')}` });
  owner = await api.org('pro');
  projectId = await createProject();
  otherProjectId = await createProject();
  for (const project of [projectId, otherProjectId]) {
    await grow(project, 0, 5, true);
    await grow(project, 5, 10, true);
    await grow(project, 10, SIZE, false);
  }
  await sql('create table public.tamper_entries as select * from rm.audit_entries');
  await sql(`create table public.tamper_events as select * from pgward.events where stream like 'auditcp-%'`);
});

afterEach(async () => {
  await sql('delete from rm.audit_entries');
  await sql('insert into rm.audit_entries select * from public.tamper_entries');
  await sql(`delete from pgward.events where stream like 'auditcp-%'`);
  await sql('insert into pgward.events select * from public.tamper_events');
});

afterAll(async () => {
  await api?.stop();
});

describe('an honest chain in the read model', () => {
  it('verifies: every entry keyed with k1, checkpoints at 5 and 10 from the event log', async () => {
    expect(await verify()).toEqual(outcome(null, null, { verified: SIZE }));
    expect((await auditCheckpoints(api.store, projectId)).map((c) => c.size)).toEqual(['5', '10']);
    expect((await stored()).map((e) => e.key_id)).toEqual(Array.from({ length: SIZE }, () => 'k1'));
  });

  it('reads the same entries in pages of any size, as the verify route does', async () => {
    const read = async (...args: [number?, number?, number?]) => {
      const pages: AuditEntry[][] = [];
      for await (const page of auditEntryPages(api.pool, projectId, ...args)) pages.push(page);
      return pages;
    };
    const all = await stored();
    for (const size of [1, 5, SIZE, 100]) {
      const pages = await read(1, undefined, size);
      expect(pages.flat()).toEqual(all);
      expect(pages.map((page) => page.length)).toEqual(Array.from({ length: Math.ceil(SIZE / size) }, (_, i) => Math.min(size, SIZE - i * size)));
    }
    expect((await read(4, 9, 2)).flat()).toEqual(all.filter((e) => e.seq >= 4 && e.seq <= 9));
    expect(await read(SIZE + 1)).toEqual([]);
  });
});

describe('tamper suite: the read model edited with SQL (12 entries, checkpoints at 5 and 10)', () => {
  it('edit one field', async () => {
    await sql(`update rm.audit_entries set sql = 'select 1' where project_id = $1 and seq = 7`, [projectId]);
    expect(await verify()).toEqual(outcome(7, 'hash_mismatch', { verified: 6 }));
  });

  it('edit a field and recompute that entry hash: with the HMAC key the next link breaks, without it the hash does not match', async () => {
    const edited = (await stored()).map((e) => (e.seq === 7 ? { ...e, sql: 'select 1' } : e));
    await put(rechain(edited, 7, keyOf).filter((e) => e.seq === 7));
    expect(await verify()).toEqual(outcome(8, 'broken_link', { verified: 7 }));
    await put(rechain(edited, 7, () => undefined).filter((e) => e.seq === 7));
    expect(await verify()).toEqual(outcome(7, 'hash_mismatch', { verified: 6 }));
  });

  it('delete the first entry', async () => {
    await sql('delete from rm.audit_entries where project_id = $1 and seq = 1', [projectId]);
    expect(await verify()).toEqual(outcome(1, 'missing_entry', { verified: 0 }));
  });

  it('delete a middle entry', async () => {
    await sql('delete from rm.audit_entries where project_id = $1 and seq = 6', [projectId]);
    expect(await verify()).toEqual(outcome(6, 'missing_entry', { verified: 5 }));
  });

  it('delete the last entry: invisible past the last checkpoint, truncated once a checkpoint covers it', async () => {
    await sql('delete from rm.audit_entries where project_id = $1 and seq = $2', [projectId, SIZE]);
    expect(await verify()).toEqual(outcome(null, null, { verified: SIZE - 1 }));
    expect((await signCheckpoint(projectId)).size).toBe(String(SIZE));
    expect(await verify()).toEqual(outcome(SIZE, 'truncated', { verified: SIZE - 1 }));
  });

  it('swap two entries', async () => {
    await sql('update rm.audit_entries set seq = -seq where project_id = $1 and seq in (3, 8)', [projectId]);
    await sql('update rm.audit_entries set seq = case seq when -3 then 8 else 3 end where project_id = $1 and seq in (-3, -8)', [projectId]);
    expect(await verify()).toEqual(outcome(3, 'hash_mismatch', { verified: 2 }));
  });

  it('insert a forged entry, chained with the HMAC key, and shift the rest up', async () => {
    const entries = await stored();
    const forged = rechain([...entries.slice(0, 6), { ...entries[6]!, sql: 'drop table orders' }], 7, keyOf)[6]!;
    await sql('delete from rm.audit_entries where project_id = $1 and seq >= 7', [projectId]);
    await put([forged, ...entries.slice(6).map((e) => ({ ...e, seq: e.seq + 1, id: auditEntryId(projectId, e.seq + 1) }))]);
    expect(await verify()).toEqual(outcome(8, 'hash_mismatch', { verified: 7 }));
  });

  it('insert a forged entry after the tail: without the HMAC key it is a downgrade, with it only the event log tells', async () => {
    const entries = await stored();
    const forged = { ...entries.at(-1)!, seq: SIZE + 1, id: auditEntryId(projectId, SIZE + 1), sql: 'drop table orders' };
    await put(rechain([...entries, { ...forged, key_id: null }], SIZE + 1, keyOf).slice(-1));
    expect(await verify()).toEqual(outcome(SIZE + 1, 'key_downgrade', { verified: SIZE }));
    await put(rechain([...entries, forged], SIZE + 1, keyOf).slice(-1));
    expect(await verify()).toEqual(outcome(null, null, { verified: SIZE + 1 }));
  });

  it('truncate the tail below the last checkpoint', async () => {
    await sql('delete from rm.audit_entries where project_id = $1 and seq > 8', [projectId]);
    expect(await verify()).toEqual(outcome(9, 'truncated', { verified: 8 }));
  });

  it('truncate the tail above the last checkpoint: a shorter valid chain, until the next checkpoint', async () => {
    await sql('delete from rm.audit_entries where project_id = $1 and seq > 10', [projectId]);
    expect(await verify()).toEqual(outcome(null, null, { verified: 10 }));
  });

  it('strip the keys from the tail and re-chain it unkeyed', async () => {
    const stripped = (await stored()).map((e) => (e.seq >= 9 ? { ...e, key_id: null } : e));
    await put(rechain(stripped, 9, keyOf).filter((e) => e.seq >= 9));
    expect(await verify()).toEqual(outcome(9, 'key_downgrade', { verified: 8 }));
  });

  it('an entry naming an unknown key id', async () => {
    await sql(`update rm.audit_entries set key_id = 'k9' where project_id = $1 and seq = 4`, [projectId]);
    expect(await verify()).toEqual(outcome(4, 'unknown_key', { verified: 3 }));
  });

  it('a checkpoint with a flipped root bit', async () => {
    await rewriteCheckpoint(10, (record) => {
      const root = Buffer.from(record.root, 'base64');
      root[0]! ^= 1;
      return { ...record, root: root.toString('base64') };
    });
    expect(await verify()).toEqual(outcome(10, 'checkpoint_unverifiable', { verified: 10 }));
  });

  it('a checkpoint with a wrong size', async () => {
    await rewriteCheckpoint(10, (record) => ({ ...record, size: '11' }));
    expect(await verify()).toEqual(outcome(11, 'checkpoint_unverifiable', { verified: 11 }));
  });

  it('a checkpoint with a signature from another key', async () => {
    await rewriteCheckpoint(10, (record) => reSigned(record));
    expect(await verify()).toEqual(outcome(10, 'checkpoint_unverifiable', { verified: 10 }));
  });

  it('a replayed older checkpoint is consistent with the chain and passes', async () => {
    const [older] = await auditCheckpoints(api.store, projectId);
    await api.store.append(checkpointStream(projectId), [encodeEvent(AuditCheckpointSigned, older!, { event_id: randomUUID(), correlation_id: 'replay', actor: 'attacker', at: older!.signed_at })], 'any');
    expect((await auditCheckpoints(api.store, projectId)).map((c) => c.size)).toEqual(['5', '10', '5']);
    expect(await verify()).toEqual(outcome(null, null, { verified: SIZE }));
  });

  it('a full re-chain from genesis by someone without the anchor key', async () => {
    const edited = (await stored()).map((e) => (e.seq === 3 ? { ...e, sql: 'select 1' } : e));
    const withHmac = rechain(edited, 1, keyOf);
    await put(withHmac);
    expect(await verify()).toEqual(outcome(5, 'root_mismatch', { verified: 5 }));
    const unkeyed = rechain(edited.map((e) => ({ ...e, key_id: null })), 1, () => undefined);
    await put(unkeyed);
    expect(await verify()).toEqual(outcome(5, 'root_mismatch', { verified: 5, keyed: 0 }));
    for (const size of [5, 10]) await rewriteCheckpoint(size, (record) => reSigned(record, rootOf(withHmac, size)));
    await put(withHmac);
    expect(await verify()).toEqual(outcome(5, 'checkpoint_unverifiable', { verified: 5 }));
  });

  it('a chain copied from another project', async () => {
    const copied = await stored(otherProjectId);
    await sql('delete from rm.audit_entries where project_id = $1', [projectId]);
    await put(copied.map((e) => ({ ...e, project_id: projectId })));
    expect(await verify()).toEqual(outcome(1, 'hash_mismatch', { verified: 0 }));
    const adopted = rechain(copied.map((e) => ({ ...e, project_id: projectId, id: auditEntryId(projectId, e.seq) })), 1, keyOf);
    await put(adopted);
    expect(await verify()).toEqual(outcome(5, 'root_mismatch', { verified: 5 }));
    await sql(`delete from pgward.events where stream = $1`, [checkpointStream(projectId)]);
    await sql(`update pgward.events set stream = $1 where stream = $2`, [checkpointStream(projectId), checkpointStream(otherProjectId)]);
    expect(await verify()).toEqual(outcome(5, 'checkpoint_unverifiable', { verified: 5 }));
  });
});

describe('a verification window over the tampered read model', () => {
  it('anchors on the entry before the window and reports the first failure inside it', async () => {
    await sql(`update rm.audit_entries set sql = 'select 1' where project_id = $1 and seq = 9`, [projectId]);
    expect(await verify('?from_seq=6&to_seq=8')).toEqual({ ...outcome(null, null, { verified: 3 }), chain_start_seq: 6, chain_end_seq: 8 });
    expect(await verify('?from_seq=6')).toEqual({ ...outcome(9, 'hash_mismatch', { verified: 3 }), chain_start_seq: 6, chain_end_seq: 8 });
  });
});

describe('the checkpointer reads each stream once', () => {
  it('signs the same checkpoints incrementally as from the whole stream', async () => {
    const project = 'prj_incrementalcheckpoints00000';
    const anchor = { keyId: 'pgward-audit-anchor', privateKey: loadAnchorKey(api.anchorPem).privateKey };
    const keys = { current: 'k1', keys: new Map([['k1', K1]]) };
    const checkpointer = createCheckpointer(api.store, keys, anchor);
    const now = new Date('2026-03-02T00:00:00.000Z');
    const incremental: (AuditCheckpointSigned | undefined)[] = [];
    const whole: (AuditCheckpointSigned | undefined)[] = [];
    for (const [from, to] of [[0, 3], [3, 4], [4, 9]] as const) {
      await api.store.append(auditStream(project), Array.from({ length: to - from }, (_, i) => auditEvent(project, from + i + 1)), 'any');
      incremental.push(await checkpointer.sign(project, now));
      whole.push(await signProjectCheckpoint(api.store, project, keys, anchor, now));
    }
    expect(incremental.map((c) => c?.size)).toEqual(['3', '4', '9']);
    expect(incremental).toEqual(whole);
    await projected(project, 9);
    expect(incremental.at(-1)!.root).toBe(rootOf(await stored(project), 9).toString('base64'));
  });

  it('signs the same checkpoints from events handed over as appended, in order, out of order or not at all', async () => {
    const project = 'prj_handedovercheckpoints000000';
    const anchor = { keyId: 'pgward-audit-anchor', privateKey: loadAnchorKey(api.anchorPem).privateKey };
    const keys = { current: 'k1', keys: new Map([['k1', K1]]) };
    const checkpointer = createCheckpointer(api.store, keys, anchor);
    const now = new Date('2026-03-02T00:00:00.000Z');
    const batches = [[0, 3], [3, 4], [4, 9], [9, 12]] as const;
    const events = batches.map(([from, to]) => Array.from({ length: to - from }, (_, i) => auditEvent(project, from + i + 1)));
    const append = (i: number) => api.store.append(auditStream(project), events[i]!, 'any');
    // In order; then a batch that skips one (the signing reads both); then one the tree already took.
    await append(0);
    await append(1);
    await checkpointer.appended(project, 0, events[0]!);
    await checkpointer.appended(project, 3, events[1]!);
    const fed = [await checkpointer.sign(project, now)];
    await append(2);
    await append(3);
    await checkpointer.appended(project, 9, events[3]!);
    fed.push(await checkpointer.sign(project, now));
    await checkpointer.appended(project, 4, events[2]!);
    fed.push(await checkpointer.sign(project, now));
    expect(fed.map((c) => c?.size)).toEqual(['4', '12', '12']);
    expect(fed.at(-1)).toEqual(await signProjectCheckpoint(api.store, project, keys, anchor, now));
    await projected(project, 12);
    expect(fed.at(-1)!.root).toBe(rootOf(await stored(project), 12).toString('base64'));
  });
});
