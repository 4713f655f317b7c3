/**
 * What a relay link's splice has seen of the protocol, both ways, so that the peer knows, when the
 * link ends, whether its upstream connection is idle (docs/regions.md#where-it-hooks-into-the-proxy):
 * at a ReadyForQuery with status I, every message whole in both directions, every Query, Sync and
 * FunctionCall answered, nothing sent since the last of them. Anything else (mid-statement, in a
 * transaction, a failed one, COPY, a Parse without its Sync, a stream it could not follow) is not
 * idle, and the connection is closed instead of handed back.
 */

const HEADER_BYTES = 5;

/** Frontend messages that end with one ReadyForQuery: Query, Sync, FunctionCall. */
const ANSWERED = new Set(['Q', 'S', 'F']);
/** CopyData, CopyDone, CopyFail: part of a COPY a Query or Execute already started (and ignored by the server outside one). */
const COPY_IN = new Set(['d', 'c', 'f']);
const TERMINATE = 'X';
const READY = 'Z';

/** A message's start as a walk finds it: its type byte, its first body byte, where it starts in the chunk (-1: in an earlier chunk). */
export interface MessageStart {
  readonly type: string;
  /** The first byte after the header; undefined for a message with no body. */
  readonly first: number | undefined;
  readonly at: number;
}

/**
 * Follows the framing of one direction chunk by chunk without copying bodies: each message is
 * reported once its header and first body byte (if any) are in.
 */
export class MessageWalk {
  readonly #head = Buffer.alloc(HEADER_BYTES + 1);
  #have = 0;
  /** Bytes of the current message still to come after what is in #head. */
  #rest = 0;
  #startedAt = -1;
  /** A length no message can have: the stream is not the protocol. */
  #broken = false;

  get atBoundary(): boolean {
    return !this.#broken && this.#have === 0 && this.#rest === 0;
  }

  get broken(): boolean {
    return this.#broken;
  }

  /** Walks `chunk`; `onMessage` returns false to stop the walk there (the rest of the chunk is not read). */
  walk(chunk: Buffer, onMessage: (message: MessageStart) => boolean): void {
    let offset = 0;
    while (offset < chunk.length && !this.#broken) {
      if (this.#rest > 0) {
        const skipped = Math.min(this.#rest, chunk.length - offset);
        this.#rest -= skipped;
        offset += skipped;
        continue;
      }
      if (this.#have === 0) this.#startedAt = offset;
      const wanted = this.#have < HEADER_BYTES ? HEADER_BYTES : HEADER_BYTES + 1;
      const taken = Math.min(wanted - this.#have, chunk.length - offset);
      chunk.copy(this.#head, this.#have, offset, offset + taken);
      this.#have += taken;
      offset += taken;
      if (this.#have < HEADER_BYTES) continue;
      const length = this.#head.readUInt32BE(1);
      if (length < 4) {
        this.#broken = true;
        return;
      }
      if (length > 4 && this.#have === HEADER_BYTES) continue;
      const message = { type: String.fromCharCode(this.#head[0]!), first: length > 4 ? this.#head[HEADER_BYTES] : undefined, at: this.#startedAt };
      this.#rest = length - 4 - (this.#have - HEADER_BYTES);
      this.#have = 0;
      this.#startedAt = -1;
      if (!onMessage(message)) return;
    }
    // A header split across chunks started in this one, but is reported in the next.
    if (this.#have > 0 && this.#startedAt >= 0) this.#startedAt = -1;
  }
}

export class SpliceState {
  readonly #toUpstream = new MessageWalk();
  readonly #toOrigin = new MessageWalk();
  /** ReadyForQuery owed for what the origin sent. */
  #owed = 0;
  /** A message since the last Query, Sync or FunctionCall that is not COPY data. */
  #unsynced = false;
  /** The last ReadyForQuery's status; the link starts on a connection at I. */
  #status = 'I';
  /** Seen what cannot be: a ReadyForQuery nothing asked for. */
  #lost = false;

  /**
   * Walks what the origin sends; returns how many bytes of it go on to the upstream: all of it,
   * or what comes before a Terminate, which ends the link instead of the upstream's session.
   */
  fromOrigin(chunk: Buffer): { forward: number; terminated: boolean } {
    let forward = chunk.length;
    let terminated = false;
    this.#toUpstream.walk(chunk, (message) => {
      if (message.type === TERMINATE && message.at >= 0) {
        forward = message.at;
        terminated = true;
        return false;
      }
      if (ANSWERED.has(message.type)) {
        this.#owed++;
        this.#unsynced = false;
      } else if (!COPY_IN.has(message.type)) {
        this.#unsynced = true;
      }
      return true;
    });
    return { forward, terminated };
  }

  /** Walks what the upstream sends back to the origin. */
  fromUpstream(chunk: Buffer): void {
    this.#toOrigin.walk(chunk, (message) => {
      if (message.type !== READY) return true;
      if (this.#owed === 0) this.#lost = true;
      this.#owed--;
      this.#status = message.first === undefined ? '?' : String.fromCharCode(message.first);
      return true;
    });
  }

  /** Whether the upstream owes a reply: a statement may be running, which closing the connection alone does not stop. */
  get working(): boolean {
    return this.#owed > 0;
  }

  /** Whether the upstream connection is at rest and outside any transaction, with nothing half-way in either direction. */
  get idle(): boolean {
    return !this.#lost && this.#owed === 0 && !this.#unsynced && this.#status === 'I' && this.#toUpstream.atBoundary && this.#toOrigin.atBoundary;
  }
}
