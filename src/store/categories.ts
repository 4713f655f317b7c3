/**
 * Stream categories: the wake-up unit of subscriptions (ARCHITECTURE.md §4 "Categories"). A
 * stream's category is its name up to and including the first `-` (`audit-`, `credential-`,
 * `policy-`), when that is 1 to 40 letters, digits or underscores and the dash; other streams
 * have none. The PostgreSQL store computes the same category in SQL from CATEGORY_PATTERN, and
 * notifies one channel per category, so a subscriber listens only to the categories it reads.
 */
export const CATEGORY_PATTERN = '^[A-Za-z0-9_]{1,40}-';
const category = new RegExp(CATEGORY_PATTERN);

/**
 * The category of the audit streams: under load nearly every event. The PostgreSQL store indexes
 * the events of all other categories apart by position (`events_beside_audit`), so that a reader of
 * those (the control plane, audit checkpoints, session marks) steps from one of its events to the
 * next instead of visiting every decision appended between them.
 */
export const AUDIT_CATEGORY = 'audit-';

/** True when no stream of AUDIT_CATEGORY starts with any of these prefixes; false for no prefixes (every stream). */
export function readsBesideAudit(streamPrefixes: readonly string[] | undefined): boolean {
  if (!streamPrefixes?.length) return false;
  return streamPrefixes.every((prefix) => !prefix.startsWith(AUDIT_CATEGORY) && !AUDIT_CATEGORY.startsWith(prefix));
}

/** Notified on every append, whatever the stream: for subscribers whose filter names no category. */
export const ALL_EVENTS_CHANNEL = 'pgward_events';
/** Channel names are prefixed with this and the category (at most 55 bytes, under PostgreSQL's 63). */
export const CATEGORY_CHANNEL_PREFIX = 'pgward_events:';

/**
 * The category of a stream name or of a stream prefix. Every stream that starts with a prefix
 * of category `c` is itself of category `c`, since the first dash is at the same place.
 */
export function categoryOf(streamOrPrefix: string): string | undefined {
  return category.exec(streamOrPrefix)?.[0];
}

/**
 * The channels that wake a subscriber of these stream prefixes: one per category, or the
 * all-events channel when some prefix (or no filter) could match streams of any category.
 */
export function wakeChannels(streamPrefixes: readonly string[] | undefined): string[] {
  if (!streamPrefixes?.length) return [ALL_EVENTS_CHANNEL];
  const channels = streamPrefixes.map((prefix) => {
    const of = categoryOf(prefix);
    return of === undefined ? ALL_EVENTS_CHANNEL : `${CATEGORY_CHANNEL_PREFIX}${of}`;
  });
  return [...new Set(channels)];
}
