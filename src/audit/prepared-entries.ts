/**
 * Entries that ingest's checkpointer prepared (keyed, canonical bytes written) from the events it
 * just committed, handed to the audit projection of the same process (the embedded default), which
 * would otherwise decode the same payloads and write the same canonical bytes again.
 *
 * The projection still reads every event from the store and takes an entry only for exactly the
 * event it was prepared from: the same id, type, stream, revision and payload bytes, under the same
 * key. Anything else (an event read before it was handed over, one dropped for room, a rebuild, a
 * projector in another process) it prepares from the stored bytes as before. Each entry is taken
 * once, since linking fills in its hashes.
 *
 * An appender that hands entries on can wait for room (`room`) while half the capacity waits and
 * the projection is taking entries: otherwise an ingest that runs ahead of the projection would
 * overflow the table, and the projection would have to decode every entry dropped for room, and
 * fall further behind. The backlog then waits on the bus, as records not acknowledged yet. A
 * projection that has found none of its entries here for a second (stopped, a standby waiting for
 * its lock, or one catching up on older events) is not waited for.
 */
import type { NewEvent, RecordedEvent } from '../store/port.js';
import type { HmacKeyring, PreparedEntry } from './chain.js';

/** About three seconds of entries at 10,000 a second; the oldest are dropped first. */
const DEFAULT_CAPACITY = 32_768;
/** A projection that found none of its entries here for this long is not waited for. */
const TAKER_IDLE_MS = 1_000;
/** How often a wait for room looks again. */
const ROOM_POLL_MS = 5;

interface Held {
  readonly type: string;
  readonly stream: string;
  readonly revision: number;
  readonly data: Uint8Array;
  readonly prepared: PreparedEntry;
}

/** The projection of this process is handed the very buffers ingest appended: no byte compare then. */
const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a === b || Buffer.compare(a, b) === 0;

function sameKey(prepared: PreparedEntry, keyring: HmacKeyring): boolean {
  const keyId = keyring.current ?? null;
  if (prepared.entry.key_id !== keyId) return false;
  const key = keyId === null ? undefined : keyring.keys.get(keyId);
  return key === undefined || prepared.key === undefined ? key === prepared.key : sameBytes(key, prepared.key);
}

export class PreparedEntries {
  private readonly held = new Map<string, Held>();
  /** When the projection last found an entry it looked for (performance.now() time): it reads near the head of the log. */
  private lastTake = -Infinity;
  /**
   * Per stream, the highest revision the projection looked up. An entry put at or below it comes
   * after the projection read its event (its read came back before the appender handled the
   * append's reply): it would never be taken, and would count against `room` until dropped.
   */
  private readonly looked = new Map<string, number>();
  /** Entries the projection took: each one it did not prepare again (pgward_audit_entries_handed_on_total). */
  private handedOn = 0;

  constructor(private readonly capacity = DEFAULT_CAPACITY) {}

  get size(): number {
    return this.held.size;
  }

  get taken(): number {
    return this.handedOn;
  }

  /** The entry prepared from `event`, committed at `revision` of `stream`. */
  put(stream: string, event: Pick<NewEvent, 'id' | 'type' | 'data'>, revision: number, prepared: PreparedEntry): void {
    if (revision <= (this.looked.get(stream) ?? -1)) return;
    if (this.held.size >= this.capacity) this.held.delete(this.held.keys().next().value!);
    this.held.set(event.id, { type: event.type, stream, revision, data: event.data, prepared });
  }

  /** The entry prepared from exactly this event under the keyring's current key, once; undefined otherwise. */
  take(event: Pick<RecordedEvent, 'id' | 'type' | 'stream' | 'revision' | 'data'>, keyring: HmacKeyring): PreparedEntry | undefined {
    if (event.revision > (this.looked.get(event.stream) ?? -1)) this.looked.set(event.stream, event.revision);
    const held = this.held.get(event.id);
    if (!held) return undefined;
    this.lastTake = performance.now();
    this.held.delete(event.id);
    const same = held.type === event.type && held.stream === event.stream && held.revision === event.revision && sameBytes(held.data, event.data) && sameKey(held.prepared, keyring);
    if (!same) return undefined;
    this.handedOn++;
    return held.prepared;
  }

  /** Resolves once fewer than half the capacity wait, or at once when the projection has found none of them for a second. */
  async room(): Promise<void> {
    while (this.held.size >= this.capacity / 2 && performance.now() - this.lastTake < TAKER_IDLE_MS) {
      await new Promise((resolve) => setTimeout(resolve, ROOM_POLL_MS));
    }
  }
}
