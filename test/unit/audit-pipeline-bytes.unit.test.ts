/**
 * Every byte the audit pipeline stores or hashes for a fixed set of decisions, pinned: the events
 * ingest appends (id, payload, metadata), the Merkle root its checkpointer signs, and every
 * statement, parameter and COPY row the audit projection sends, from the handed-over entries and
 * from the stored bytes, unkeyed and keyed. A change that makes the pipeline cheaper must leave
 * this digest as it is; a change of what is stored changes it on purpose.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { auditProjection, auditStream, type AuditEventPayload } from '../../projections/audit.js';
import { recordingTx } from '../support/recording-tx.js';
import type { HmacKeyring } from '../../src/audit/chain.js';
import { createCheckpointer } from '../../src/audit/checkpointer.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import type { DecisionRecord, StatementDecided } from '../../src/events/audit.js';
import { decisionEvent } from '../../src/ingest/decision-event.js';
import type { EventStore, NewEvent, RecordedEvent } from '../../src/store/port.js';
import { decision, decisionV1, placed } from '../support/decisions.js';

// The events' ids are decisionEventId's sequential form; with the hashed form every other byte is the same,
// and the digest is 04caf150905f41cfc5d02b78424a0e42951a7ed366fa32a9f3256e1f90b7b48f. Latency histograms
// stored a row an octave (session 28) changed the projection's upserts alone: before, 0c06e7c2… (838ac1bd… hashed).
const PINNED = '8e662f646b7fc302b94de84ad3bd9eec5e9238c9f9312cbdcc45e4727958c3f6';

const keyrings: HmacKeyring[] = [{ keys: new Map() }, { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 7)]]) }];
const AT = '2026-11-27T02:00:00.000Z';
const anchor = loadAnchorKey(generateAnchorKey());

/** What bench:pipeline and pgbench -S send, v2 and v1, a refusal, then decisions of every shape the schemas accept (counts past 2^53 - 1 among them, which make gap markers). */
function decisions(): DecisionRecord[] {
  const pgbench = (n: number): StatementDecided =>
    placed({
      event: 'query', project_id: 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa', credential_id: 'agt_bbbbbbbbbbbbbbbbbbbbbbbb', session_id: `prx_1.1700000000.${n % 3}`, source: 'wire', region: 'local',
      client_ip: '127.0.0.1', ts: new Date(Date.parse('2026-11-26T10:59:59.990Z') + n * 7).toISOString(), sql: 'SELECT abalance FROM pgbench_accounts WHERE aid = $1',
      normalized_sql: 'SELECT abalance FROM pgbench_accounts WHERE aid = $1', query_hash: '0123456789abcdef', statement_kind: 'select', decision_rule: '', reason: '',
      cache_status: n % 4 === 0 ? 'hit' : 'bypass', rows_returned: '1', bytes_out: String(90 + n), latency_us: n % 5 === 0 ? null : 100 + n, tables_read: ['public.pgbench_accounts'],
      tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'prx_1', boot_epoch: 1, seq: String(n + 1), approval_id: null,
    });
  const fixed = Array.from({ length: 6 }, (_, n) => pgbench(n));
  const { ran_on: _r, replica_id: _i, upstream_region: _u, ...v1 } = pgbench(6);
  const refused = { ...pgbench(7), event: 'blocked' as const, decision_rule: 'policy.read_only', reason: 'writes are not allowed: "x"\t\\ é 😀', cache_status: 'none' as const, ran_on: null, upstream_region: null, latency_us: null };
  const sampled = [...fc.sample(decision, { seed: 17, numRuns: 60 }), ...fc.sample(decisionV1, { seed: 18, numRuns: 20 })];
  // A few projects, so that streams, revisions and tips interleave.
  return [...fixed, v1, refused, ...sampled.map((d, i) => ({ ...d, project_id: ['prj_aaaaaaaaaaaaaaaaaaaaaaaaaa', 'prj_cccccccccccccccccccccccccc'][i % 2]! }))];
}

/** A store for the checkpointer alone: its streams are what the test appended, its checkpoints are recorded. */
function checkpointStore(streams: ReadonlyMap<string, RecordedEvent[]>, signed: NewEvent[]): EventStore {
  return {
    readStream: async (stream: string, from = 0) => (streams.get(stream) ?? []).slice(from),
    append: async (_stream: string, events: NewEvent[]) => {
      signed.push(...events);
      return { nextExpectedRevision: signed.length - 1, position: BigInt(signed.length), duplicate: false };
    },
  } as unknown as EventStore;
}

async function pipelineBytes(keyring: HmacKeyring): Promise<unknown[]> {
  const out: unknown[] = [];
  const streams = new Map<string, RecordedEvent[]>();
  const handedByStream = new Map<string, (NewEvent & AuditEventPayload)[]>();
  for (const d of decisions()) {
    const event = decisionEvent(d, AT, 'sequential');
    out.push(event.id, event.type, Buffer.from(event.data).toString('hex'), Buffer.from(event.metadata).toString('hex'));
    const stream = auditStream(d.project_id);
    const recorded = streams.get(stream) ?? [];
    recorded.push({ id: event.id, type: event.type, data: Buffer.from(event.data), metadata: Buffer.from(event.metadata), stream, revision: recorded.length, position: 0n });
    streams.set(stream, recorded);
    handedByStream.set(stream, [...(handedByStream.get(stream) ?? []), event]);
  }
  const all = [...streams.values()].flat().map((event, i) => ({ ...event, position: BigInt(i + 1) }));
  const memo = new PreparedEntries();
  const signed: NewEvent[] = [];
  const checkpointer = createCheckpointer(checkpointStore(streams, signed), keyring, { keyId: 'golden', privateKey: anchor.privateKey }, memo);
  for (const [stream, handed] of handedByStream) {
    const projectId = stream.slice(auditStream('').length);
    // Two appends, so that a tree grows across them.
    await checkpointer.appended(projectId, 0, handed.slice(0, 3));
    await checkpointer.appended(projectId, 3, handed.slice(3));
    const record = await checkpointer.sign(projectId, new Date(AT));
    out.push(record?.size, record?.root);
  }
  for (const handed of [memo, undefined]) {
    const { tx, sent } = recordingTx();
    await (await auditProjection(keyring, handed).prepare!(all))(tx);
    out.push(sent);
  }
  // Decisions without a proxy share one event id, in both projects: the projection takes 75 of the 88 handed over.
  expect(memo.taken).toBe(75);
  return out;
}

describe('the bytes the audit pipeline stores and hashes', () => {
  it('are those pinned, unkeyed and keyed, from handed-over entries and from stored bytes', async () => {
    const digest = createHash('sha256');
    for (const keyring of keyrings) digest.update(JSON.stringify(await pipelineBytes(keyring)));
    expect(digest.digest('hex')).toBe(PINNED);
  });
});
