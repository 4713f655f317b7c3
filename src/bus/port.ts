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

export interface Consumer {
  /** Stops taking messages; waits for handlers in flight. Unacknowledged messages stay on the bus. */
  stop(): Promise<void>;
}

export interface DecisionBus {
  readonly kind: 'nats' | 'memory';
  publish(message: BusMessage): Promise<void>;
  consume(options: ConsumeOptions, handler: (delivery: Delivery) => Promise<void>): Promise<Consumer>;
  close(): Promise<void>;
}
