/**
 * The fan-out of `pgward serve` across its worker processes: the supervisor holds the in-process
 * fan-out and relays. A worker's publish goes to the supervisor, which publishes it there; each
 * worker's relay (a subscriber of the supervisor's fan-out) hands every message to its worker.
 */
import type { Channel } from '../workers/channel.js';
import { boundedFlush, subscribers, type Fanout } from './fanout.js';

/** Supervisor side: relays `fanout` to and from the worker at the other end of `channel`. */
export function serveFanoutOver(fanout: Fanout, channel: Channel): { detach(): void } {
  channel.on<Uint8Array>('fanout.publish', (data) => fanout.publish(data));
  // Asked after the worker's publishes, on the same ordered channel: answered once they were relayed.
  channel.answer('fanout.flushed', () => fanout.flushed());
  const stop = fanout.subscribe((data) => channel.tell('fanout.message', data));
  return { detach: stop };
}

/** Worker side: the fan-out port over `channel`. */
export function fanoutOver(channel: Channel): Fanout {
  const local = subscribers();
  channel.on<Uint8Array>('fanout.message', local.deliver);
  return {
    publish(data) {
      channel.tell('fanout.publish', data);
    },
    flushed: () => boundedFlush(() => channel.ask('fanout.flushed')),
    subscribe: local.subscribe,
    close: async () => local.clear(),
  };
}
