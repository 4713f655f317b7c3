/**
 * The decision bus on NATS JetStream. The stream dedups on the message id (Nats-Msg-Id) within
 * its duplicate window; each durable name is a durable pull consumer with explicit acks whose
 * max_ack_pending is the consumer's maxInFlight.
 */
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  PubHeaders,
  ReplayPolicy,
  StorageType,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { consumeSettings, MessageTooLargeError, type ConsumeOptions, type Consumer, type ConsumerBacklog, type DecisionBus } from './port.js';

const DEFAULT_STREAM = 'PGWARD_DECISIONS';
const DEFAULT_SUBJECT = 'pgward.decisions';
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
const DEFAULT_ACK_WAIT_MS = 30_000;
/** max_payload counts the headers too: this much is left for the Nats-Msg-Id header. */
const HEADER_ROOM_BYTES = 1024;
/** Publish times kept for backlog() at most: a consumer that never acknowledges does not grow them without bound. */
const MAX_TRACKED_PUBLISHES = 100_000;

export interface NatsBusOptions {
  /** e.g. nats://127.0.0.1:4222 */
  readonly url: string;
  /** JetStream stream, created when absent. */
  readonly stream?: string;
  /** Subject prefix: the stream holds `<subject>.>`, messages are published on `<subject>.statement`. */
  readonly subject?: string;
  /** Applies when the stream is created. */
  readonly duplicateWindowMs?: number;
  /** How long the server waits for an ack (e.g. from a crashed process) before redelivering. */
  readonly ackWaitMs?: number;
}

export type NatsBusErrorCode = 'CONNECT_FAILED' | 'JETSTREAM_UNAVAILABLE';

export class NatsBusError extends Error {
  override readonly name = 'NatsBusError';
  constructor(
    readonly code: NatsBusErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export async function connectNatsBus(options: NatsBusOptions): Promise<DecisionBus> {
  const stream = options.stream ?? DEFAULT_STREAM;
  const subject = `${options.subject ?? DEFAULT_SUBJECT}.statement`;
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const where = redactUrl(options.url);

  let nc: NatsConnection;
  try {
    // noAsyncTraces: the client would otherwise capture a stack (an Error) for every publish, in case its ack times out.
    nc = await connect({ servers: options.url, name: 'pgward', maxReconnectAttempts: -1, noAsyncTraces: true });
  } catch (error) {
    throw new NatsBusError('CONNECT_FAILED', `cannot connect to NATS at ${where}: ${describe(error)}`, { cause: error });
  }

  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc);
    await ensureStream(jsm, {
      name: stream,
      subjects: [`${options.subject ?? DEFAULT_SUBJECT}.>`],
      duplicateWindowMs: options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS,
    });
  } catch (error) {
    await nc.close();
    throw new NatsBusError(
      'JETSTREAM_UNAVAILABLE',
      `JetStream at ${where} cannot provide stream ${stream}: ${describe(error)}`,
      { cause: error },
    );
  }

  const js = jsm.jetstream();
  const consumers = new Set<Consumer>();
  /**
   * When this connection published each of its messages (stream sequence → Date.now()), until a
   * backlog() finds it acknowledged: the age of the oldest without fetching a stored message (a
   * batch of up to max_payload) from the server at every sample.
   */
  const publishedAt = new Map<number, number>();

  const maxMessageBytes = nc.info!.max_payload - HEADER_ROOM_BYTES;
  return {
    kind: 'nats',
    maxMessageBytes,

    async publish(message) {
      if (message.data.length > maxMessageBytes) throw new MessageTooLargeError(message.data.length, maxMessageBytes);
      const ack = await js.publish(subject, message.data, { msgID: message.id });
      if (ack.duplicate) return;
      publishedAt.set(ack.seq, Date.now());
      if (publishedAt.size > MAX_TRACKED_PUBLISHES) publishedAt.delete(publishedAt.keys().next().value!);
    },

    async consume(consumeOptions: ConsumeOptions, handler) {
      const { maxInFlight, retryDelayMs } = consumeSettings(consumeOptions);
      await ensureConsumer(jsm, stream, {
        durable: consumeOptions.durable,
        filterSubject: subject,
        maxInFlight,
        ackWaitMs,
      });
      const consumer = await js.consumers.get(stream, consumeOptions.durable);
      const messages = await consumer.consume({ max_messages: maxInFlight });
      const pulling = run(messages, maxInFlight, async (msg) => {
        try {
          await handler({ id: messageId(msg), data: msg.data, attempt: msg.info.deliveryCount });
        } catch {
          settle(() => msg.nak(retryDelayMs));
          return;
        }
        settle(() => msg.ack());
      });
      const live: Consumer = {
        async stop() {
          consumers.delete(live);
          await pulling.stop();
        },
      };
      consumers.add(live);
      return live;
    },

    async backlog(durable): Promise<ConsumerBacklog | undefined> {
      try {
        const info = await jsm.consumers.info(stream, durable);
        const pending = info.num_pending + info.num_ack_pending;
        const acknowledged = info.ack_floor.stream_seq;
        // Every message at or below the ack floor is acknowledged; of this connection's messages above it, the oldest
        // was published first (publishes settle about in sequence order). Other publishers' messages are their own to watch.
        let oldestAt: number | undefined;
        for (const [seq, at] of publishedAt) {
          if (seq > acknowledged) {
            oldestAt = at;
            break;
          }
          publishedAt.delete(seq);
        }
        return { pending, acknowledged, oldestAgeMs: pending === 0 || oldestAt === undefined ? 0 : Math.max(0, Date.now() - oldestAt) };
      } catch (error) {
        if (isApiError(error, JetStreamApiCodes.ConsumerNotFound)) return undefined;
        throw error;
      }
    },

    async close() {
      await Promise.all([...consumers].map((consumer) => consumer.stop()));
      if (!nc.isClosed()) await nc.drain();
    },
  };
}

/**
 * Takes messages from the pull iterator, at most maxInFlight handled at once. Messages the client
 * had already buffered when stop() was called are nak'ed at once, so the next consumer of the
 * durable gets them without waiting for ack_wait.
 */
function run(messages: ConsumerMessages, maxInFlight: number, handle: (msg: JsMsg) => Promise<void>): Consumer {
  let stopping = false;
  const inFlight = new Set<Promise<void>>();
  const loop = (async () => {
    for await (const msg of messages) {
      if (stopping) {
        settle(() => msg.nak());
        continue;
      }
      const work: Promise<void> = handle(msg).then(() => {
        inFlight.delete(work);
      });
      inFlight.add(work);
      if (inFlight.size >= maxInFlight) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  })();
  // A failure of the pull loop is reported by stop(); this keeps it from being unhandled until then.
  loop.catch(() => undefined);

  return {
    async stop() {
      stopping = true;
      const closed = messages.close();
      await loop;
      await closed;
    },
  };
}

async function ensureStream(
  jsm: JetStreamManager,
  config: { name: string; subjects: string[]; duplicateWindowMs: number },
): Promise<void> {
  try {
    await jsm.streams.info(config.name);
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.StreamNotFound)) throw error;
    await jsm.streams.add({
      name: config.name,
      subjects: config.subjects,
      storage: StorageType.File,
      duplicate_window: nanos(config.duplicateWindowMs),
    });
  }
}

async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  config: { durable: string; filterSubject: string; maxInFlight: number; ackWaitMs: number },
): Promise<void> {
  try {
    const info = await jsm.consumers.info(stream, config.durable);
    if (info.config.max_ack_pending !== config.maxInFlight) {
      await jsm.consumers.update(stream, config.durable, { max_ack_pending: config.maxInFlight });
    }
  } catch (error) {
    if (!isApiError(error, JetStreamApiCodes.ConsumerNotFound)) throw error;
    await jsm.consumers.add(stream, {
      durable_name: config.durable,
      filter_subject: config.filterSubject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
      ack_wait: nanos(config.ackWaitMs),
      max_ack_pending: config.maxInFlight,
    });
  }
}

/** Every publish sets Nats-Msg-Id; a message put on the subject by something else is named by its stream sequence. */
function messageId(msg: JsMsg): string {
  return msg.headers?.get(PubHeaders.MsgIdHdr) || `nats-seq-${msg.seq}`;
}


/** An ack or nak that cannot be sent (the connection is gone) leaves the message to be redelivered after ack_wait. */
function settle(send: () => void): void {
  try {
    send();
  } catch {
    return;
  }
}

function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Keeps credentials in the URL out of error messages. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username === '' && parsed.password === '') return url;
    parsed.username = '***';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return url;
  }
}
