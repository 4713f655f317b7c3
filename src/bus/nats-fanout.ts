/**
 * The fan-out on NATS core pub/sub (no JetStream): every connection subscribed to the subject gets
 * each message, none is kept. The subject is outside the decision stream's `pgward.decisions.>`.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { boundedFlush, subscribers, type Fanout } from './fanout.js';
import { NatsBusError } from './nats.js';

export const DEFAULT_FANOUT_SUBJECT = 'pgward.fanout.cache';

export interface NatsFanoutOptions {
  readonly url: string;
  readonly subject?: string;
}

export async function connectNatsFanout(options: NatsFanoutOptions): Promise<Fanout> {
  const subject = options.subject ?? DEFAULT_FANOUT_SUBJECT;
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: options.url, name: 'pgward-fanout', maxReconnectAttempts: -1, noAsyncTraces: true });
  } catch (error) {
    throw new NatsBusError('CONNECT_FAILED', `cannot connect to NATS for the fan-out: ${(error as Error).message}`, { cause: error });
  }
  const local = subscribers();
  nc.subscribe(subject, {
    callback: (error, msg) => {
      if (!error) local.deliver(msg.data);
    },
  });
  // The server has the subscription when this returns: a message published after it reaches us.
  await nc.flush();
  return {
    publish(data) {
      // Best effort: while the link is down the client buffers, and drops past its buffer.
      if (!nc.isClosed()) nc.publish(subject, data);
    },
    flushed: () => boundedFlush(async () => {
      if (!nc.isClosed()) await nc.flush();
    }),
    subscribe: local.subscribe,
    async close() {
      local.clear();
      if (!nc.isClosed()) await nc.drain();
    },
  };
}
