/**
 * The event ingest appends for one decision: its payload's canonical bytes, its metadata, and an
 * id derived from the proxy's (proxy_id, boot_epoch, seq), so a redelivered record is one event.
 */
import type { AuditEventPayload } from '../../projections/audit.js';
import { derivedUuid } from '../crypto/derived-uuid.js';
import { decisionDefinition, type DecisionRecord } from '../events/audit.js';
import { encodeParsed, type EventMetadata } from '../events/envelope.js';
import type { NewEvent } from '../store/port.js';

export function eventIdFor(key: string): string {
  return derivedUuid(`pgward-ingest\0${key}`);
}

/** The dedup key of a decision, from its proxy's identity and sequence: its event id derives from it (a decision without them has the key of nulls it always had). */
export const decisionKey = (proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null): string => `decision:${proxyId}:${bootEpoch}:${seq}`;

/** The metadata of an event ingest appends under `key` at `at`. */
export const ingestMetadata = (key: string, at: string): EventMetadata => ({ event_id: eventIdFor(key), correlation_id: 'ingest', actor: 'ingest', at });

/**
 * The event of a decision the schema accepted, received at `at`, with the decision itself (for the
 * checkpointer and the projections of this process). A record of an earlier proxy release (no
 * placement) is stored as the v1 it is.
 */
export function decisionEvent(decision: DecisionRecord, at: string): NewEvent & AuditEventPayload {
  const metadata = ingestMetadata(decisionKey(decision.proxy_id, decision.boot_epoch, decision.seq), at);
  return { ...encodeParsed(decisionDefinition(decision), decision, metadata), decision };
}
