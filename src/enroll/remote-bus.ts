import type { BusMessage, DecisionSink } from '../bus/port.js';
import type { ChannelClient } from './channel-client.js';

/**
 * The decision publisher's bus on an enrolled data plane (DecisionSink): each message is POSTed to
 * the control plane, which checks it is this enrollment's and publishes it to its own bus under
 * the same id. A publish resolves once the control plane's bus holds it; the publisher retries
 * otherwise, and a retried message is stored once (the bus's dedup on its id, and ingest's event
 * ids from each decision's proxy, boot epoch and sequence number).
 */
export class RemoteBus implements DecisionSink {
  constructor(
    private readonly client: ChannelClient,
    readonly maxMessageBytes: number,
  ) {}

  async publish(message: BusMessage): Promise<void> {
    await this.client.json('POST', '/v1/data-plane/decisions', { id: message.id, data: Buffer.from(message.data).toString('base64') });
  }
}
