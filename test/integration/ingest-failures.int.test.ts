/**
 * The audit ingest path where it goes wrong, against the real PostgreSQL event store and the in-process bus:
 * - a hole whose late records arrive after the proxy's own gap marker explained the rest of it is
 *   not recorded a second time (HoleTracker);
 * - a hole whose recording failed (the store refused the append) is recorded by a later sweep, not
 *   lost; a sweep called while another is recording returns only after it;
 * - after a restart, records appended before it are no hole, and a hole is recorded only where the
 *   store lacks its records;
 * - an append that falls back to one event at a time (a redelivered record in the same append as
 *   new ones) still signs the checkpoint its new events cross (AppendBatcher sizes);
 * - a projection transaction whose connection dies while the pooled client is checked out rejects,
 *   and does not take the process down with an unhandled 'error' event.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { applyBatch } from '../../projections/runner.js';
import type { Projection } from '../../projections/projection.js';
import { auditProjection, auditStream, checkpointStream } from '../../projections/audit.js';
import { createCheckpointer } from '../../src/audit/checkpointer.js';
import { PreparedEntries } from '../../src/audit/prepared-entries.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { AuditCheckpointSigned, AuditGapRecorded, StatementDecided } from '../../src/events/audit.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore } from '../../src/store/postgres.js';
import { decisionEventId, decisionEvents, legacyDecisionEventId } from '../../src/ingest/decision-event.js';
import type { RunningIngest } from '../../src/ingest/ingest.js';
import { useIngestFixture } from '../support/ingest-fixture.js';
import { admin } from '../support/pg.js';
import { waitFor } from '../support/wire.js';

const PROJECT = 'prj_ingestfailures0000000000';
const fixture = useIngestFixture('ingest_failures', PROJECT, 'failing-proxy');
const { decisionAt, publish, batch, trail } = fixture;
const proxyGap = (from: number, to: number) => fixture.gap(from, to, 'bus_unavailable');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const gapMarkers = async () => (await trail()).filter((e) => e.type === AuditGapRecorded.type).map((e) => e.data);

describe('ingest: holes in a proxy sequence', () => {
  it('records no second marker for the part of a hole the proxy’s own gap marker explained, when the rest of the hole arrives late', async () => {
    // A grace long enough that the hole 3..10 is not due before 3..4 arrive.
    const ingest = await fixture.start({ holeGraceMs: 1_500 });
    await publish(batch(1, 2));
    await waitFor(async () => (await trail()).length === 2, 10_000, '1..2 appended');
    // The proxy dropped 5..10 and says so; 3..4 are late (e.g. a publish retried).
    await publish(proxyGap(5, 10));
    await waitFor(async () => (await trail()).length === 3, 10_000, 'the proxy’s marker appended');
    await publish(batch(11));
    await waitFor(async () => (await trail()).length === 4, 10_000, '11 appended');
    await publish(batch(3, 4));
    await waitFor(async () => (await trail()).length === 6, 10_000, '3..4 appended');
    await sleep(1_600);
    await ingest.sweepHoles();
    // Nothing is missing that the proxy did not report: 5..10 is one marker, not two (entries_dropped would count 12).
    expect(await gapMarkers()).toEqual([expect.objectContaining({ from_seq: '5', to_seq: '10', reason: 'bus_unavailable' })]);
  });

  it('records a hole whose first recording the store refused, at a later sweep', async () => {
    // The store refuses gap markers for a while (here a constraint; a failover or a full disk alike).
    await admin(fixture.db.url, (client) => client.query(`alter table pgward.events add constraint no_gap_markers check (type <> '${AuditGapRecorded.type}') not valid`));
    const ingest = await fixture.start({ holeGraceMs: 50 });
    await publish(batch(1));
    await publish(batch(3));
    await waitFor(async () => (await trail()).length === 2, 10_000, '1 and 3 appended');
    await sleep(100);
    // This sweep (or the timer's, if it came first) tries to record 2..2 and fails.
    await ingest.sweepHoles().catch(() => 0);
    await admin(fixture.db.url, (client) => client.query('alter table pgward.events drop constraint no_gap_markers'));
    await ingest.sweepHoles();
    expect(await gapMarkers()).toEqual([expect.objectContaining({ from_seq: '2', to_seq: '2', reason: 'sequence_hole' })]);
  });

  it('a sweep called while the timer’s sweep is recording a hole returns once that sweep’s marker is stored', async () => {
    // A grace long enough that the hole 2..2 is not due before the store is locked.
    const ingest = await fixture.start({ holeGraceMs: 1_500 });
    await publish(batch(1));
    await publish(batch(3));
    await waitFor(async () => (await trail()).length === 2, 1_000, '1 and 3 appended');
    // The store holds the timer's sweep at its first query, the check of which of 2..2 it lacks.
    const blocker = new pg.Client({ connectionString: fixture.db.url });
    await blocker.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table pgward.events in access exclusive mode');
      // From another session: one in a transaction sees the activity of its transaction's start.
      const holeChecksWaiting = () =>
        admin(fixture.db.url, async (client) => {
          const { rows } = await client.query<{ n: string }>(
            "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'select event_id from pgward.events where event_id = any%'",
          );
          return Number(rows[0]!.n);
        });
      await waitFor(async () => (await holeChecksWaiting()) === 1, 5_000, 'the timer’s sweep waiting on the store');
      let returned = false;
      const swept = ingest.sweepHoles().then(() => (returned = true));
      await sleep(300);
      expect(returned).toBe(false);
      await blocker.query('commit');
      await swept;
    } finally {
      await blocker.end();
    }
    expect(await gapMarkers()).toEqual([expect.objectContaining({ from_seq: '2', to_seq: '2', reason: 'sequence_hole' })]);
  });
});

/**
 * With 1..10 stored, an ingest that knows nothing of the proxy's sequence gets record 5 again (not
 * acknowledged before a restart, say), then 11 and 13: the jump from 5 to 11 is no hole, 6..10
 * being in the store already; only 12, which never arrived, is recorded.
 */
async function replayOverStoredRun(ingest: RunningIngest): Promise<void> {
  await publish(batch(5));
  await publish(batch(11));
  await publish(batch(13));
  await waitFor(async () => (await trail()).length === 12, 10_000, '11 and 13 appended');
  await sleep(100);
  await ingest.sweepHoles();
  expect(await gapMarkers()).toEqual([expect.objectContaining({ from_seq: '12', to_seq: '12', count: '1', reason: 'sequence_hole' })]);
}

describe('ingest: holes after a restart', () => {
  it('records no hole for records appended before the restart, and only the part of a hole the store lacks', async () => {
    const ingest = await fixture.start({ holeGraceMs: 50 });
    await publish(batch(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
    await waitFor(async () => (await trail()).length === 10, 10_000, '1..10 appended');
    await ingest.stop();
    await replayOverStoredRun(await fixture.start({ holeGraceMs: 50 }));
  });
});

describe('ingest: the form of decisions’ event ids', () => {
  const ids = async () => (await fixture.store.readStream(auditStream(PROJECT))).map((e) => ({ seq: JSON.parse(Buffer.from(e.data).toString()).seq as string | undefined, id: e.id }));
  const sequential = (...seqs: bigint[]) => seqs.map((n) => ({ seq: String(n), id: decisionEventId('failing-proxy', 1, n) }));
  const hashed = (...seqs: bigint[]) => seqs.map((n) => ({ seq: String(n), id: legacyDecisionEventId('failing-proxy', 1, n) }));

  it('a new store gets sequential ids and keeps them after a restart, where a record delivered again is appended once', async () => {
    let ingest = await fixture.start();
    await publish(batch(1, 2));
    await waitFor(async () => (await trail()).length === 2, 10_000, '1..2 appended');
    await ingest.stop();
    ingest = await fixture.start();
    await publish(batch(2, 3));
    await waitFor(async () => (await trail()).length === 3, 10_000, '3 appended');
    await sleep(300);
    expect(await ids()).toEqual(sequential(1n, 2n, 3n));
    expect(await fixture.store.decisionIdForm!()).toBe('sequential');
  });

  it('a store made by this release stays sequential when migrated again with decisions in it', async () => {
    await fixture.start();
    await publish(batch(1));
    await waitFor(async () => (await trail()).length === 1, 10_000, '1 appended');
    await (await createPostgresEventStore(fixture.db.url, { poolSize: 1 })).close();
    expect(await fixture.store.decisionIdForm!()).toBe('sequential');
  });

  it('an ingest refuses to start on a store whose form it does not know, or whose form is lost', async () => {
    await admin(fixture.db.url, (client) => client.query(`update pgward.store_settings set value = 'later' where name = 'decision_ids'`));
    await expect(fixture.start()).rejects.toThrow('pgward.store_settings decision_ids is "later"; this release knows "sequential" and "hashed"');
    await admin(fixture.db.url, (client) => client.query('delete from pgward.store_settings'));
    await expect(fixture.start()).rejects.toThrow('pgward.store_settings decision_ids is missing');
  });

  /**
   * The store as an earlier release made it (no store_settings; migrated by this release since), with
   * decisions `seqs` stored by that release's ingest under their hashed ids.
   */
  async function storedByEarlierRelease(...seqs: number[]): Promise<void> {
    await admin(fixture.db.url, (client) => client.query('drop table pgward.store_settings'));
    await (await createPostgresEventStore(fixture.db.url, { poolSize: 1 })).close();
    await fixture.store.append(auditStream(PROJECT), decisionEvents(seqs.map(decisionAt), new Date().toISOString(), 'hashed'), 'any');
  }

  it('a store that held decisions before keeps hashed ids: a record delivered again (repacked by its proxy, say) is appended once, its new decisions after it', async () => {
    await storedByEarlierRelease(1, 2, 3);
    await fixture.start();
    await publish(batch(1, 2, 3, 4));
    await waitFor(async () => (await trail()).length === 4, 10_000, '4 appended');
    await sleep(300);
    expect(await ids()).toEqual(hashed(1n, 2n, 3n, 4n));
    expect(await fixture.store.decisionIdForm!()).toBe('hashed');
  });

  it('in a store of hashed ids the hole check finds the stored decisions, and records a real hole', async () => {
    await storedByEarlierRelease(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    await replayOverStoredRun(await fixture.start({ holeGraceMs: 50 }));
    expect(await trail()).toHaveLength(13);
  });
});

describe('ingest: checkpoints', () => {
  it('signs a checkpoint the store refused once it accepts again, and acknowledges the entries meanwhile', async () => {
    await admin(fixture.db.url, (client) => client.query(`alter table pgward.events add constraint no_checkpoints check (type <> '${AuditCheckpointSigned.type}') not valid`));
    const keys = { keys: new Map<string, Buffer>() };
    const anchor = loadAnchorKey(generateAnchorKey());
    await fixture.start({ checkpoints: { every: 5, keys, anchor: { keyId: 'failing-anchor', privateKey: anchor.privateKey } } });
    await publish(batch(1, 2, 3, 4, 5, 6));
    await waitFor(async () => (await trail()).length === 6, 10_000, '1..6 appended');
    // The records were acknowledged: nothing is redelivered.
    await sleep(700);
    expect((await trail()).length).toBe(6);
    expect(await fixture.store.readStream(checkpointStream(PROJECT))).toEqual([]);
    await admin(fixture.db.url, (client) => client.query('alter table pgward.events drop constraint no_checkpoints'));
    await waitFor(async () => (await fixture.store.readStream(checkpointStream(PROJECT))).length === 1, 3_000, 'the checkpoint signed');
    const [signed] = await fixture.store.readStream(checkpointStream(PROJECT));
    expect(JSON.parse(Buffer.from(signed!.data).toString('utf8'))).toMatchObject({ project_id: PROJECT, size: '6' });
  });

  it('signs the checkpoint an append crosses when a redelivered record shares the append with new ones', async () => {
    const anchor = loadAnchorKey(generateAnchorKey());
    const keys = { keys: new Map() };
    await fixture.start({ checkpoints: { every: 10, keys, anchor: { keyId: 'failing-anchor', privateKey: anchor.privateKey } } });
    await publish(batch(1, 2, 3, 4, 5, 6, 7, 8));
    await waitFor(async () => (await trail()).length === 8, 10_000, '1..8 appended');
    // 9..12 are new; 7..8 come again (the proxy retried a publish whose ack it lost) and land in the same append.
    await publish(batch(9, 10, 11, 12));
    await publish(batch(7, 8));
    await waitFor(async () => (await trail()).length === 12, 10_000, '9..12 appended');
    await sleep(200);
    const signed = (await fixture.store.readStream(checkpointStream(PROJECT))).map((e) => (JSON.parse(Buffer.from(e.data).toString('utf8')) as { size: string }).size);
    // The stream went from 8 to 12 entries, past 10: a checkpoint is due.
    expect(signed).toEqual(['12']);
  });
});

describe('entries handed to the projection', () => {
  it('an entry handed over after the projection already read its event does not hold appends back', async () => {
    const anchor = loadAnchorKey(generateAnchorKey());
    const keys = { keys: new Map() };
    const handed = new PreparedEntries(4);
    const checkpointer = createCheckpointer(fixture.store, keys, { keyId: 'failing-anchor', privateKey: anchor.privateKey }, handed);
    const projection = auditProjection(keys, handed);
    const stream = auditStream(PROJECT);
    const eventsFor = (from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, i) => {
        const d = decisionAt(from + i);
        return { ...encodeEvent(StatementDecided, d, { event_id: `00000000-0000-4000-8000-${String(from + i).padStart(12, '0')}`, correlation_id: 'ingest', actor: 'ingest', at: d.ts }), decision: d };
      });
    // Appends 1..2 commit; the projection's read of the log comes back before ingest handles the append's reply.
    const first = eventsFor(1, 2);
    await fixture.store.append(stream, first, 'any');
    await projection.prepare!(await fixture.store.readAll(-1n, { streamPrefixes: ['audit-'] }));
    await checkpointer.appended(PROJECT, 0, first);
    // Appends 3..4 in the usual order: handed over, then read and taken by the projection.
    const next = eventsFor(3, 4);
    const { position } = await fixture.store.append(stream, next, 'any');
    await checkpointer.appended(PROJECT, 2, next);
    await projection.prepare!(await fixture.store.readAll(position - 2n, { streamPrefixes: ['audit-'] }));
    // Nothing waits for the projection: the two entries left are of events it read before they were handed over.
    const started = performance.now();
    await handed.room();
    expect(performance.now() - started).toBeLessThan(200);
  });
});

/**
 * Runs `work` with a pool, a projection that writes nothing of its own, and a record of uncaught
 * exceptions (Vitest reports any of the run too; this makes the test itself say so).
 */
async function withLostConnectionHarness(name: string, work: (pool: pg.Pool, projection: Projection, uncaught: unknown[]) => Promise<void>): Promise<void> {
  const pool = createPool(fixture.db.url, { max: 2 });
  const uncaught: unknown[] = [];
  const onUncaught = (error: unknown) => uncaught.push(error);
  process.prependListener('uncaughtException', onUncaught);
  try {
    await pool.query('create table if not exists pgward.projection_checkpoints (name text primary key, position bigint not null, updated_at timestamptz not null default now())');
    await work(pool, { name, streamPrefixes: [], tables: [], apply: async () => undefined } as unknown as Projection, uncaught);
  } finally {
    process.removeListener('uncaughtException', onUncaught);
    await pool.end();
  }
}

describe('projection transactions', () => {
  it('a connection lost while the projection’s client is checked out rejects the batch, with no unhandled error', async () => {
    await withLostConnectionHarness('lost-connection', async (pool, projection, uncaught) => {
      await pool.query('create table if not exists public.copied (n integer)');
      const killed = applyBatch(pool, projection, 'public', [], -1n, 0n, async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('select pg_backend_pid() as pid');
        await admin(fixture.db.url, (client) => client.query('select pg_terminate_backend($1)', [rows[0]!.pid]));
        await sleep(200);
        await tx.copyIn('copied', ['n'], Buffer.from('1\n'));
      });
      await expect(killed).rejects.toThrow();
      await sleep(200);
      expect(uncaught).toEqual([]);
      // The pool goes on with a new connection.
      expect((await pool.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    });
  });
});

describe('COPY through copyIn', () => {
  it('a connection lost in the middle of a COPY rejects the batch and leaves nothing behind, with no unhandled error', async () => {
    await withLostConnectionHarness('lost-connection-copy', async (pool, projection, uncaught) => {
      await pool.query('create table if not exists public.copied_big (n integer, t text)');
      const filler = 'x'.repeat(1_000);
      const rows = Buffer.from(Array.from({ length: 100_000 }, (_, n) => `${n}\t${filler}\n`).join(''), 'utf8');
      let sawCopy = false;
      const killed = applyBatch(pool, projection, 'public', [], -1n, 0n, async (tx) => {
        const { rows: me } = await tx.query<{ pid: number }>('select pg_backend_pid() as pid');
        const pid = me[0]!.pid;
        const copying = tx.copyIn('copied_big', ['n', 't'], rows);
        copying.catch(() => undefined);
        await admin(fixture.db.url, async (client) => {
          const deadline = Date.now() + 5_000;
          while (Date.now() < deadline) {
            const { rows: active } = await client.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where pid = $1 and state = 'active' and query ilike 'copy%'`, [pid]);
            if (active[0]!.n > 0) {
              sawCopy = true;
              await client.query('select pg_terminate_backend($1)', [pid]);
              return;
            }
          }
        });
        await copying;
      });
      await expect(killed).rejects.toThrow();
      expect(sawCopy).toBe(true);
      await sleep(200);
      expect(uncaught).toEqual([]);
      // Rolled back: the server ended the transaction with the session; the pool goes on with a new connection.
      expect((await pool.query<{ n: number }>('select count(*)::int as n from public.copied_big')).rows).toEqual([{ n: 0 }]);
    });
  });
});
