import type { MessagePort } from 'node:worker_threads';
import type { Endpoint } from '../../src/workers/channel.js';

/** A channel endpoint over a real MessagePort (structured clone, as the IPC channel's advanced serialization). */
export function endpoint(port: MessagePort): Endpoint {
  return {
    send(message, callback) {
      port.postMessage(message);
      callback?.(null);
      return true;
    },
    on: (event, listener) => port.on(event, listener),
    off: (event, listener) => port.off(event, listener),
  };
}
