import {
  ANY,
  BACKWARDS,
  END,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  CancelledError,
  DeadlineExceededError,
  EventStoreDBClient,
  StreamNotFoundError,
  UnavailableError,
  WrongExpectedVersionError,
  binaryEvent,
  convertToCommandError,
  excludeSystemEvents,
  streamNameFilter,
  type AppendExpectedRevision,
  type CurrentRevision,
  type EventData,
  type ReadPosition,
  type ReadStreamOptions,
  type RecordedEvent as EsdbEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import {
  StoreError,
  satisfies,
  wrongExpectedRevision,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
  type Subscription,
} from './port.js';

/*
 * On read the client JSON-parses any metadata that parses as JSON (whatever the content type) and
 * drops empty metadata, so raw bytes cannot round-trip. Metadata is stored behind a NUL byte, which
 * no JSON text starts with, and the byte is removed again on read.
 */
const METADATA_MARKER = 0x00;

function toEventData(event: NewEvent): EventData {
  const metadata = new Uint8Array(event.metadata.length + 1);
  metadata[0] = METADATA_MARKER;
  metadata.set(event.metadata, 1);
  return binaryEvent({ id: event.id, type: event.type, data: event.data, metadata });
}

/** Payload bytes as a plain Uint8Array; events written by other clients may hold JSON the client already parsed. */
function bytes(value: unknown): Uint8Array {
  if (value === undefined) return new Uint8Array();
  if (value instanceof Uint8Array) return new Uint8Array(value);
  return new TextEncoder().encode(JSON.stringify(value));
}

function toRecorded(event: EsdbEvent): RecordedEvent {
  if (!event.position) throw new Error('EventStoreDB 22.6 or later is required: this server reads events without a position');
  const { metadata } = event;
  return {
    id: event.id,
    type: event.type,
    data: bytes(event.data),
    metadata: metadata instanceof Uint8Array && metadata[0] === METADATA_MARKER ? bytes(metadata.subarray(1)) : bytes(metadata),
    stream: event.streamId,
    revision: Number(event.revision),
    position: event.position.commit,
  };
}

/**
 * A filtered subscription receives a checkpoint message every `search window × this` events the
 * server scanned; with the client's default of 1, one per search window (a few dozen events), so a
 * subscriber of the control plane would hear from every few dozen audit appends. Positions come
 * from the events themselves here, so checkpoints are made rare (the multiplier is an unsigned
 * 32-bit number on the wire; window × this stays far below its limit).
 */
const FILTER_CHECKPOINT_INTERVAL = 1_000_000;

/** Event ids are UUIDs, which the server returns in its own letter case. */
function sameId(a: string, b = ''): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

function toClientRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'any':
      return ANY;
    case 'no_stream':
      return NO_STREAM;
    case 'exists':
      return STREAM_EXISTS;
    default:
      return BigInt(expected);
  }
}

function toActual(current: CurrentRevision): number | 'no_stream' {
  return current === NO_STREAM || current < 0n ? 'no_stream' : Number(current);
}

function fromPosition(after: bigint): ReadPosition {
  return after < 0n ? START : { commit: after, prepare: after };
}

/** User events only: system streams and types start with `$`. */
function accepts(event: EsdbEvent, prefixes?: readonly string[]): boolean {
  if (event.streamId.startsWith('$') || event.type.startsWith('$')) return false;
  return !prefixes?.length || prefixes.some((prefix) => event.streamId.startsWith(prefix));
}

/** The recorded events of a read; stopping early cancels the server call. */
async function* recorded<E>(read: StreamingRead<{ event?: E }>): AsyncGenerator<E> {
  try {
    for await (const { event } of read) if (event) yield event;
  } finally {
    await read.cancel();
  }
}

/** The hosts of a connection string, for messages; hosts never contain `@`, so nothing before the last one is kept. */
function hostsOf(connectionString: string): string {
  const rest = connectionString.slice(connectionString.lastIndexOf('@') + 1).replace(/^[a-z+]+:\/\//i, '');
  return rest.split(/[?/]/, 1)[0] ?? rest;
}

function connect(connectionString: string, hosts: string): EventStoreDBClient {
  try {
    return EventStoreDBClient.connectionString(connectionString);
  } catch {
    // The client's parse errors quote the whole string, credentials included.
    throw new StoreError('STORE_UNAVAILABLE', `EventStoreDB connection string for ${hosts} is invalid`);
  }
}

export function createEventStoreDbStore(connectionString: string): EventStore {
  const hosts = hostsOf(connectionString);
  const client = connect(connectionString, hosts);
  const subscriptions = new Set<() => Promise<void>>();

  function fail(raw: unknown): unknown {
    // Some calls (e.g. the server feature probe) reject with a bare gRPC error.
    const error = raw instanceof Error ? convertToCommandError(raw) : raw;
    const unreachable =
      error instanceof UnavailableError ||
      error instanceof DeadlineExceededError ||
      error instanceof CancelledError ||
      (error instanceof Error && error.message.startsWith('Failed to discover'));
    return unreachable ? new StoreError('STORE_UNAVAILABLE', `EventStoreDB at ${hosts} is unavailable: ${error.message}`) : error;
  }

  async function readEvents(stream: string, options: ReadStreamOptions): Promise<RecordedEvent[]> {
    const events: RecordedEvent[] = [];
    try {
      for await (const event of recorded(client.readStream(stream, options))) events.push(toRecorded(event));
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return events;
  }

  const lastEvents = (stream: string, count: number): Promise<RecordedEvent[]> =>
    readEvents(stream, { direction: BACKWARDS, fromRevision: END, maxCount: count }).then((events) => events.reverse());

  const resultOf = (event: RecordedEvent, duplicate: boolean): AppendResult => ({ nextExpectedRevision: event.revision, position: event.position, duplicate });

  async function appendEvents(stream: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) {
      const actual = (await lastEvents(stream, 1))[0]?.revision ?? -1;
      if (!satisfies(expected, actual)) throw wrongExpectedRevision(stream, expected, actual === -1 ? 'no_stream' : actual);
      return { nextExpectedRevision: actual, position: -1n, duplicate: false };
    }
    // The server deduplicates event ids reliably only against an exact expected revision (or
    // no_stream), with any/exists only best effort, and it never says that it did; so a retry is
    // recognised from the stream's tail first. A replay the server absorbs while other events
    // follow it is acknowledged like a fresh append (with a position on servers >= 22.6).
    const tail = await lastEvents(stream, events.length);
    const last = tail.at(-1);
    const sameIds = tail.length === events.length && tail.every((e, i) => sameId(e.id, events[i]?.id));
    if (last && sameIds) return resultOf(last, true);
    const result = await client.appendToStream(stream, events.map(toEventData), { expectedRevision: toClientRevision(expected) });
    if (result.position) return { nextExpectedRevision: Number(result.nextExpectedRevision), position: result.position.commit, duplicate: false };
    // An idempotent replay is acknowledged without a position: read it from the batch's last event.
    const [replayed] = await readEvents(stream, { fromRevision: result.nextExpectedRevision, maxCount: 1 });
    if (!replayed) throw new Error(`stream ${stream}: acknowledged revision ${result.nextExpectedRevision} cannot be read`);
    return resultOf(replayed, true);
  }

  return {
    kind: 'eventstoredb',
    densePositions: false,

    async append(stream, events, expected) {
      try {
        return await appendEvents(stream, events, expected);
      } catch (error) {
        if (error instanceof WrongExpectedVersionError) throw wrongExpectedRevision(stream, expected, toActual(error.actualVersion));
        throw fail(error);
      }
    },

    async readStream(stream, fromRevision = 0, maxCount) {
      try {
        return await readEvents(stream, { fromRevision: BigInt(fromRevision), ...(maxCount === undefined ? {} : { maxCount: BigInt(maxCount) }) });
      } catch (error) {
        throw fail(error);
      }
    },

    async readAll(after, options = {}) {
      const limit = options.limit ?? Number.POSITIVE_INFINITY;
      const events: RecordedEvent[] = [];
      try {
        // The v6 client reads $all without a server-side filter, so filtering happens here.
        for await (const event of recorded(client.readAll({ fromPosition: fromPosition(after) }))) {
          const position = event.position.commit;
          // Only events of one (legacy, explicit) transaction share a commit position: never split them across pages.
          if (events.length >= limit && position !== events.at(-1)?.position) break;
          if (position > after && accepts(event, options.streamPrefixes)) events.push(toRecorded(event));
        }
        return events;
      } catch (error) {
        throw fail(error);
      }
    },

    subscribe(after, options = {}): Subscription {
      const prefixes = options.streamPrefixes;
      // One request: the server filters $all by stream prefix and pushes only matching events, so
      // appends to other streams never reach this client.
      const source = client.subscribeToAll({
        fromPosition: fromPosition(after),
        filter: prefixes?.length
          ? streamNameFilter({ prefixes: [...prefixes], checkpointInterval: FILTER_CHECKPOINT_INTERVAL })
          : excludeSystemEvents({ checkpointInterval: FILTER_CHECKPOINT_INTERVAL }),
      });
      // The client emits errors without destroying the stream: destroying keeps the error for an
      // iterator that starts later, and the listener keeps an early error from going unhandled.
      source.on('error', (error) => source.destroy(error));
      let stopped = false;

      async function stop(): Promise<void> {
        if (stopped) return;
        stopped = true;
        subscriptions.delete(close);
        // A call that never started (the server was unreachable) has nothing to cancel.
        await source.unsubscribe().catch(() => undefined);
        source.destroy();
      }

      async function* run(): AsyncGenerator<RecordedEvent> {
        try {
          for await (const { event } of source) {
            // The server filter narrows the traffic; this check decides, and skips events at or before `after`.
            if (event && event.position.commit > after && accepts(event, prefixes)) yield toRecorded(event);
          }
        } catch (error) {
          if (!stopped) throw fail(error);
        } finally {
          await stop();
        }
      }

      const iterator = run();
      async function close(): Promise<void> {
        await stop();
        await iterator.return(undefined);
      }
      subscriptions.add(close);
      return { [Symbol.asyncIterator]: () => iterator, reads: 1, close };
    },

    async countAfter(after, options = {}) {
      let count = 0;
      try {
        // $all from the checkpoint: without a server-side filter on reads (see readAll), every event after it passes here.
        for await (const event of recorded(client.readAll({ fromPosition: fromPosition(after) }))) {
          if (event.position.commit > after && accepts(event, options.streamPrefixes)) count += 1;
        }
        return count;
      } catch (error) {
        throw fail(error);
      }
    },

    async headPosition() {
      try {
        for await (const event of recorded(client.readAll({ direction: BACKWARDS, fromPosition: END }))) {
          if (accepts(event)) return event.position.commit;
        }
        return -1n;
      } catch (error) {
        throw fail(error);
      }
    },

    async close() {
      await Promise.all([...subscriptions].map((close) => close()));
      await client.dispose();
    },
  };
}
