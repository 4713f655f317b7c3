/**
 * Digest records for entries that arrive in pages, computed at once by a DigestPool's workers and
 * by the calling thread, and handed on in input order. The workers take chunks ahead of the walk;
 * whenever the next chunk in order is not ready, the calling thread digests the first chunk no one
 * has taken rather than wait. Windows too small to repay a worker stay on the calling thread.
 */
import { setImmediate as yieldToEvents } from 'node:timers/promises';
import { sharedDigestPool, type DigestPool } from './digest-pool.js';
import { writeDigestRecords, type RecordedEntry } from './digest-records.js';
import { EntryDigests } from './entry-digests.js';
import { carriedByWire, encodeEntries } from './entry-wire.js';

export interface ParallelVerification {
  /** Below this many entries in the first page, the walk digests on the calling thread alone (default 4,000). */
  readonly minEntries?: number;
  /** Entries a worker digests per job (default 1,000). */
  readonly chunkEntries?: number;
  /** Default: the process's shared pool. */
  readonly pool?: DigestPool;
}

const MIN_ENTRIES = 4_000;
const CHUNK_ENTRIES = 1_000;
/** Pages are read ahead while fewer chunks than this wait to be taken. */
const READ_AHEAD_CHUNKS = 4;

/** Entries in input order; `records` are their digest records, absent for entries the walk digests itself. */
export interface DigestedEntries<E extends RecordedEntry = RecordedEntry> {
  readonly entries: readonly E[];
  readonly records?: Buffer;
}

interface Chunk<E extends RecordedEntry> {
  readonly entries: readonly E[];
  records?: Buffer;
  failure?: Error;
  /** Settles, never rejects, once a worker's job does. */
  job?: Promise<void>;
}

async function* prepend<T>(first: T, rest: AsyncIterator<T>): AsyncGenerator<T> {
  try {
    yield first;
    for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
  } finally {
    await rest.return?.();
  }
}

/** A copy of each key in a buffer of its own, so that a message carries the key and not the slab a Buffer may share. */
function ownKeys(keys: ReadonlyMap<string, Uint8Array>): Map<string, Uint8Array> {
  return new Map([...keys].map(([id, key]) => [id, new Uint8Array(key)]));
}

async function* digestedChunks<E extends RecordedEntry>(pages: AsyncIterator<readonly E[]>, hmacKeys: ReadonlyMap<string, Uint8Array>, pool: DigestPool, chunkEntries: number): AsyncGenerator<DigestedEntries<E>> {
  const keys = ownKeys(hmacKeys);
  const local = new EntryDigests();
  const chunks: Chunk<E>[] = [];
  /** chunks[0..taken) are digested or with a worker. */
  let taken = 0;
  let reading: Promise<void> | undefined;
  let readFailure: { error: unknown } | undefined;
  let exhausted = false;

  const read = (): void => {
    reading = pages.next().then(
      (next) => {
        reading = undefined;
        if (next.done) exhausted = true;
        else for (let i = 0; i < next.value.length; i += chunkEntries) chunks.push({ entries: next.value.slice(i, i + chunkEntries) });
      },
      (error: unknown) => {
        reading = undefined;
        readFailure = { error };
      },
    );
  };
  const digestHere = (chunk: Chunk<E>): void => {
    chunk.records = writeDigestRecords(
      chunk.entries.map((entry) => (carriedByWire(entry) ? entry : null)),
      keys,
      local,
    );
  };
  const send = (chunk: Chunk<E>): void => {
    chunk.job = pool.digest(encodeEntries(chunk.entries), keys).then(
      (records) => void (chunk.records = records),
      (error: Error) => void (chunk.failure = error),
    );
  };

  pool.start();
  try {
    for (;;) {
      if (readFailure) throw readFailure.error;
      if (!exhausted && !reading && chunks.length - taken < READ_AHEAD_CHUNKS) read();
      while (taken < chunks.length && pool.free > 0) send(chunks[taken++]!);
      const head = chunks[0];
      if (head?.failure) throw head.failure;
      if (head?.records) {
        chunks.shift();
        taken -= 1;
        yield head;
      } else if (taken < chunks.length) {
        digestHere(chunks[taken++]!);
        // Lets worker replies and read pages in before the next decision.
        await yieldToEvents();
      } else {
        const awaited = [head?.job, reading].filter((settles) => settles !== undefined);
        if (awaited.length === 0) return;
        await Promise.race(awaited);
      }
    }
  } finally {
    await pages.return?.();
  }
}

/**
 * The pages' entries with digest records for the walk, from workers and this thread when the first
 * page holds at least `minEntries`; else the pages as they are. HMAC keys go to the workers only in
 * their jobs' messages.
 */
export async function* digestedPages<E extends RecordedEntry>(pages: AsyncIterable<readonly E[]>, hmacKeys: ReadonlyMap<string, Uint8Array>, parallel: ParallelVerification = {}): AsyncGenerator<DigestedEntries<E>> {
  const chunkEntries = parallel.chunkEntries ?? CHUNK_ENTRIES;
  if (!Number.isSafeInteger(chunkEntries) || chunkEntries < 1) throw new RangeError('chunkEntries must be a positive integer');
  const iterator = pages[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) return;
  const all = prepend(first.value, iterator);
  if (first.value.length < (parallel.minEntries ?? MIN_ENTRIES)) {
    for await (const entries of all) yield { entries };
    return;
  }
  yield* digestedChunks(all, hmacKeys, parallel.pool ?? sharedDigestPool(), chunkEntries);
}
