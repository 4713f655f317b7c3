import type { BusMessage, ConsumerBacklog, DecisionSink } from '../bus/port.js';
import type { ChannelClient } from './channel-client.js';
import { AuditBacklogAnswer } from './wire.js';

/**
 * The decision publisher's bus on an enrolled data plane (DecisionSink): each message is POSTed to
 * the control plane, which checks it is this enrollment's and publishes it to its own bus under
 * the same id. A publish resolves once the control plane's bus holds it; the publisher retries
 * otherwise, and a retried message is stored once (the bus's dedup on its id, and ingest's event
 * ids from each decision's proxy, boot epoch and sequence number).
 */
export class RemoteBus implements DecisionSink {
  /** Stands in for ingest's acknowledged count, which the control plane does not tell: it moves at each answer that ingest progresses. */
  private progressed = 0;

  constructor(
    private readonly client: ChannelClient,
    readonly maxMessageBytes: number,
  ) {}

  async publish(message: BusMessage): Promise<void> {
    await this.client.json('POST', '/v1/data-plane/decisions', { id: message.id, data: Buffer.from(message.data).toString('base64') });
  }

  /** The control plane's ingest backlog, as the proxy's audit back-pressure reads a bus's (proxy/audit-backpressure.ts); undefined without an ingest consumer. */
  async auditBacklog(): Promise<ConsumerBacklog | undefined> {
    const answer = AuditBacklogAnswer.parse(await this.client.json('GET', '/v1/data-plane/audit-backlog'));
    if (answer.behind_ms === null) return undefined;
    if (answer.progressing) this.progressed += 1;
    return { pending: answer.pending ? 1 : 0, acknowledged: this.progressed, oldestAgeMs: answer.behind_ms };
  }
}
