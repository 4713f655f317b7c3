import type { DecisionSink } from '../src/bus/port.js';
import { AUDIT_SQL_MAX, type StatementDecided } from '../src/events/audit.js';
import { auditSql } from './audit-text.js';

/** A decision as the session knows it; the publisher stamps the proxy's identity and sequence. */
export type Decision = Omit<StatementDecided, 'proxy_id' | 'boot_epoch' | 'seq'>;

/** What travels on the bus: a decision, or a marker for decisions this proxy had to drop. */
export type BusRecord =
  | { readonly kind: 'decision'; readonly decision: StatementDecided }
  /** Decisions queued together travel as one message: the bus costs per message, not per byte. */
  | { readonly kind: 'batch'; readonly decisions: readonly StatementDecided[] }
  | {
      readonly kind: 'gap';
      readonly project_id: string;
      readonly proxy_id: string;
      readonly boot_epoch: number;
      readonly from_seq: string;
      readonly to_seq: string;
      readonly count: string;
      readonly reason: string;
      readonly ts: string;
    }
  /** Wire sessions' connections opened and closed (one mark per login and per end, never per statement). */
  | { readonly kind: 'sessions'; readonly proxy_id: string; readonly boot_epoch: number; readonly sessions: readonly SessionMark[] };

/** A wire session's connection opened (its login completed; `at` is when the client connected) or closed. */
export interface SessionMark {
  readonly phase: 'opened' | 'closed';
  readonly project_id: string;
  readonly session_id: string;
  readonly credential_id: string;
  readonly at: string;
}

/** Session marks per bus message at most: a few hundred bytes each. */
const MARKS_PER_MESSAGE = 256;

/** Decisions per bus message at most; a message also stays within the bus's maxMessageBytes. */
const BATCH = 1024;
/**
 * How long a decision may wait for others to share its bus message. Every message has a cost of
 * its own wherever it goes, whatever it carries: on NATS about 140 µs of the server's CPU and
 * 300 µs of the clients' (the publish and its ack, ingest's delivery and ack), on the in-process
 * bus the relay to the pipeline worker. At 5,000 decisions a second 50 ms makes it about 250
 * decisions a message, where 20 ms made it 100 and the NATS server spent 10.5 µs a decision
 * instead of 6.5 (docs/benchmarks.md, session 14). Ingest holds each decision 200 ms before its
 * append anyway (ingest's APPEND_LINGER_MS), so the audit trail's lag barely moves. Strict decisions do not wait.
 */
const LINGER_MS = 50;

export interface PublisherStats {
  readonly depth: number;
  readonly dropped: number;
  readonly published: number;
}

interface Pending {
  /**
   * The record as JSON: a decision is serialized when it is queued, so the buffer holds one string
   * per decision rather than an object graph the garbage collector must trace while it waits.
   */
  readonly json: string;
  /** The last sequence number the record covers. */
  readonly seq: number;
  readonly done?: { resolve: () => void; reject: (error: Error) => void };
  /** A gap marker being sent (its message id, and what to merge back if the bus refuses it). */
  readonly gap?: { id: string; projectId: string; gap: Gap };
}

/** Sequence numbers are plain numbers: 2^53 decisions exceed any proxy's lifetime. */
interface Gap {
  from: number;
  to: number;
  count: number;
}

const BATCH_HEAD = '{"kind":"batch","decisions":[';
const BATCH_TAIL = ']}';
const COMMA = 0x2c;
/** Where batch messages are assembled: kept between messages, grown when one needs more. */
let batchScratch = Buffer.allocUnsafe(256 * 1024);

/**
 * A batch message from its decisions' JSON, each written straight into bytes: joining the strings
 * first and encoding the result would copy every decision twice more (about 2 µs each).
 */
export function batchMessage(decisions: readonly { readonly json: string }[]): Buffer {
  // UTF-8 takes at most three bytes per UTF-16 unit.
  let bound = BATCH_HEAD.length + BATCH_TAIL.length + decisions.length;
  for (const decision of decisions) bound += 3 * decision.json.length;
  if (batchScratch.length < bound) batchScratch = Buffer.allocUnsafe(bound);
  const scratch = batchScratch;
  let at = scratch.write(BATCH_HEAD, 0, 'latin1');
  for (let i = 0; i < decisions.length; i++) {
    if (i > 0) scratch[at++] = COMMA;
    at += scratch.write(decisions[i]!.json, at);
  }
  at += scratch.write(BATCH_TAIL, at, 'latin1');
  return Buffer.copyBytesFrom(scratch, 0, at);
}

/** A decision object's JSON members, its text as the audit entry keeps it. */
function objectMembers(decision: Decision): string {
  const json = JSON.stringify(decision.sql.length > AUDIT_SQL_MAX ? { ...decision, sql: auditSql(decision.sql) } : decision);
  return json.slice(1, -1);
}

/**
 * Hands decisions to the bus through a bounded buffer, never blocking the query path. When the
 * buffer is full a decision is dropped and counted, and as soon as the bus accepts again a gap
 * marker with the count and reason goes out for each project that lost entries. Every decision
 * takes the next sequence number, dropped or not, so ingest also sees the hole.
 */
export class DecisionPublisher {
  private readonly queue: Pending[] = [];
  private seq = 0;
  private draining = false;
  private lingering: NodeJS.Timeout | undefined;
  /** Strict decisions queued: they go out at once, and so do the decisions queued before them. */
  private strictQueued = 0;
  private closed = false;
  private dropped = 0;
  private published = 0;
  /** Whether the bus took the last record offered to it. */
  private busAccepting = true;
  private readonly gaps = new Map<string, Gap>();
  /** Session marks waiting for the bus, and how many were sent before the first of them (their message ids count from it). */
  private readonly marks: SessionMark[] = [];
  private marksSent = 0;
  /** The stamp's members up to the sequence number's digits. */
  private readonly stampHead: string;

  constructor(
    private readonly bus: DecisionSink,
    private readonly identity: { proxyId: string; bootEpoch: number },
    private readonly capacity: number,
    private readonly onPublishError: (error: unknown) => void = () => undefined,
  ) {
    this.stampHead = `,"proxy_id":${JSON.stringify(identity.proxyId)},"boot_epoch":${identity.bootEpoch},"seq":"`;
  }

  /** The record of a decision's members (JSON without braces, see decision-json.ts) with the proxy's identity and the next sequence number. */
  private stamp(members: string): Pending {
    this.seq += 1;
    return { json: `{${members}${this.stampHead}${this.seq}"}`, seq: this.seq };
  }

  /**
   * Best effort: queued, or dropped (and later reported in a gap marker) when the buffer is full.
   * Returns whether it was queued. A queued decision goes out LINGER_MS after the bus took the
   * message before (or after it was queued, when the publisher was idle), sharing its bus message
   * with the decisions that came meanwhile; at once when a full batch is queued.
   */
  publish(decision: Decision): boolean {
    return this.publishMembers(decision.project_id, objectMembers(decision));
  }

  /** `publish` for a record already encoded as JSON members, less the stamp, with its text truncated. */
  publishMembers(projectId: string, members: string): boolean {
    const pending = this.stamp(members);
    if (this.closed || this.queue.length >= this.capacity) {
      this.recordDrop(projectId, this.seq);
      return false;
    }
    this.queue.push(pending);
    if (this.queue.length >= BATCH) this.drain();
    else this.lingering ??= setTimeout(() => this.drain(), LINGER_MS);
    return true;
  }

  /** Strict audit: resolves once the bus holds the decision; rejects when it cannot be handed over. */
  publishStrict(decision: Decision): Promise<void> {
    const accepting = this.acceptingStrict();
    const pending = this.stamp(objectMembers(decision));
    if (!accepting) {
      this.recordDrop(decision.project_id, this.seq);
      return Promise.reject(new Error('the audit trail is not accepting records'));
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ ...pending, done: { resolve, reject } });
      this.strictQueued++;
      this.drain();
    });
  }

  /**
   * Best effort, like `publish`: a session's connection opened or closed. Marks take no sequence
   * number (they are not audit entries) and go out after the decisions queued before them.
   */
  publishSession(mark: SessionMark): boolean {
    if (this.closed || this.marks.length >= this.capacity) {
      this.dropped++;
      return false;
    }
    this.marks.push(mark);
    this.lingering ??= setTimeout(() => this.drain(), LINGER_MS);
    return true;
  }

  private recordDrop(projectId: string, seq: number): void {
    this.dropped++;
    this.mergeGap(projectId, { from: seq, to: seq, count: 1 });
  }

  private mergeGap(projectId: string, add: Gap): void {
    const gap = this.gaps.get(projectId);
    if (!gap) this.gaps.set(projectId, { ...add });
    else {
      gap.from = Math.min(gap.from, add.from);
      gap.to = Math.max(gap.to, add.to);
      gap.count += add.count;
    }
  }

  /**
   * The oldest queued decisions that fit one message: at most BATCH, and their bytes within the
   * bus's maxMessageBytes (at least one). Their exact UTF-8 length is counted only when three bytes
   * a UTF-16 unit (UTF-8's most) might not fit: counting every decision cost the proxy about a
   * microsecond each.
   */
  private takeBatch(): Pending[] {
    const room = this.bus.maxMessageBytes - BATCH_HEAD.length - BATCH_TAIL.length;
    const most = Math.min(this.queue.length, BATCH);
    let units = 0;
    for (let i = 0; i < most; i++) units += this.queue[i]!.json.length;
    if (3 * units + most <= room) return this.queue.slice(0, most);
    let bytes = 0;
    let count = 0;
    while (count < most) {
      bytes += Buffer.byteLength(this.queue[count]!.json) + 1;
      if (bytes > room && count > 0) break;
      count++;
    }
    return this.queue.slice(0, count);
  }

  /** The next message: the oldest queued decisions that fit in one (takeBatch), else a gap marker, else session marks. */
  private nextMessage(): { id: string; data: Buffer; taken: Pending[]; gap?: Pending['gap']; marks?: number } | undefined {
    const taken = this.takeBatch();
    // The BusRecord shapes, assembled from the decisions' JSON.
    const first = taken.length > 0 ? `${this.identity.proxyId}:${this.identity.bootEpoch}:${taken[0]!.seq}` : '';
    if (taken.length === 1) return { id: first, data: Buffer.from(`{"kind":"decision","decision":${taken[0]!.json}}`), taken };
    if (taken.length > 1) {
      return { id: `${first}..${taken.at(-1)!.seq}`, data: batchMessage(taken), taken };
    }
    const gap = this.gapMarker();
    if (gap?.gap) return { id: gap.gap.id, data: Buffer.from(gap.json), taken: [], gap: gap.gap };
    return this.marksMessage();
  }

  private marksMessage(): { id: string; data: Buffer; taken: Pending[]; marks: number } | undefined {
    if (this.marks.length === 0) return undefined;
    const sessions = this.marks.slice(0, MARKS_PER_MESSAGE);
    const record: BusRecord = { kind: 'sessions', proxy_id: this.identity.proxyId, boot_epoch: this.identity.bootEpoch, sessions };
    const id = `${this.identity.proxyId}:${this.identity.bootEpoch}:sessions:${this.marksSent + 1}-${this.marksSent + sessions.length}`;
    return { id, data: Buffer.from(JSON.stringify(record)), taken: [], marks: sessions.length };
  }

  private drain(): void {
    clearTimeout(this.lingering);
    this.lingering = undefined;
    if (this.draining) return;
    this.draining = true;
    void (async () => {
      try {
        for (let next = this.nextMessage(); next; next = this.due() ? this.nextMessage() : undefined) {
          try {
            await this.bus.publish({ id: next.id, data: next.data });
            this.busAccepting = true;
          } catch (error) {
            this.busAccepting = false;
            this.onPublishError(error);
            if (next.gap) this.mergeGap(next.gap.projectId, next.gap.gap);
            const strict = next.taken.filter((p) => p.done);
            if (strict.length > 0) {
              // Strict callers learn at once; the rest of the batch is retried.
              this.queue.splice(0, this.queue.length, ...this.queue.filter((p) => !p.done || !strict.includes(p)));
              this.strictQueued -= strict.length;
              for (const pending of strict) pending.done!.reject(error as Error);
              continue;
            }
            await new Promise((resolve) => setTimeout(resolve, 100));
            if (this.closed) break;
            continue;
          }
          this.queue.splice(0, next.taken.length);
          if (next.marks) {
            this.marks.splice(0, next.marks);
            this.marksSent += next.marks;
          }
          this.published += next.taken.length + (next.gap ? 1 : 0);
          for (const pending of next.taken) {
            if (!pending.done) continue;
            this.strictQueued--;
            pending.done.resolve();
          }
        }
      } finally {
        this.draining = false;
        // What came while the bus took the last message waits for more to share its message.
        if (!this.closed && this.pending()) this.lingering ??= setTimeout(() => this.drain(), LINGER_MS);
      }
    })();
  }

  /** Whether the next message goes out now rather than after a linger: a full batch, or a strict decision, waits. */
  private due(): boolean {
    return this.queue.length >= BATCH || this.strictQueued > 0;
  }

  private gapMarker(): Pending | undefined {
    const [projectId, gap] = this.gaps.entries().next().value ?? [];
    if (!projectId || !gap) return undefined;
    this.gaps.delete(projectId);
    const record: BusRecord = {
      kind: 'gap',
      project_id: projectId,
      proxy_id: this.identity.proxyId,
      boot_epoch: this.identity.bootEpoch,
      from_seq: String(gap.from),
      to_seq: String(gap.to),
      count: String(gap.count),
      reason: 'proxy_buffer_full',
      ts: new Date().toISOString(),
    };
    return { json: JSON.stringify(record), seq: gap.to, gap: { id: `${this.identity.proxyId}:${this.identity.bootEpoch}:gap:${gap.from}-${gap.to}`, projectId, gap } };
  }

  /**
   * Whether a statement under `audit_mode: strict` may run: its record would be queued (the buffer
   * has room) and the bus took the last record offered.
   */
  acceptingStrict(): boolean {
    return !this.closed && this.busAccepting && this.queue.length < this.capacity;
  }

  private pending(): boolean {
    return this.queue.length > 0 || this.gaps.size > 0 || this.marks.length > 0;
  }

  stats(): PublisherStats {
    return { depth: this.queue.length, dropped: this.dropped, published: this.published };
  }

  /** Stops taking decisions; waits (bounded) for the buffer to drain. */
  async close(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    this.closed = true;
  }
}
