import { randomUUID } from 'node:crypto';
import { sha256Hex } from './crypto/tokens.js';
import { decodeWith, encodeEvent } from './events/envelope.js';
import { NameReleased, NameReserved } from './events/reservations.js';
import { StoreError, type EventStore } from './store/port.js';

const streamOf = (key: string): string => `reservation-${sha256Hex(key).slice(0, 40)}`;

/** Who holds the name now (its stream's last event) and since when, or undefined when nobody does. */
function holderOf(events: Awaited<ReturnType<EventStore['readStream']>>): { holder: string; since: string } | undefined {
  const last = events.at(-1);
  if (last?.type !== NameReserved.type) return undefined;
  const { data, metadata } = decodeWith(NameReserved, last);
  return { holder: data.holder, since: metadata.at };
}

/** How long a holder whose resource has no event yet (its create under way) keeps the name: past it, its create died between the two appends. */
export const PENDING_HOLD_MS = 60_000;

/**
 * Whether a holder still holds its name, from its resource's stream: `row` undefined while its
 * create is under way (for PENDING_HOLD_MS), `live` false once it is gone (deleted, its project deleted).
 */
export function stillHolds(row: unknown, live: boolean, since: string, now = Date.now()): boolean {
  return row === undefined ? now - Date.parse(since) < PENDING_HOLD_MS : live;
}

const metadata = (actor: string) => ({ event_id: randomUUID(), correlation_id: 'reservation', actor, at: new Date().toISOString() });

/**
 * Takes a unique name for `holder`: true when it now holds it, false when another holder still
 * does (`holds` says, see stillHolds) or took it concurrently. The append expects the revision
 * read, so two creates racing for one name cannot both win, whatever the read models say yet; a
 * holder that is gone (its resource deleted without a release, say with its project) is taken over.
 */
export async function reserveName(store: EventStore, key: string, holder: string, actor: string, holds: (holder: string, since: string) => Promise<boolean>): Promise<boolean> {
  const stream = streamOf(key);
  const events = await store.readStream(stream);
  const current = holderOf(events);
  if (current !== undefined && (await holds(current.holder, current.since))) return false;
  try {
    await store.append(stream, [encodeEvent(NameReserved, { key, holder }, metadata(actor))], events.length === 0 ? 'no_stream' : events.at(-1)!.revision);
    return true;
  } catch (error) {
    if (error instanceof StoreError && error.code === 'WRONG_EXPECTED_REVISION') return false;
    throw error;
  }
}

/** Lets the name go, when `holder` holds it. */
export async function releaseName(store: EventStore, key: string, holder: string, actor: string): Promise<void> {
  const stream = streamOf(key);
  const events = await store.readStream(stream);
  if (holderOf(events)?.holder !== holder) return;
  await store.append(stream, [encodeEvent(NameReleased, { key, holder }, metadata(actor))], events.at(-1)!.revision);
}

/** The reservation keys of the unique names. */
export const reservationKeys = {
  domain: (hostname: string) => `domain:${hostname}`,
  branch: (databaseId: string, name: string) => `branch:${databaseId}:${name}`,
};
