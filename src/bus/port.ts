/**
 * The decision bus port: the proxy publishes, ingest consumes. Every adapter (NATS JetStream,
 * in-process) passes test/contract/decision-bus.contract.ts.
 *
 * Delivery is at least once. A message is acknowledged only after the consumer's handler
 * resolved (its work committed); a handler that throws gets the message again later.
 * Publishing the same `id` twice within the dedup window stores it once.
 */

export interface BusMessage {
  /** Unique id of the message; the dedup key. */
  readonly id: string;
  readonly data: Uint8Array;
}

export interface Delivery extends BusMessage {
  /** 1 on the first delivery, then 2, 3, ... */
  readonly attempt: number;
}

export interface ConsumeOptions {
  /** Durable consumer name: a consumer of the same name resumes where the last one acknowledged. */
  readonly durable: string;
  /** Upper bound on deliveries in flight to the handler at once. */
  readonly maxInFlight?: number;
  /** Delay before a failed message is offered again. */
  readonly retryDelayMs?: number;
}

/** Ingest's durable consumer of decisions, shared by every ingest process; publishers ask its backlog (proxy/audit-backpressure.ts). */
export const INGEST_DURABLE = 'ingest';

export const DEFAULT_MAX_IN_FLIGHT = 1;
export const DEFAULT_RETRY_DELAY_MS = 1000;

/** The options every adapter applies, defaults filled in; out-of-range values are refused. */
export function consumeSettings(options: ConsumeOptions): { maxInFlight: number; retryDelayMs: number } {
  const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
  const retryDelayMs = options.retryDelayMs ?? DEFAULT_RETRY_DELAY_MS;
  if (!Number.isInteger(maxInFlight) || maxInFlight < 1) {
    throw new RangeError(`maxInFlight must be an integer >= 1, got ${maxInFlight}`);
  }
  if (!Number.isFinite(retryDelayMs) || retryDelayMs < 0) {
    throw new RangeError(`retryDelayMs must be a finite number >= 0, got ${retryDelayMs}`);
  }
  return { maxInFlight, retryDelayMs };
}

export interface Consumer {
  /** Stops taking messages; waits for handlers in flight. Unacknowledged messages stay on the bus. */
  stop(): Promise<void>;
}

/** A publish of more than the bus's maxMessageBytes, refused whole. */
export class MessageTooLargeError extends Error {
  override readonly name = 'MessageTooLargeError';
  constructor(bytes: number, max: number) {
    super(`a bus message of ${bytes} bytes exceeds the bus's maximum of ${max}`);
  }
}

/** How far a durable consumer is behind the bus. */
export interface ConsumerBacklog {
  /** Messages published and not yet acknowledged by the durable: never delivered, or delivered and under way. */
  readonly pending: number;
  /** Grows whenever the durable acknowledges a message, and only then: whether it is making progress. */
  readonly acknowledged: number;
  /**
   * How long the oldest message the durable has not acknowledged has been on the bus (0 with none
   * pending). On NATS, of the messages this connection published: each publisher watches its own.
   */
  readonly oldestAgeMs: number;
}

/** What a publisher needs of the bus: an enrolled data plane's is its channel to the control plane (src/enroll/remote-bus.ts). */
export type DecisionSink = Pick<DecisionBus, 'publish' | 'maxMessageBytes'>;

export interface DecisionBus {
  readonly kind: 'nats' | 'memory';
  /**
   * The largest message data a publish takes (NATS: the server's max_payload, less room for the
   * message id header); a larger one is refused. A publisher that batches stays within it.
   */
  readonly maxMessageBytes: number;
  publish(message: BusMessage): Promise<void>;
  consume(options: ConsumeOptions, handler: (delivery: Delivery) => Promise<void>): Promise<Consumer>;
  /** The backlog of the durable consumer of that name; undefined when no consumer of that name was ever made. */
  backlog(durable: string): Promise<ConsumerBacklog | undefined>;
  close(): Promise<void>;
}
