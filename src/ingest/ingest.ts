import { setImmediate } from 'node:timers/promises';
import type { Logger } from 'pino';
import { z } from 'zod';
import { auditStream, type AuditEventPayload } from '../../projections/audit.js';
import type { BusRecord } from '../../proxy/decisions.js';
import { INGEST_DURABLE, type Consumer, type DecisionBus, type Delivery } from '../bus/port.js';
import { AuditGapRecorded } from '../events/audit.js';
import { connectionStream } from '../../projections/connections.js';
import { SessionsRecord, WireSessionClosed, WireSessionOpened } from '../events/connections.js';
import { encodeEvent, parseJson, type EventDefinition, type EventMetadata } from '../events/envelope.js';
import { parseStatementDecided } from '../events/statement-decided-check.js';
import type { EventStore, NewEvent } from '../store/port.js';
import type { HmacKeyring } from '../audit/chain.js';
import type { AnchorSigner } from '../audit/checkpoints.js';
import { createCheckpointer } from '../audit/checkpointer.js';
import type { PreparedEntries } from '../audit/prepared-entries.js';
import type { CommittedWriter } from '../store/committed-feed.js';
import { AppendBatcher } from './batcher.js';
import { decisionEvents, decisionIdIn, ingestMetadata } from './decision-event.js';
import { HoleTracker, missingRuns, type Hole } from './holes.js';

export { eventIdFor } from './decision-event.js';

/** Holes up to this many records are checked against the store before they are recorded; the ids are looked up this many at a time. */
const HOLE_CHECK_MAX = 100_000n;
const HOLE_CHECK_CHUNK = 10_000n;

const GapRecord = z.object({
  kind: z.literal('gap'),
  project_id: z.string(),
  proxy_id: z.string(),
  boot_epoch: z.number(),
  from_seq: z.string(),
  to_seq: z.string(),
  count: z.string(),
  reason: z.string(),
  ts: z.string(),
});

/** Told what ingest did (the process's metrics). */
export interface IngestObserver {
  /** A bus record: appended, dropped (not JSON, or not an audit record), or failed (the bus delivers it again). */
  record(outcome: 'appended' | 'dropped' | 'failed'): void;
  /** A gap marker appended, for `count` decisions lost. */
  gap(reason: string, count: number): void;
  /** A due checkpoint could not be signed (it is tried again). */
  checkpointFailed(): void;
}

export interface IngestOptions {
  readonly store: EventStore;
  readonly bus: DecisionBus;
  readonly logger: Logger;
  /** How long a hole in a proxy's sequence may wait for the proxy's own gap marker before ingest records it. */
  readonly holeGraceMs?: number;
  /**
   * Signs a checkpoint each time a project's chain reaches a multiple of `every` entries. The entries
   * prepared for it go to `handOn`, for an audit projection in the same process; each append then
   * waits while that projection has many of them to take (PreparedEntries.room).
   */
  readonly checkpoints?: { readonly every: number; readonly keys: HmacKeyring; readonly anchor: AnchorSigner; readonly handOn?: PreparedEntries };
  /** Each committed append is handed to it, for the subscribers of the audit streams in the same process (the audit projection, anomaly_windows). */
  readonly feed?: CommittedWriter;
  readonly now?: () => Date;
  /** Bus messages handled at once (DEFAULT_MAX_IN_FLIGHT unless given); the records that arrive together are appended in one transaction per project. */
  readonly maxInFlight?: number;
  /** A project's appends start at least this far apart (AppendBatcher's linger); APPEND_LINGER_MS unless given. */
  readonly appendLingerMs?: number;
  readonly observe?: IngestObserver;
}

/**
 * Under load, a project's decisions of 200 ms go in one append (at most MAX_EVENTS_PER_APPEND): at
 * a few thousand decisions a second that is several hundred events per transaction of the store and
 * per batch of each projection that follows. Each append and each batch has a cost of its own
 * (round trips, the append lock, commits, wake-ups, and the projection's rollup rows: one per hour,
 * day and latency bucket a batch touches, however many entries fall in it), which at 50 ms was the
 * larger part of the state database's CPU a decision (docs/benchmarks.md). It adds at most that
 * much to the audit trail's lag; a decision is still acknowledged only once its append committed.
 */
export const APPEND_LINGER_MS = 200;

/**
 * A proxy's bus message carries about 200 decisions at 10,000 a second (up to 1,024): 64 of them
 * are some 13,000 decisions being parsed and appended, seconds of traffic, and bound what a
 * backlog (after an outage) puts in ingest's memory at once.
 */
export const DEFAULT_MAX_IN_FLIGHT = 64;

export interface RunningIngest {
  stop(): Promise<void>;
  /**
   * Records unexplained holes whose grace period passed, after any sweep in flight (the timer runs
   * one every second): once it resolves, every hole due when it was called is recorded.
   */
  sweepHoles(): Promise<number>;
}

/**
 * The ingest role: a durable bus consumer that appends decisions and gap markers to each project's
 * audit stream, acknowledging only after the append committed. Event ids derive from the proxy's
 * (proxy_id, boot_epoch, seq), so a redelivered record never appears twice. A hole in a proxy's
 * sequence that no gap marker explains within the grace period is recorded as a gap marker of its own.
 */
export async function startIngest(options: IngestOptions): Promise<RunningIngest> {
  const { store, logger, observe } = options;
  const now = options.now ?? (() => new Date());
  const holes = new HoleTracker(options.holeGraceMs ?? 30_000);

  const cadence = options.checkpoints;
  const checkpointer = cadence && createCheckpointer(store, cadence.keys, cadence.anchor, cadence.handOn);
  /**
   * Projects whose due checkpoint could not be signed (the store refused its event): signed with the
   * project's next append, or by the timer within a second. The entries it covers are committed all
   * the same, and acknowledged: their redelivery would append nothing, and so sign nothing.
   */
  const unsigned = new Set<string>();
  const sign = async (projectId: string): Promise<void> => {
    try {
      await checkpointer!.sign(projectId, now());
      unsigned.delete(projectId);
    } catch (error) {
      unsigned.add(projectId);
      observe?.checkpointFailed();
      logger.error({ err: error, project_id: projectId }, 'signing an audit checkpoint failed; it is tried again');
    }
  };
  // A decision's event carries the decision it was encoded from, for the checkpointer.
  const { feed } = options;
  const batcher = new AppendBatcher<NewEvent & AuditEventPayload>(
    store,
    async (stream, before, after, landed) => {
      const projectId = stream.slice(auditStream('').length);
      // The tree takes what was just committed, so a signing need not read it back; its entries are
      // handed on before the events, so the projection finds them prepared.
      if (landed && checkpointer) await checkpointer.appended(projectId, before, landed.events);
      if (landed) feed?.committed(stream, before, landed.events, landed.result);
      if (!cadence || !checkpointer) return;
      if (Math.floor(after / cadence.every) > Math.floor(before / cadence.every) || unsigned.has(projectId)) await sign(projectId);
      // The stream's next append waits while the projection of this process has many entries to take.
      await cadence.handOn?.room();
    },
    options.appendLingerMs ?? APPEND_LINGER_MS,
    feed,
  );

  const metadataFor = (key: string): EventMetadata => ingestMetadata(key, now().toISOString());
  const append = <S extends z.ZodType>(definition: EventDefinition<string, S>, data: z.input<S>, projectId: string, key: string): Promise<void> =>
    batcher.append(auditStream(projectId), encodeEvent(definition, data, metadataFor(key)));

  const recordHole = async (hole: Hole): Promise<void> => {
    const count = hole.to - hole.from + 1n;
    await append(
      AuditGapRecorded,
      { project_id: hole.projectId, proxy_id: hole.proxyId, boot_epoch: hole.bootEpoch, from_seq: String(hole.from), to_seq: String(hole.to), count: String(count), reason: 'sequence_hole', ts: now().toISOString() },
      hole.projectId,
      `hole:${hole.proxyId}:${hole.bootEpoch}:${hole.from}-${hole.to}`,
    );
    observe?.gap('sequence_hole', Number(count));
  };

  /**
   * Each mark its own append to its project's connection stream, its event id derived from the
   * session and phase: a redelivered mark is a duplicate the store ignores. A few per session, so
   * no batching is needed.
   */
  const appendSessionMarks = async (record: SessionsRecord): Promise<void> => {
    for (const mark of record.sessions) {
      const metadata = metadataFor(`session:${record.proxy_id}:${record.boot_epoch}:${mark.session_id}:${mark.phase}`);
      const event =
        mark.phase === 'opened'
          ? encodeEvent(WireSessionOpened, { project_id: mark.project_id, session_id: mark.session_id, credential_id: mark.credential_id, at: mark.at }, metadata)
          : encodeEvent(WireSessionClosed, { project_id: mark.project_id, session_id: mark.session_id, at: mark.at }, metadata);
      await store.append(connectionStream(mark.project_id), [event], 'any');
    }
  };

  // One form of decisions' event ids for every ingest of the store, so that a redelivered record,
  // whichever ingest handles it, is the event it was (docs/audit.md, "Event ids").
  const idForm = (await store.decisionIdForm?.()) ?? 'hashed';
  const decisionId = decisionIdIn(idForm);

  const handle = async (delivery: Delivery): Promise<'appended' | 'dropped'> => {
    // Each record in a turn of the event loop of its own: the bus starts the records it delivers
    // together on microtasks, which would otherwise parse and encode all of them (a backlog's
    // worth of batches) before the store's replies meanwhile are handled.
    await setImmediate();
    let record: BusRecord;
    try {
      record = parseJson(delivery.data) as BusRecord;
    } catch {
      logger.error({ id: delivery.id }, 'a bus record is not JSON; dropped');
      return 'dropped';
    }
    if (record.kind === 'gap') {
      const gap = GapRecord.parse(record);
      await append(
        AuditGapRecorded,
        { project_id: gap.project_id, proxy_id: gap.proxy_id, boot_epoch: gap.boot_epoch, from_seq: gap.from_seq, to_seq: gap.to_seq, count: gap.count, reason: gap.reason, ts: gap.ts },
        gap.project_id,
        `gap:${gap.proxy_id}:${gap.boot_epoch}:${gap.from_seq}-${gap.to_seq}`,
      );
      holes.explain(gap.proxy_id, gap.boot_epoch, BigInt(gap.from_seq), BigInt(gap.to_seq));
      observe?.gap(gap.reason, Number(gap.count));
      return 'appended';
    }
    if (record.kind === 'sessions') {
      await appendSessionMarks(SessionsRecord.parse(record));
      return 'appended';
    }
    const decisions = (record.kind === 'batch' ? record.decisions : [record.decision]).map(parseStatementDecided);
    const events = decisionEvents(decisions, now().toISOString(), idForm);
    // One append call a stream: a message's decisions are mostly of one project.
    const byStream = new Map<string, (NewEvent & AuditEventPayload)[]>();
    for (let i = 0; i < decisions.length; i++) {
      const decision = decisions[i]!;
      if (decision.proxy_id !== null && decision.boot_epoch !== null && decision.seq !== null) holes.saw(decision.proxy_id, decision.boot_epoch, BigInt(decision.seq), decision.project_id);
      const stream = auditStream(decision.project_id);
      const streamEvents = byStream.get(stream);
      if (streamEvents) streamEvents.push(events[i]!);
      else byStream.set(stream, [events[i]!]);
    }
    await Promise.all(Array.from(byStream, ([stream, streamEvents]) => batcher.appendAll(stream, streamEvents)));
    return 'appended';
  };

  let lastDelivery = 0;
  const consumer: Consumer = await options.bus.consume({ durable: INGEST_DURABLE, maxInFlight: options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, retryDelayMs: 500 }, async (delivery) => {
    lastDelivery = Date.now();
    try {
      const outcome = await handle(delivery);
      observe?.record(outcome);
    } catch (error) {
      if (error instanceof z.ZodError) {
        observe?.record('dropped');
        logger.error({ id: delivery.id, issues: error.issues.slice(0, 3) }, 'a bus record does not match the audit schema; dropped');
        return;
      }
      observe?.record('failed');
      throw error;
    }
  });

  /**
   * The parts of a hole whose decisions the store does not hold. After a restart the tracker starts
   * from the first record it sees, which may be a redelivered one older than records appended and
   * acknowledged before: the jump to the next new record then looks like a hole it is not.
   */
  const stillMissing = async (hole: Hole): Promise<Hole[]> => {
    if (!store.storedEventIds || hole.to - hole.from + 1n > HOLE_CHECK_MAX) return [hole];
    const present = new Set<bigint>();
    for (let from = hole.from; from <= hole.to; from += HOLE_CHECK_CHUNK) {
      const ids = new Map<string, bigint>();
      for (let seq = from; seq <= hole.to && seq < from + HOLE_CHECK_CHUNK; seq++) ids.set(decisionId(hole.proxyId, hole.bootEpoch, seq), seq);
      for (const id of await store.storedEventIds([...ids.keys()])) present.add(ids.get(id)!);
    }
    return missingRuns(hole, present).map((run) => ({ ...hole, ...run }));
  };

  const sweepDue = async (): Promise<number> => {
    const due = holes.due(Date.now());
    let recorded = 0;
    try {
      for (const hole of due) {
        for (const part of await stillMissing(hole)) await recordHole(part);
        recorded += 1;
      }
    } catch (error) {
      // A hole that could not be recorded (the store refused or was unreachable) stays in the
      // tracker for the next sweep; dropped here, nothing would ever record the loss.
      holes.retry(due.slice(recorded));
      throw error;
    }
    return due.length;
  };
  // One sweep at a time: a sweep takes the holes due out of the tracker before it records them, so
  // a second sweep meanwhile would find nothing due and return before the first one's markers land.
  let sweeping: Promise<number> | undefined;
  const sweepHoles = async (): Promise<number> => {
    while (sweeping) await sweeping.catch(() => undefined);
    sweeping = sweepDue().finally(() => {
      sweeping = undefined;
    });
    return sweeping;
  };
  const timer = setInterval(() => {
    if (!sweeping) void sweepHoles().catch((error: unknown) => logger.error({ err: error }, 'recording sequence holes failed'));
    for (const projectId of unsigned) void sign(projectId);
  }, 1_000);
  timer.unref();

  return {
    sweepHoles,
    async stop() {
      clearInterval(timer);
      // Let records still arriving (the proxy flushes its buffer as it stops) land before stopping: bounded.
      const deadline = Date.now() + 3_000;
      while (Date.now() - lastDelivery < 200 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      await consumer.stop();
    },
  };
}
