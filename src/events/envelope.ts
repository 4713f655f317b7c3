import { z } from 'zod';
import { canonicalBytes, canonicalString } from '../crypto/canonical-json.js';
import type { NewEvent, RecordedEvent } from '../store/port.js';

/** Metadata carried by every event (ARCHITECTURE.md §3). `at` is the event's time: projections use it, never the clock. */
export const EventMetadata = z.strictObject({
  event_id: z.uuid(),
  correlation_id: z.string().min(1).max(200),
  actor: z.string().min(1).max(200),
  at: z.iso.datetime({ offset: false, precision: 3 }),
});
export type EventMetadata = z.infer<typeof EventMetadata>;

const META = EventMetadata.shape;
const META_MEMBERS: ReadonlySet<string> = new Set(Object.keys(META));
const EVENT_ID = META.event_id.def.pattern!;
const AT = META.at.def.pattern!;
const isLabel = (value: unknown, schema: typeof META.actor): boolean =>
  typeof value === 'string' && value.length >= schema.minLength! && value.length <= schema.maxLength!;

/**
 * Whether EventMetadata accepts `value`, with the schema's own patterns and bounds: ingest encodes
 * metadata for every decision, and the zod parse cost it about 2 µs each. The parse still names
 * what is wrong with metadata this refuses (test/unit/event-metadata-check.unit.test.ts compares both).
 */
export function isEventMetadata(value: unknown): value is EventMetadata {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  // for-in, as the strict schema looks for unknown keys.
  for (const key in value) if (!META_MEMBERS.has(key)) return false;
  const meta = value as Readonly<Record<keyof EventMetadata, unknown>>;
  return typeof meta.event_id === 'string' && EVENT_ID.test(meta.event_id) && isLabel(meta.correlation_id, META.correlation_id) && isLabel(meta.actor, META.actor) && typeof meta.at === 'string' && AT.test(meta.at);
}

export interface EventDefinition<T extends string = string, S extends z.ZodType = z.ZodType> {
  /** Past-tense name, e.g. `CredentialRegistered`. */
  readonly name: T;
  readonly version: number;
  /** Stored type: `<name>.v<version>`. */
  readonly type: `${T}.v${number}`;
  readonly schema: S;
  /** A faster encoder of the payload's canonical JSON text, byte-identical to `canonicalize`; used when present. */
  readonly canonical?: (payload: z.output<S>) => string;
}

export function defineEvent<T extends string, S extends z.ZodType>(name: T, version: number, schema: S, canonical?: (payload: z.output<S>) => string): EventDefinition<T, S> {
  return { name, version, type: `${name}.v${version}`, schema, ...(canonical && { canonical }) };
}

/** canonicalize of parsed metadata, whose strict schema fixes its four string members: written in JCS key order. */
export function canonicalMetadataText(meta: EventMetadata): string {
  return `{"actor":${canonicalString(meta.actor)},"at":${canonicalString(meta.at)},"correlation_id":${canonicalString(meta.correlation_id)},"event_id":${canonicalString(meta.event_id)}}`;
}

/** Validates an event payload and serializes it as canonical JSON bytes, ready for the store. */
export function encodeEvent<S extends z.ZodType>(definition: EventDefinition<string, S>, data: z.input<S>, metadata: EventMetadata): NewEvent {
  return encodeParsed(definition, definition.schema.parse(data), metadata);
}

/** encodeEvent for a payload that the definition's schema has just parsed (its output), so that it is not parsed twice. */
export function encodeParsed<S extends z.ZodType>(definition: EventDefinition<string, S>, payload: z.output<S>, metadata: EventMetadata): NewEvent {
  const meta = checkedMetadata(metadata);
  return { id: meta.event_id, type: definition.type, data: encodePayload(definition, payload), metadata: Buffer.from(canonicalMetadataText(meta), 'utf8') };
}

/** The canonical bytes of a payload that the definition's schema has just parsed. */
export function encodePayload<S extends z.ZodType>(definition: EventDefinition<string, S>, payload: z.output<S>): Uint8Array {
  return definition.canonical ? Buffer.from(definition.canonical(payload), 'utf8') : canonicalBytes(payload);
}

/** `metadata` when EventMetadata accepts it; the schema's ZodError otherwise. */
export function checkedMetadata(metadata: EventMetadata): EventMetadata {
  return isEventMetadata(metadata) ? metadata : EventMetadata.parse(metadata);
}

export interface DecodedEvent<T extends string = string, D = unknown> {
  readonly type: T;
  readonly data: D;
  readonly metadata: EventMetadata;
  readonly stream: string;
  readonly revision: number;
  readonly position: bigint;
}

/** An event's data or metadata bytes as JSON, not validated. */
export function parseJson(bytes: Uint8Array): unknown {
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
}

export function decodeMetadata(event: Pick<RecordedEvent, 'metadata'>): EventMetadata {
  return EventMetadata.parse(parseJson(event.metadata));
}

/** The event's payload alone, validated: for readers that have no use for its metadata. */
export function decodeData<S extends z.ZodType>(definition: EventDefinition<string, S>, event: Pick<RecordedEvent, 'data'>): z.output<S> {
  return definition.schema.parse(parseJson(event.data));
}

export function decodeWith<T extends string, S extends z.ZodType>(definition: EventDefinition<T, S>, event: RecordedEvent): DecodedEvent<`${T}.v${number}`, z.output<S>> {
  return {
    type: definition.type,
    data: definition.schema.parse(parseJson(event.data)),
    metadata: decodeMetadata(event),
    stream: event.stream,
    revision: event.revision,
    position: event.position,
  };
}
