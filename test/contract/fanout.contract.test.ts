/** The fan-out adapters pass the Fanout contract: in-process, over worker channels, on NATS core pub/sub. */
import { randomUUID } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import { createMemoryFanout } from '../../src/bus/fanout.js';
import { fanoutOver, serveFanoutOver } from '../../src/bus/fanout-channel.js';
import { connectNatsFanout } from '../../src/bus/nats-fanout.js';
import { Channel } from '../../src/workers/channel.js';
import { endpoint } from './message-port-endpoint.js';
import { fanoutContract } from './fanout.contract.js';

fanoutContract('memory (one process)', async () => {
  const fanout = createMemoryFanout();
  return [fanout, fanout];
});

fanoutContract('memory, relayed by the supervisor to two workers', async () => {
  const supervisor = createMemoryFanout();
  const worker = () => {
    const { port1, port2 } = new MessageChannel();
    const supervisorSide = new Channel(endpoint(port1));
    const workerSide = new Channel(endpoint(port2));
    const relay = serveFanoutOver(supervisor, supervisorSide);
    const fanout = fanoutOver(workerSide);
    return {
      ...fanout,
      async close() {
        await fanout.close();
        relay.detach();
        workerSide.close('closed');
        supervisorSide.close('closed');
        port1.close();
        port2.close();
      },
    };
  };
  return [worker(), worker()];
});

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

fanoutContract('NATS core pub/sub (two connections)', async () => {
  const subject = `pgward.test.fanout.${randomUUID()}`;
  return [await connectNatsFanout({ url: NATS_URL, subject }), await connectNatsFanout({ url: NATS_URL, subject })];
});
