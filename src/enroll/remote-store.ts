import { setTimeout as delay } from 'node:timers/promises';
import { StoreError, wrongExpectedRevision, type AppendResult, type ExpectedRevision, type NewEvent, type ProxyStore, type ReadAllOptions, type RecordedEvent, type SubscribeOptions, type Subscription } from '../store/port.js';
import { ChannelEnded, ChannelRequestFailed, type ChannelClient } from './channel-client.js';
import { ChannelEnd, fromWire, WireEvent } from './wire.js';

/** With no byte for this long (the control plane sends a comment every 15 s), the stream is taken for dead and opened again. */
const IDLE_MS = 45_000;
const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 10_000;

interface SseMessage {
  readonly event: string;
  readonly data: string;
}

/** The messages of a text/event-stream body (comments skipped), until it ends. */
async function* sseMessages(body: ReadableStream<Uint8Array>, onBytes: () => void): AsyncGenerator<SseMessage> {
  let buffered = '';
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    onBytes();
    buffered += chunk;
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length > 0) yield { event, data: data.join('\n') };
    }
  }
}

function query(after: bigint, prefixes: readonly string[] | undefined, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams({ after: after.toString(), ...extra });
  for (const prefix of prefixes ?? []) params.append('prefix', prefix);
  return params.toString();
}

/**
 * The proxy's event store on an enrolled data plane (ProxyStore): its project's events read from
 * the control plane over the channel, followed live through a server-sent event stream that
 * reopens from its last position when the connection drops, and ends when the control plane says
 * the enrollment no longer authenticates.
 */
export class RemoteEventStore implements ProxyStore {
  constructor(private readonly client: ChannelClient) {}

  async readAll(after: bigint, options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const body = await this.client.json<{ events: unknown[] }>('GET', `/v1/data-plane/events?${query(after, options.streamPrefixes, options.limit ? { limit: String(options.limit) } : {})}`);
    return body.events.map((event) => fromWire(WireEvent.parse(event)));
  }

  /** The control plane answers with the whole stream from `fromRevision`: maxCount is applied here. */
  async readStream(stream: string, fromRevision = 0, maxCount?: number): Promise<RecordedEvent[]> {
    const body = await this.client.json<{ events: unknown[] }>('GET', `/v1/data-plane/streams/${encodeURIComponent(stream)}?from=${fromRevision}`);
    return body.events.slice(0, maxCount).map((event) => fromWire(WireEvent.parse(event)));
  }

  async append(stream: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    const wire = events.map((event) => ({ id: event.id, type: event.type, data: Buffer.from(event.data).toString('base64'), metadata: Buffer.from(event.metadata).toString('base64') }));
    try {
      const result = await this.client.json<{ next_expected_revision: number; position: string; duplicate: boolean }>('POST', `/v1/data-plane/streams/${encodeURIComponent(stream)}`, { events: wire, expected });
      return { nextExpectedRevision: result.next_expected_revision, position: BigInt(result.position), duplicate: result.duplicate };
    } catch (error) {
      // The command handler retries on a conflict, as it does against the state database's store.
      if (error instanceof ChannelRequestFailed && error.status === 409) throw wrongExpectedRevision(stream, expected, (error.body.actual as number | 'no_stream' | null) ?? 'no_stream');
      if (error instanceof ChannelRequestFailed && error.status >= 500) throw new StoreError('STORE_UNAVAILABLE', error.message, { stream });
      throw error;
    }
  }

  subscribe(after: bigint, options: SubscribeOptions = {}): Subscription {
    const client = this.client;
    const closed = new AbortController();
    let reads = 0;
    let position = after;
    async function* follow(): AsyncGenerator<RecordedEvent> {
      for (let retryMs = FIRST_RETRY_MS; !closed.signal.aborted && !client.end; retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)) {
        const idle = new AbortController();
        let idleTimer = setTimeout(() => idle.abort(), IDLE_MS);
        const onBytes = (): void => {
          clearTimeout(idleTimer);
          idleTimer = setTimeout(() => idle.abort(), IDLE_MS);
        };
        try {
          reads++;
          const response = await client.fetch('GET', `/v1/data-plane/subscribe?${query(position, options.streamPrefixes)}`, { signal: AbortSignal.any([closed.signal, idle.signal]) });
          if (!response.ok || !response.body) throw new Error(`the control plane answered the event stream with ${response.status}`);
          for await (const message of sseMessages(response.body, onBytes)) {
            if (message.event === 'end') {
              client.close(ChannelEnd.parse(JSON.parse(message.data)));
              return;
            }
            const event = fromWire(WireEvent.parse(JSON.parse(message.data)));
            position = event.position;
            retryMs = FIRST_RETRY_MS;
            yield event;
          }
        } catch (error) {
          if (closed.signal.aborted || error instanceof ChannelEnded) return;
          client.logger.warn({ err: error, retry_ms: retryMs }, 'the control plane’s event stream dropped; reopening it');
        } finally {
          clearTimeout(idleTimer);
        }
        await delay(retryMs, undefined, { signal: closed.signal }).catch(() => undefined);
      }
    }
    const events = follow();
    return {
      get reads() {
        return reads;
      },
      async close() {
        closed.abort();
      },
      [Symbol.asyncIterator]: () => events,
    };
  }
}
