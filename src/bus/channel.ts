/**
 * The in-process decision bus of `pgward serve`, reached from a worker process over its IPC channel.
 *
 * The log stays in the supervisor (the proxy publishes there without leaving its thread); a worker's
 * consumer is a consumer of that log whose handler is the round trip to the worker: a delivery is
 * acknowledged when the worker's handler resolved (ingest: its append committed), and nak'ed when it
 * threw. When the worker dies, every delivery it had not answered is nak'ed at once and its consumers
 * are stopped, so the durable's unacknowledged messages go to the next consumer of that name: the
 * restarted worker. Nothing is lost (a message leaves the log only when acknowledged) and nothing is
 * doubled downstream (ingest's event ids derive from each decision's identity, so a redelivered
 * decision whose append had committed appends nothing).
 */
import type { Channel } from '../workers/channel.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from './memory.js';
import { consumeSettings, type BusMessage, type ConsumeOptions, type Consumer, type ConsumerBacklog, type DecisionBus, type Delivery } from './port.js';

interface ConsumeAsk {
  readonly cid: number;
  readonly options: ConsumeOptions;
}

interface DeliverAsk {
  readonly cid: number;
  readonly delivery: Delivery;
}

/** Supervisor side: serves `bus` to the worker at the other end of `channel`. */
export function serveBusOver(bus: DecisionBus, channel: Channel): { detach(): Promise<void> } {
  const consumers = new Map<number, Consumer>();
  channel.answer<BusMessage>('bus.publish', (message) => bus.publish(message));
  channel.answer<ConsumeAsk>('bus.consume', async ({ cid, options }) => {
    consumers.set(cid, await bus.consume(options, (delivery) => channel.ask('bus.deliver', { cid, delivery } satisfies DeliverAsk)));
  });
  channel.answer<string>('bus.backlog', (durable) => bus.backlog(durable));
  channel.answer<number>('bus.stop', async (cid) => {
    const consumer = consumers.get(cid);
    consumers.delete(cid);
    await consumer?.stop();
  });
  return {
    /** After the worker's exit: its open deliveries are nak'ed (the channel rejects them), then its consumers stop. */
    async detach() {
      channel.close('the worker exited');
      const stopping = [...consumers.values()].map((consumer) => consumer.stop());
      consumers.clear();
      await Promise.all(stopping);
    },
  };
}

/** Worker side: the DecisionBus port over `channel`. */
export function busOver(channel: Channel): DecisionBus {
  const handlers = new Map<number, (delivery: Delivery) => Promise<void>>();
  let nextCid = 1;
  channel.answer<DeliverAsk>('bus.deliver', async ({ cid, delivery }) => {
    const handler = handlers.get(cid);
    if (!handler) throw new Error(`consumer ${cid} is stopped`);
    await handler(delivery);
  });
  return {
    kind: 'memory',
    // The supervisor's in-process bus, created with its default.
    maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
    async publish(message) {
      await channel.ask('bus.publish', { id: message.id, data: message.data } satisfies BusMessage);
    },
    async consume(options, handler) {
      consumeSettings(options);
      const cid = nextCid++;
      handlers.set(cid, handler);
      try {
        await channel.ask('bus.consume', { cid, options } satisfies ConsumeAsk);
      } catch (error) {
        handlers.delete(cid);
        throw error;
      }
      return {
        async stop() {
          await channel.ask('bus.stop', cid);
          handlers.delete(cid);
        },
      };
    },
    async backlog(durable) {
      return channel.ask<ConsumerBacklog | undefined>('bus.backlog', durable);
    },
    async close() {
      await Promise.all([...handlers.keys()].map((cid) => channel.ask('bus.stop', cid).catch(() => undefined)));
      handlers.clear();
    },
  };
}
