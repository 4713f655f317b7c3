/**
 * The event ingest appends for one decision: its payload's canonical bytes, its metadata, and an
 * id derived from the proxy's (proxy_id, boot_epoch, seq), so a redelivered record is one event.
 */
import type { AuditEventPayload } from '../../projections/audit.js';
import { derivedUuid } from '../crypto/derived-uuid.js';
import { decisionDefinition, type DecisionRecord } from '../events/audit.js';
import { canonicalMetadataText, checkedMetadata, encodePayload, type EventMetadata } from '../events/envelope.js';
import type { NewEvent } from '../store/port.js';

export function eventIdFor(key: string): string {
  return derivedUuid(`pgward-ingest\0${key}`);
}

/** The dedup key of a decision, from its proxy's identity and sequence: its event id derives from it (a decision without them has the key of nulls it always had). */
export const decisionKey = (proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null): string => `decision:${proxyId}:${bootEpoch}:${seq}`;

/** The metadata of an event ingest appends under `key` at `at`. */
export const ingestMetadata = (key: string, at: string): EventMetadata => ({ event_id: eventIdFor(key), correlation_id: 'ingest', actor: 'ingest', at });

/**
 * The events of decisions the schema accepted, received together at `at`, each with the decision
 * itself (for the checkpointer and the projections of this process). A record of an earlier proxy
 * release (no placement) is stored as the v1 it is. Their metadata differ in the event id alone,
 * always of the schema's format (derivedUuid writes it): checked once, for the first, and the
 * others' canonical text is the first's with their own id in its place (last, in key order).
 */
export function decisionEvents(decisions: readonly DecisionRecord[], at: string): (NewEvent & AuditEventPayload)[] {
  if (decisions.length === 0) return [];
  const first = checkedMetadata(ingestMetadata(decisionKeyOf(decisions[0]!), at));
  const text = canonicalMetadataText(first);
  const head = text.slice(0, text.lastIndexOf(first.event_id));
  const tail = text.slice(head.length + first.event_id.length);
  return decisions.map((decision, i) => {
    const id = i === 0 ? first.event_id : eventIdFor(decisionKeyOf(decision));
    const definition = decisionDefinition(decision);
    return { id, type: definition.type, data: encodePayload(definition, decision), metadata: Buffer.from(`${head}${id}${tail}`, 'utf8'), decision };
  });
}

/** decisionEvents of one decision. */
export function decisionEvent(decision: DecisionRecord, at: string): NewEvent & AuditEventPayload {
  return decisionEvents([decision], at)[0]!;
}

const decisionKeyOf = (decision: DecisionRecord): string => decisionKey(decision.proxy_id, decision.boot_epoch, decision.seq);
