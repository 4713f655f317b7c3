import type { CacheOutcome } from './cache/caches.js';
import { commandTag, encodeErrorResponse, type ErrorFields, type ScannedMessage, type TransactionStatus } from './protocol/backend.js';

/** A statement whose completion is audited: rows and bytes are counted from its replies. */
export interface Statement {
  /** Its audit record's members that its text and analysis fix (decision-json.ts `textMembers`). */
  readonly text: string;
  /** What the policy decided before it ran: `masked` when it runs with column masks. */
  readonly event: 'query' | 'masked';
  readonly rule: string;
  readonly reason: string;
  /** performance.now() when it was sent. */
  readonly startedAt: number;
  readonly ts: string;
  rows: number;
  bytes: number;
  failed: boolean;
  /** Its connection closed before its end was seen (the client left, or the upstream was lost): it may have run. */
  lost: boolean;
  /** The policy's row cap cut its result short. */
  truncated: boolean;
  /**
   * What the gateway decided once it saw the statement's end (a write over max_affected_rows, a
   * write rolled back under write_mode rollback): recorded instead of the decision before it ran.
   */
  verdict?: { readonly event: 'blocked' | 'query' | 'masked'; readonly rule: string; readonly reason: string; readonly rows: number } | undefined;
  /** Called as it finishes, `ok` unless it failed (the cursors it declared or closed are confirmed then). */
  settled?: ((ok: boolean) => void) | undefined;
  /** The approval request it runs under: its audit record names it, and hears its command tags through `tagged`. */
  approvalId?: string | undefined;
  tagged?: ((tag: string) => void) | undefined;
  /** What the result cache made of it (cache/session-cache.ts); `bypass` when unset. */
  cache?: CacheOutcome | undefined;
  /** The read replica whose connection it was sent on (this data plane's, or the peer's it was relayed to); undefined on the primary (replica-routing.ts). */
  replicaId?: string | undefined;
  /** The region whose data plane it was relayed to; undefined when it ran on this data plane's own connection (docs/regions.md). */
  relayedTo?: string | undefined;
}

/** What a server error becomes for the client; returning `error` itself passes it on unchanged. */
export type ErrorEdit = (error: ErrorFields) => ErrorFields;

/** What the client gets instead of one server reply: undefined keeps it, null hides it, a buffer replaces it. */
export type Rewrite = (message: ScannedMessage) => Buffer | null | undefined;

/** Sees each reply to one request whole, with its bytes as the server sent them (the result cache's capture). */
export type Tap = (message: ScannedMessage, bytes: Buffer) => void;

/**
 * What the client is owed, in order: replies the server will send (ending at one of `ends`), or a
 * reply the proxy makes itself. `suppress` hides the server's replies to a message the proxy
 * injected (a Parse re-prepared on this connection); `rewrite` changes replies one by one (a row
 * cap's completion); `tap` sees them whole, with their bytes (a message split across chunks is
 * held until whole, as for a rewrite); `prepares` names the server statement that Parse creates,
 * counted as prepared from the moment it is sent and forgotten if it fails.
 */
export type Expectation =
  | { readonly kind: 'server'; readonly ends: string; readonly suppress: boolean; readonly rewrite?: Rewrite | undefined; readonly tap?: Tap | undefined; readonly statement?: Statement | undefined; readonly prepares?: string | undefined }
  /** A reply the proxy makes: its bytes, or made when it goes out (from the state of the session then). */
  | { readonly kind: 'synthetic'; readonly reply: Buffer | (() => Buffer) };

/** Adds the bytes of `chunk` passed on unchanged from `runStart` to `cursor` to `out` as one view; the next run starts at `cursor`. */
function cutRun(out: Buffer[], chunk: Buffer, runStart: number, cursor: number): number {
  if (cursor > runStart) out.push(chunk.subarray(runStart, cursor));
  return cursor;
}

/** Replies that may arrive at any time and belong to no request: NoticeResponse, ParameterStatus, NotificationResponse. */
const isAsync = (type: string): boolean => type === 'N' || type === 'S' || type === 'A';

export interface PipelineEvents {
  /** A statement finished (its last reply passed, or it failed). */
  completed(statement: Statement): void;
  /** A Parse sent to prepare `name` failed: the connection does not hold it after all. */
  prepareFailed(name: string): void;
  /** A ReadyForQuery went by with this transaction status. */
  ready(status: TransactionStatus): void;
  /** Whether a ReadyForQuery now must be seen before the client gets it (it ends a write whose invalidation the answer waits for). */
  seesReadyFirst?(): boolean;
}

/**
 * Keeps the replies to a client in the order of its requests while the proxy answers some
 * requests itself and hides the replies to messages it injected. In the common case (nothing
 * injected, nothing synthesized) a server chunk is forwarded whole; otherwise it is cut at message
 * boundaries, and a message split across chunks is held until complete only when its replies may
 * be hidden.
 */
export class ResponsePipeline {
  private readonly queue: Expectation[] = [];
  private held: Buffer[] = [];
  /** While a cut chunk is handled: the statements it ended, whose audit waits until the client's bytes are written. */
  private ended: Statement[] | undefined;

  constructor(
    private readonly write: (pieces: readonly Buffer[]) => void,
    private readonly events: PipelineEvents,
    /**
     * How server errors reach the client, asked only when a chunk carries one: without their DETAIL
     * (PostgreSQL's DETAIL of a failed write can print the whole row, masked columns included), or
     * saying why the gateway cancelled a statement; undefined passes them on as they came.
     */
    private readonly errorEdit: () => ErrorEdit | undefined = () => undefined,
  ) {}

  /** Server replies still to come (not counting replies the proxy makes). */
  get awaitingServer(): boolean {
    return this.queue.some((e) => e.kind === 'server');
  }

  get empty(): boolean {
    return this.queue.length === 0;
  }

  /** Queues what the client is owed next; a reply the proxy makes goes out at once when nothing is owed before it. */
  expect(expectation: Expectation): void {
    this.queue.push(expectation);
    if (this.queue.length === 1) {
      const out = this.flushSyntheticInto([]);
      if (out.length > 0) this.write(out);
    }
  }

  /**
   * Handles one chunk from the server with what the scanner found in it; writes what the client
   * gets. `endsInError`: the chunk ends inside an ErrorResponse (held until whole when its DETAIL
   * may have to go).
   */
  onServerChunk(chunk: Buffer, scanned: readonly ScannedMessage[], endsInError = false): void {
    const edit = endsInError || scanned.some((m) => m.kind === 'ErrorResponse') ? this.errorEdit() : undefined;
    if (!edit && !this.queue.some((e) => e.kind === 'synthetic' || e.suppress || e.rewrite || e.tap) && this.held.length === 0) {
      if (this.events.seesReadyFirst?.()) {
        for (const message of scanned) this.account(message);
        return this.write([chunk]);
      }
      // The client first: accounting (the audit record among it) need not delay the reply.
      this.write([chunk]);
      for (const message of scanned) this.account(message);
      return;
    }
    // The statements this chunk ends are audited once the client has its bytes, as on the path above.
    const ended: Statement[] = [];
    this.ended = ended;
    try {
      this.cutAndWrite(chunk, scanned, edit, endsInError);
    } finally {
      this.ended = undefined;
      for (const statement of ended) this.events.completed(statement);
    }
  }

  /** onServerChunk when replies are made, hidden, rewritten, tapped or held: the chunk is cut at message boundaries. */
  private cutAndWrite(chunk: Buffer, scanned: readonly ScannedMessage[], edit: ErrorEdit | undefined, endsInError: boolean): void {
    const out: Buffer[] = [];
    let cursor = 0;
    // Bytes passed on unchanged since the last cut leave as one view of the chunk (cutRun).
    let runStart = 0;
    for (const message of scanned) {
      if (this.queue[0]?.kind === 'synthetic') {
        runStart = cutRun(out, chunk, runStart, cursor);
        this.flushSyntheticInto(out);
      }
      this.tapped(chunk, message);
      const replacement = this.replacementOf(message, edit);
      if (replacement === undefined) {
        if (this.held.length > 0) out.push(...this.held);
      } else {
        cutRun(out, chunk, runStart, cursor);
        if (replacement !== null) out.push(replacement);
        runStart = message.end;
      }
      this.held = [];
      cursor = message.end;
      this.account(message, replacement !== null);
    }
    if (this.queue[0]?.kind === 'synthetic') {
      runStart = cutRun(out, chunk, runStart, cursor);
      this.flushSyntheticInto(out);
    }
    if (cursor < chunk.length) {
      // The start of a message that may be hidden or replaced waits until it is whole.
      const head = this.queue[0];
      if ((head?.kind === 'server' && (head.suppress || head.rewrite || head.tap)) || (edit !== undefined && endsInError)) {
        runStart = cutRun(out, chunk, runStart, cursor);
        this.held.push(chunk.subarray(cursor));
      } else cursor = chunk.length;
    }
    cutRun(out, chunk, runStart, cursor);
    if (out.length > 0) this.write(out);
  }

  /** Hands a tapped request's reply its bytes: the start of one split across chunks was held (the tap holds them, as a rewrite does). */
  private tapped(chunk: Buffer, message: ScannedMessage): void {
    const head = this.queue[0];
    if (head?.kind !== 'server' || !head.tap || isAsync(message.type)) return;
    head.tap(message, this.held.length > 0 ? Buffer.concat([...this.held, chunk.subarray(0, message.end)]) : chunk.subarray(message.end - message.bytes, message.end));
  }

  private replacementOf(message: ScannedMessage, edit: ErrorEdit | undefined): Buffer | null | undefined {
    if (edit && message.kind === 'ErrorResponse') {
      const edited = edit(message.error);
      if (edited !== message.error) return encodeErrorResponse(edited);
    }
    const head = this.queue[0];
    if (head?.kind !== 'server' || isAsync(message.type)) return undefined;
    if (head.suppress) return message.kind === 'ErrorResponse' ? undefined : null;
    return head.rewrite?.(message);
  }

  private flushSyntheticInto(out: Buffer[]): Buffer[] {
    while (this.queue[0]?.kind === 'synthetic') {
      const { reply } = this.queue.shift() as { reply: Buffer | (() => Buffer) };
      out.push(typeof reply === 'function' ? reply() : reply);
    }
    return out;
  }

  /** Counts a reply against its statement; `delivered` unless it was hidden from the client (rows are counted as the client saw them). */
  private account(message: ScannedMessage, delivered = true): void {
    if (isAsync(message.type)) return;
    const head = this.queue[0];
    if (!head || head.kind !== 'server') return;
    const statement = head.statement;
    if (statement) {
      statement.bytes += message.bytes;
      if (delivered && message.kind === 'Run' && message.type === 'D') statement.rows += message.count;
      else if (message.kind === 'CommandComplete' && statement.tagged) statement.tagged(commandTag(message));
    }
    if (message.kind === 'ErrorResponse') {
      if (statement) statement.failed = true;
      // After an error the server skips to the next Sync: nothing else before it gets a reply.
      if (head.ends !== 'Z') this.dropUntilSync();
      return;
    }
    if (!head.ends.includes(message.type)) return;
    this.queue.shift();
    if (message.kind === 'ReadyForQuery') this.events.ready(message.status);
    if (statement) this.complete(statement);
  }

  private dropUntilSync(): void {
    while (this.queue.length > 0) {
      const next = this.queue[0]!;
      if (next.kind === 'server' && next.ends === 'Z') return;
      this.queue.shift();
      if (next.kind === 'server' && next.prepares) this.events.prepareFailed(next.prepares);
      if (next.kind === 'server' && next.statement) {
        next.statement.failed = true;
        this.complete(next.statement);
      }
    }
  }

  private complete(statement: Statement): void {
    statement.settled?.(!statement.failed);
    if (this.ended) this.ended.push(statement);
    else this.events.completed(statement);
  }

  /** The connection is gone: every statement still waiting is lost, whether or not it ran. */
  abandon(): void {
    for (const expectation of this.queue.splice(0)) {
      if (expectation.kind === 'server' && expectation.statement) {
        expectation.statement.failed = true;
        expectation.statement.lost = true;
        this.complete(expectation.statement);
      }
    }
    this.held = [];
  }
}
