import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Fanout } from '../../src/bus/fanout.js';
import { CacheConfig } from '../../src/events/databases.js';
import type { ProxyMetrics } from '../metrics.js';
import { ResultStore, type StoreLimits } from './store.js';

/** The byte bound of each database's results, whatever its max_entries. */
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** What a cache lookup came to, as the audit records it and the metrics count it. */
export type CacheOutcome = 'hit' | 'stale' | 'miss' | 'bypass';

/** The counters the caches feed (metrics.ts). */
export interface CacheMetrics {
  lookup(outcome: CacheOutcome): void;
  /** A statement of a cold shape ran past the cache without a lookup (counted as a bypass too). */
  skipped(): void;
  evicted(count: number): void;
  bytes(delta: number): void;
}

/** Parsed configurations by the row object holding them: a row's cache_config is parsed once. */
const parsedConfigs = new WeakMap<object, CacheConfig | null>();

function parsedConfig(stored: unknown): CacheConfig | undefined {
  if (typeof stored !== 'object' || stored === null) return undefined;
  let config = parsedConfigs.get(stored);
  if (config === undefined) parsedConfigs.set(stored, (config = CacheConfig.safeParse(stored).data ?? null));
  return config ?? undefined;
}

function limitsOf(config: CacheConfig, maxBytes: number): StoreLimits {
  return { maxEntries: config.max_entries, maxBytes, ttlMs: config.ttl_seconds * 1000, swrMs: config.swr_seconds * 1000 };
}

/** Every database's result store in this proxy, each sized by its database's cache_config as the proxy's view holds it now. */
export class ResultCaches {
  private readonly stores = new Map<string, { store: ResultStore; config: CacheConfig }>();

  constructor(
    /** A database's cache_config now (the database row's, as stored: unknown until parsed); undefined for a database not known. */
    private readonly configOf: (databaseId: string) => unknown,
    readonly metrics: CacheMetrics,
    private readonly maxBytes = DEFAULT_MAX_BYTES,
    private readonly now: () => number = Date.now,
    /** Draws which statements of a cold shape are looked up (cold-shapes.ts); Math.random unless given. */
    private readonly random?: () => number,
  ) {}

  /**
   * The store of a database whose cache is on (enabled, with room and time for an entry); undefined
   * when it is off, and its entries go. A cache_config that does not parse turns the cache off.
   */
  storeOf(databaseId: string): ResultStore | undefined {
    const known = this.stores.get(databaseId);
    const config = parsedConfig(this.configOf(databaseId));
    if (!config || !config.enabled || config.max_entries === 0 || config.ttl_seconds === 0) {
      if (known) {
        known.store.clear();
        this.stores.delete(databaseId);
      }
      return undefined;
    }
    if (known && known.config === config) return known.store;
    if (known) {
      known.config = config;
      known.store.configure(limitsOf(config, this.maxBytes));
      return known.store;
    }
    const store = new ResultStore(limitsOf(config, this.maxBytes), this.metrics, this.now, this.random);
    this.stores.set(databaseId, { store, config });
    return store;
  }

  /** The store of a database, if it has one, for invalidation: a write is seen whether or not its reads are cached now. */
  existing(databaseId: string): ResultStore | undefined {
    return this.stores.get(databaseId)?.store;
  }

  /** What `share` publishes each write to; nothing until then. */
  private published: ((note: Invalidation) => void) | undefined;
  private fanout: Fanout | undefined;

  /**
   * A write to `tables` of a database (undefined: every table) seen here, by `writer` (a credential
   * id) when known: the entries that read them go, here and, once shared, in every process the
   * fan-out reaches, where the note also opens the writer's read-your-writes window.
   */
  invalidate(databaseId: string, tables: readonly string[] | undefined, writer?: string): void {
    this.existing(databaseId)?.invalidate(tables);
    this.published?.({ origin: '', databaseId, tables: tables === undefined ? null : [...tables], ...(writer === undefined ? {} : { writer }) });
  }

  /**
   * Shares invalidations over `fanout`: each write seen here is published, and each published
   * elsewhere (the wire proxy's, the hosted MCP's, in other processes) drops the entries here and
   * is handed to `wroteElsewhere` with its writer. Best effort: a note lost with the link leaves
   * entries to their ttl. The returned function stops it.
   */
  share(fanout: Fanout, wroteElsewhere?: (credentialId: string) => void): () => void {
    const origin = randomUUID();
    const encoder = new TextEncoder();
    this.fanout = fanout;
    this.published = (note) => fanout.publish(encoder.encode(JSON.stringify({ ...note, origin })));
    const stop = fanout.subscribe((data) => {
      const note = Invalidation.safeParse(parseJson(data)).data;
      if (!note || note.origin === origin) return;
      this.existing(note.databaseId)?.invalidate(note.tables ?? undefined);
      if (note.writer !== undefined) wroteElsewhere?.(note.writer);
    });
    return () => {
      this.published = undefined;
      this.fanout = undefined;
      stop();
    };
  }

  /** Whether invalidations leave this process (share): only then is there a flush to wait for. */
  get sharing(): boolean {
    return this.fanout !== undefined;
  }

  /** Resolves once the invalidations published so far have left this process (at once when not shared). */
  async flushed(): Promise<void> {
    await this.fanout?.flushed();
  }
}

/** A write one process saw, as the fan-out carries it; `tables` null for every table; `writer` the credential that wrote, when known. */
const Invalidation = z.object({ origin: z.string(), databaseId: z.string(), tables: z.array(z.string()).nullable(), writer: z.string().optional() });
type Invalidation = z.infer<typeof Invalidation>;

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}

/** The caches' counters on the proxy's prom-client registry. */
export function cacheMetricsOf(metrics: Pick<ProxyMetrics, 'cacheLookupsOf' | 'cacheColdSkips' | 'cacheEvictions' | 'cacheBytes'>): CacheMetrics {
  const lookups = { hit: metrics.cacheLookupsOf('hit'), stale: metrics.cacheLookupsOf('stale'), miss: metrics.cacheLookupsOf('miss'), bypass: metrics.cacheLookupsOf('bypass') };
  return {
    lookup: (outcome) => lookups[outcome].inc(),
    skipped: () => metrics.cacheColdSkips.inc(),
    evicted: (count) => metrics.cacheEvictions.inc(count),
    bytes: (delta) => metrics.cacheBytes.inc(delta),
  };
}

/**
 * A purge asked of a database (POST .../cache/purge, a CachePurged event each proxy's view folds):
 * its entries go, and no result whose statement started before it is kept.
 */
export function purgeOnRequest(view: { onChange(listener: (databaseId: string, before: { purges: number } | undefined, after: { purges: number } | undefined) => void): unknown }, caches: ResultCaches): void {
  view.onChange((databaseId, before, after) => {
    if ((after?.purges ?? 0) !== (before?.purges ?? 0)) caches.existing(databaseId)?.invalidate(undefined);
  });
}
