/**
 * The event ingest appends for one decision: its payload's canonical bytes, its metadata, and an
 * id derived from the proxy's (proxy_id, boot_epoch, seq), so a redelivered record is one event.
 */
import { hash } from 'node:crypto';
import type { AuditEventPayload } from '../../projections/audit.js';
import { derivedUuid } from '../crypto/derived-uuid.js';
import { decisionDefinition, type DecisionRecord } from '../events/audit.js';
import { canonicalMetadataText, checkedMetadata, encodePayload, type EventMetadata } from '../events/envelope.js';
import type { DecisionIdForm, NewEvent } from '../store/port.js';

export function eventIdFor(key: string): string {
  return derivedUuid(`pgward-ingest\0${key}`);
}

/** The dedup key of a decision, from its proxy's identity and sequence: its hashed event id derives from it (a decision without them has the key of nulls it always had). */
export const decisionKey = (proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null): string => `decision:${proxyId}:${bootEpoch}:${seq}`;

/** The sequence numbers a sequential id holds: its last six bytes. A boot numbering past them (never, at any rate a proxy reaches) gets hashed ids. */
const SEQUENTIAL_SEQ_LIMIT = 1n << 48n;

/**
 * The first ten bytes (as hex) of the sequential ids of one proxy boot: 74 bits of a hash of the
 * boot around the version nibble (8) and the variant bits (10). Most decisions of a message share one.
 */
let lastBoot = { key: '', hex: '' };
function bootHex(proxyId: string, bootEpoch: number): string {
  const key = `${proxyId}\0${bootEpoch}`;
  if (lastBoot.key !== key) {
    const hex = hash('sha256', `pgward-ingest\0boot\0${key}`, 'hex');
    const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
    lastBoot = { key, hex: `${hex.slice(0, 12)}8${hex.slice(13, 16)}${variant}${hex.slice(17, 20)}` };
  }
  return lastBoot.hex;
}

/**
 * The sequential event id of a proxy's decision numbered `seq` of the boot (proxyId, bootEpoch): an
 * RFC 9562 version 8 UUID of 74 bits of a hash of the boot, then the sequence in its last six bytes,
 * so that one boot's decisions lie side by side, in order, in the store's unique index of event
 * ids, where hashed ids (legacyDecisionEventId) land at random places of an index that grows with
 * the trail (docs/audit.md, "Event ids"). Its version tells it from the hashed and other derived
 * ids (version 4). A decision without the proxy's identity, or numbered from 2^48 on, has the hashed form.
 */
export function decisionEventId(proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null): string {
  if (proxyId === null || bootEpoch === null || seq === null) return legacyDecisionEventId(proxyId, bootEpoch, seq);
  const n = BigInt(seq);
  if (n < 0n || n >= SEQUENTIAL_SEQ_LIMIT) return legacyDecisionEventId(proxyId, bootEpoch, seq);
  const boot = bootHex(proxyId, bootEpoch);
  return [boot.slice(0, 8), boot.slice(8, 12), boot.slice(12, 16), boot.slice(16, 20), Number(n).toString(16).padStart(12, '0')].join('-');
}

/** The hashed event id of a decision: every decision's in a store whose ids are hashed (DecisionIdForm). */
export const legacyDecisionEventId = (proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null): string => eventIdFor(decisionKey(proxyId, bootEpoch, seq));

/** The id of a decision (by its proxy's identity and sequence) in a store of the form `form`. */
export const decisionIdIn = (form: DecisionIdForm): ((proxyId: string | null, bootEpoch: number | null, seq: bigint | string | null) => string) =>
  form === 'sequential' ? decisionEventId : legacyDecisionEventId;

/** The metadata of an event ingest appends with id `eventId` at `at`. */
const metadataWithId = (eventId: string, at: string): EventMetadata => ({ event_id: eventId, correlation_id: 'ingest', actor: 'ingest', at });

/** The metadata of an event ingest appends under `key` at `at`. */
export const ingestMetadata = (key: string, at: string): EventMetadata => metadataWithId(eventIdFor(key), at);

/**
 * The events of decisions the schema accepted, received together at `at`, with ids of the store's
 * `form`, each with the decision itself (for the checkpointer and the projections of this process).
 * A record of an earlier proxy
 * release (no placement) is stored as the v1 it is. Their metadata differ in the event id alone,
 * always of the schema's format (derived, in either form): checked once, for the first, and the
 * others' canonical text is the first's with their own id in its place (last, in key order).
 */
export function decisionEvents(decisions: readonly DecisionRecord[], at: string, form: DecisionIdForm): (NewEvent & AuditEventPayload)[] {
  if (decisions.length === 0) return [];
  const idIn = decisionIdIn(form);
  const idOf = (d: DecisionRecord): string => idIn(d.proxy_id, d.boot_epoch, d.seq);
  const first = checkedMetadata(metadataWithId(idOf(decisions[0]!), at));
  const text = canonicalMetadataText(first);
  const head = text.slice(0, text.lastIndexOf(first.event_id));
  const tail = text.slice(head.length + first.event_id.length);
  return decisions.map((decision, i) => {
    const id = i === 0 ? first.event_id : idOf(decision);
    const definition = decisionDefinition(decision);
    return { id, type: definition.type, data: encodePayload(definition, decision), metadata: Buffer.from(`${head}${id}${tail}`, 'utf8'), decision };
  });
}

/** decisionEvents of one decision. */
export function decisionEvent(decision: DecisionRecord, at: string, form: DecisionIdForm): NewEvent & AuditEventPayload {
  return decisionEvents([decision], at, form)[0]!;
}
