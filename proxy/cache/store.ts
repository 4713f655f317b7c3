import { ColdShapes } from './cold-shapes.js';

/**
 * Cached results of one database: least recently used entries go beyond `maxEntries` or
 * `maxBytes`; an entry is fresh for `ttlMs`, then stale for `swrMs` (served while exactly one
 * refresh runs), then gone. A write the gateway sees to a table drops every entry that read it; a
 * result whose statement started before such a write is not stored (it may predate the write).
 */
export interface CachedResult {
  /**
   * The replies as the client got them, one after another in one buffer: RowDescription (simple
   * protocol), DataRows, CommandComplete. A hit writes it as it is, with no copy.
   */
  readonly reply: Buffer;
  readonly rows: number;
  /** Tables the statement read (`schema.table`), for invalidation. */
  readonly tables: readonly string[];
}

export interface StoreLimits {
  readonly maxEntries: number;
  readonly maxBytes: number;
  readonly ttlMs: number;
  readonly swrMs: number;
}

/** What became of a lookup: a fresh entry, a stale one this caller need not refresh, a stale one it must refresh, or nothing. */
export type Lookup =
  | { readonly outcome: 'hit'; readonly result: CachedResult }
  | { readonly outcome: 'stale'; readonly result: CachedResult }
  | { readonly outcome: 'miss' };

/** Counts a store reports as it goes (metrics.ts wires them to prom-client). */
export interface StoreEvents {
  evicted(count: number): void;
  bytes(delta: number): void;
}

/** An entry's own ttl or swr, overriding the store's (a statement shape's cache rule, rules.ts). */
export type EntryTiming = Partial<Pick<StoreLimits, 'ttlMs' | 'swrMs'>>;

interface Entry {
  readonly key: string;
  readonly result: CachedResult;
  readonly bytes: number;
  readonly storedAt: number;
  readonly timing: EntryTiming | undefined;
  refreshing: boolean;
  /** Its neighbours in the order of use: the entry used just before it, and just after it. */
  older: Entry | undefined;
  newer: Entry | undefined;
}

const ENTRY_OVERHEAD_BYTES = 128;

/** What an entry costs the byte bound: its replies, its key, and a fixed overhead. */
export function entryBytes(key: string, result: CachedResult): number {
  return ENTRY_OVERHEAD_BYTES + key.length * 2 + result.reply.length;
}

/** The slots of the table of keys seen once: 4 bytes each, at most 4 MiB. */
const MAX_SEEN_SLOTS = 1 << 20;

/** How many code units of a key, from its end, its fingerprint reads: where keys of one statement differ (its literals, its parameters). */
const FINGERPRINT_UNITS = 64;

/** A 32-bit FNV-1a of a key's length and last code units, never 0 (an empty slot). */
function fingerprint(key: string): number {
  let hash = Math.imul(0x811c9dc5 ^ key.length, 0x01000193);
  for (let index = Math.max(0, key.length - FINGERPRINT_UNITS); index < key.length; index++) hash = Math.imul(hash ^ key.charCodeAt(index), 0x01000193);
  return hash >>> 0 || 1;
}

export class ResultStore {
  private readonly entries = new Map<string, Entry>();
  /** Keys of the entries that read each table. */
  private readonly byTable = new Map<string, Set<string>>();
  /** Bumped by every write seen: a result started before it is not stored. */
  private generationNow = 0;
  private bytesNow = 0;
  /**
   * The least and the most recently used entry, the ends of a list through every entry in the order
   * of use. A use moves its entry to the newest end, an eviction takes the oldest: no Map deletes
   * and sets per hit (each leaves a slot behind until the table rehashes), and no iterator kept
   * over the Map (one held across rehashes keeps every table it has not caught up with alive).
   */
  private oldest: Entry | undefined;
  private newest: Entry | undefined;
  /** Fingerprints of keys that missed once while the store was full (admits). */
  private seen = new Uint32Array(0);
  /** The statement shapes whose lookups have stopped paying (cold-shapes.ts), by the policy's decision for their text. */
  readonly coldShapes: ColdShapes<object>;

  constructor(
    private limits: StoreLimits,
    private readonly events: StoreEvents,
    private readonly now: () => number = Date.now,
    random?: () => number,
  ) {
    this.coldShapes = new ColdShapes(random);
  }

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.bytesNow;
  }

  /** The write generation a statement starts under; `store` is given it back. */
  get generation(): number {
    return this.generationNow;
  }

  /** New limits (the database's cache_config changed): entries over them go now. */
  configure(limits: StoreLimits): void {
    this.limits = limits;
    this.evictOver();
  }

  /**
   * The entry under `key`. A stale one is handed out with `stale`; the first caller to see it
   * stale gets `miss` instead (it runs the refresh), and until that refresh stores or gives up,
   * everyone else gets the stale entry.
   */
  lookup(key: string): Lookup {
    const entry = this.entries.get(key);
    if (!entry) return { outcome: 'miss' };
    const age = this.now() - entry.storedAt;
    const ttlMs = entry.timing?.ttlMs ?? this.limits.ttlMs;
    if (age >= ttlMs + (entry.timing?.swrMs ?? this.limits.swrMs)) {
      this.remove(key, entry);
      return { outcome: 'miss' };
    }
    this.used(entry);
    if (age < ttlMs) return { outcome: 'hit', result: entry.result };
    if (entry.refreshing) return { outcome: 'stale', result: entry.result };
    entry.refreshing = true;
    return { outcome: 'miss' };
  }

  /**
   * Whether a miss on `key` should capture its result to store it. While the store has room every
   * miss does; once it is full each result stored evicts another, so a key is admitted only at its
   * second miss since it was first seen (a refresh of an entry always is). A read seen once (most
   * point reads of a large table) then costs no copy of its replies and evicts nothing. What was
   * seen is a table of key fingerprints, one slot per entry the store holds: a key whose slot
   * another took since is forgotten (it waits for one more miss), two keys of one fingerprint
   * admit each other (one result stored early); nothing is allocated per miss.
   */
  admits(key: string): boolean {
    if (this.entries.size < this.limits.maxEntries && this.bytesNow < this.limits.maxBytes) return true;
    if (this.entries.has(key)) return true;
    const print = fingerprint(key);
    const seen = this.seenTable();
    const slot = print & (seen.length - 1);
    if (seen[slot] === print) {
      seen[slot] = 0;
      return true;
    }
    seen[slot] = print;
    return false;
  }

  private seenTable(): Uint32Array {
    const slots = Math.min(MAX_SEEN_SLOTS, 2 ** Math.ceil(Math.log2(Math.max(2, this.limits.maxEntries))));
    if (this.seen.length !== slots) this.seen = new Uint32Array(slots);
    return this.seen;
  }

  /** A refresh `lookup` handed out ended without a result to store: the next caller refreshes. */
  abandon(key: string): void {
    const entry = this.entries.get(key);
    if (entry) entry.refreshing = false;
  }

  /** Stores a result of a statement started under `generation`; false (nothing stored) when a write came since, or it is too large. */
  store(key: string, result: CachedResult, generation: number, timing?: EntryTiming): boolean {
    if (generation !== this.generationNow) {
      this.abandon(key);
      return false;
    }
    const bytes = entryBytes(key, result);
    if (this.limits.maxEntries <= 0 || bytes > this.limits.maxBytes) {
      this.abandon(key);
      return false;
    }
    const old = this.entries.get(key);
    if (old) this.remove(key, old);
    const entry: Entry = { key, result, bytes, storedAt: this.now(), timing, refreshing: false, older: undefined, newer: undefined };
    this.entries.set(key, entry);
    this.append(entry);
    this.bytesNow += bytes;
    this.events.bytes(bytes);
    for (const table of result.tables) {
      let keys = this.byTable.get(table);
      if (!keys) this.byTable.set(table, (keys = new Set()));
      keys.add(key);
    }
    this.evictOver();
    return true;
  }

  /** A write to `tables` (all of them when `tables` is undefined: DDL, TRUNCATE of unknown reach): their entries go. */
  invalidate(tables: readonly string[] | undefined): void {
    this.generationNow++;
    if (tables === undefined) return this.clear();
    for (const table of tables) {
      for (const key of this.byTable.get(table) ?? []) {
        const entry = this.entries.get(key);
        if (entry) this.remove(key, entry);
      }
    }
  }

  clear(): void {
    for (const [key, entry] of [...this.entries]) this.remove(key, entry);
  }

  private evictOver(): void {
    let evicted = 0;
    while (this.oldest && (this.entries.size > this.limits.maxEntries || this.bytesNow > this.limits.maxBytes)) {
      this.remove(this.oldest.key, this.oldest);
      evicted++;
    }
    if (evicted > 0) this.events.evicted(evicted);
  }

  /** Moves an entry to the newest end of the order of use. */
  private used(entry: Entry): void {
    if (entry === this.newest) return;
    this.unlink(entry);
    this.append(entry);
  }

  private append(entry: Entry): void {
    entry.older = this.newest;
    entry.newer = undefined;
    if (this.newest) this.newest.newer = entry;
    else this.oldest = entry;
    this.newest = entry;
  }

  private unlink(entry: Entry): void {
    if (entry.older) entry.older.newer = entry.newer;
    else this.oldest = entry.newer;
    if (entry.newer) entry.newer.older = entry.older;
    else this.newest = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.unlink(entry);
    this.bytesNow -= entry.bytes;
    this.events.bytes(-entry.bytes);
    for (const table of entry.result.tables) {
      const keys = this.byTable.get(table);
      keys?.delete(key);
      if (keys?.size === 0) this.byTable.delete(table);
    }
  }
}
