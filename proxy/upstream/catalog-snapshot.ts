import { decideStatement, statementKind, type StatementContext, type StatementDecision } from '../policy/hook.js';
import type { UpstreamCatalog } from '../policy/upstream-catalog.js';
import type { UpstreamHandle } from '../upstreams.js';
import { runStatement, StatementFailed } from '../../src/mcp/agent/statement.js';
import { CATALOG_SQL, catalogFromRows } from './catalog-query.js';
import { UpstreamError } from './connection.js';
import { acquireOrExplain, classifyUpstreamFailure, upstreamRule, UpstreamUnavailable, type UpstreamFailure } from './failure.js';

/** Why no catalog snapshot may be used to decide now: every statement is then refused (rule catalog.unavailable). */
export interface CatalogUnavailable {
  readonly unavailable: string;
  /** When it is because no upstream connection could be had: why, classified (the refusal then says that instead). */
  readonly upstream?: UpstreamFailure;
}

export function isUnavailable(catalog: UpstreamCatalog | CatalogUnavailable): catalog is CatalogUnavailable {
  return 'unavailable' in catalog;
}

/** SQLSTATE system_error (class 58, outside PostgreSQL itself), as for an audit trail that cannot take records: retry later. */
export const CATALOG_UNAVAILABLE = '58000';

/** A wire session's hold on its database's snapshot: kept fresh while held. */
export interface CatalogLease {
  /** The snapshot to decide with, or why there is none: no I/O, for the hot path. */
  current(): UpstreamCatalog | CatalogUnavailable;
  /** The session ran DDL that has now committed (or was never in a transaction): read the catalog again at once. */
  changed(): void;
  /** While the read `changed` started runs: its end, which the next statement's decision waits for. */
  changing(): Promise<void> | undefined;
  /** Reads the catalog again unless it was read within FRESH_MS: a statement names a relation the snapshot does not have. */
  fresh(): Promise<void>;
  /** The session moved to another pool of its database (the database or its role changed). */
  moved(handle: UpstreamHandle): void;
  release(): void;
}

export interface CatalogTiming {
  /** How often a database's catalog is read again while a session holds it or it was used lately. */
  readonly refreshMs: number;
  /** How long the last snapshot read still serves while reading again fails; past it, statements are refused. */
  readonly maxAgeMs: number;
  /** A snapshot nobody holds or used for this long is dropped (its database is read again at the next use). */
  readonly idleMs: number;
  /** Bound on one read: getting a pooled connection, and the statement itself. */
  readonly readTimeoutMs: number;
}

export const CATALOG_TIMING: CatalogTiming = { refreshMs: 30_000, maxAgeMs: 5 * 60_000, idleMs: 5 * 60_000, readTimeoutMs: 10_000 };

/** A statement naming a relation the snapshot lacks has it read again, unless a read started this recently (it is then refused, catalog.relation_unknown). */
export const FRESH_MS = 1_000;

/** Far more rows than any catalog has: a catalog read that would pass it is refused as too large. */
const MAX_CATALOG_ROWS = 2_000_000;

/** One database's snapshot (per database revision) and its refresh. */
class Entry {
  snapshot: UpstreamCatalog | undefined;
  readAt = Number.NEGATIVE_INFINITY;
  failure: string | undefined;
  upstreamFailure: UpstreamFailure | undefined;
  usedAt = performance.now();
  leases = 0;
  private reading: Promise<void> | undefined;
  private again = false;
  /** The read after a change the gateway ran, while it runs. */
  changing: Promise<void> | undefined;
  readonly timer: NodeJS.Timeout;

  constructor(
    public handle: UpstreamHandle,
    private readonly timing: CatalogTiming,
    private readonly onFailure: (error: unknown) => void,
    drop: (entry: Entry) => void,
  ) {
    this.timer = setInterval(() => {
      if (this.leases === 0 && performance.now() - this.usedAt > timing.idleMs) drop(this);
      else void this.read();
    }, timing.refreshMs).unref();
  }

  /** The snapshot to use, or why there is none; then a read starts, unless `justRead` (the caller awaited one: it would only repeat its failure). */
  current(justRead = false): UpstreamCatalog | CatalogUnavailable {
    const now = performance.now();
    this.usedAt = now;
    if (this.snapshot && now - this.readAt <= this.timing.maxAgeMs) return this.snapshot;
    if (!justRead) void this.read();
    const unavailable = this.snapshot ? `the last successful read is older than ${this.timing.maxAgeMs / 1000} s (${this.failure ?? 'reading it again failed'})` : (this.failure ?? 'it has not been read yet');
    return this.upstreamFailure ? { unavailable, upstream: this.upstreamFailure } : { unavailable };
  }

  stale(): boolean {
    return performance.now() - this.readAt > this.timing.refreshMs;
  }

  /** A read that starts after this call (unless `always`, none when one started within FRESH_MS), and its end. */
  async fresh(always = false): Promise<void> {
    if (!always && performance.now() - this.readAt < FRESH_MS) return;
    await this.reading;
    await this.read();
  }

  /** DDL ran: a fresh read, which decisions wait for while it runs. */
  changed(): void {
    const changing = (this.changing = this.fresh(true).finally(() => {
      if (this.changing === changing) this.changing = undefined;
    }));
  }

  /** Reads the catalog; a read asked for while one runs runs once more after it (it may have started before a change committed). */
  read(again = false): Promise<void> {
    if (this.reading) {
      this.again ||= again;
      return this.reading;
    }
    this.reading = this.readOnce().finally(() => {
      this.reading = undefined;
      if (this.again) {
        this.again = false;
        void this.read();
      }
    });
    return this.reading;
  }

  private async readOnce(): Promise<void> {
    const started = performance.now();
    try {
      const rows = await this.rows();
      const next = catalogFromRows(rows);
      // An unchanged catalog keeps its object: every decision cached under its version stays valid.
      if (next.version !== this.snapshot?.version) this.snapshot = next;
      this.readAt = started;
      this.failure = undefined;
      this.upstreamFailure = undefined;
    } catch (error) {
      // Errors of the connection name the upstream's host and user: the agent reads their classified wording instead.
      const upstream = error instanceof UpstreamUnavailable ? error.failure : error instanceof UpstreamError ? classifyUpstreamFailure(error) : undefined;
      this.upstreamFailure = upstream;
      this.failure = `reading it failed: ${upstream?.message ?? (error as Error).message}`;
      // A connection that could not be opened was logged where it happened, by the pool.
      if (!(error instanceof UpstreamUnavailable && error.connectFailed)) this.onFailure(error);
    }
  }

  private async rows(): Promise<readonly (readonly (string | null)[])[]> {
    const { pool } = this.handle;
    if (pool.isClosed) throw new Error('the pool it is read through was closed (the database or its role changed)');
    const timeoutMs = this.timing.readTimeoutMs;
    const connection = await acquireOrExplain(pool.acquire({ signal: AbortSignal.timeout(timeoutMs) }));
    let timer: NodeJS.Timeout | undefined;
    let result: Awaited<ReturnType<typeof runStatement>>;
    try {
      result = await Promise.race([
        runStatement(connection, { sql: CATALOG_SQL, params: [], readOnly: true, maxRows: MAX_CATALOG_ROWS, timeoutMs }),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs + 1_000))),
      ]);
    } catch (error) {
      // A statement PostgreSQL refused leaves the connection idle; any other failure leaves it unusable.
      if (error instanceof StatementFailed) void pool.release(connection, { reset: false });
      else pool.destroy(connection);
      throw error;
    } finally {
      clearTimeout(timer);
    }
    void pool.release(connection, { reset: false });
    if (result.truncated) throw new Error('the catalog is too large to read');
    return result.rows;
  }
}

/**
 * The upstream catalog snapshots of the databases this process serves (see catalog-query.ts for
 * what is read), one per database whatever its pools. A database is read on a pooled connection of the pool asking for it, as that
 * pool's role, at its first login or MCP call; then every `refreshMs` while a session holds it or
 * it was used within `idleMs`, and at once after DDL. A read that finds the catalog unchanged
 * keeps the snapshot (and every decision cached under its version). When the catalog cannot be
 * read, the last snapshot serves up to `maxAgeMs`; without one, statements are refused.
 */
export class CatalogSnapshots {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly timing: CatalogTiming = CATALOG_TIMING,
    private readonly onFailure: (databaseId: string, error: unknown) => void = () => undefined,
  ) {}

  private entryFor(handle: UpstreamHandle): Entry {
    // A sandbox branch has a catalog of its own: its schema changes must not move the source's.
    const key = handle.branchId === undefined ? handle.database.database_id : `${handle.database.database_id}:${handle.branchId}`;
    let entry = this.entries.get(key);
    if (!entry) {
      entry = new Entry(handle, this.timing, (error) => this.onFailure(key, error), (idle) => {
        clearInterval(idle.timer);
        if (this.entries.get(key) === idle) this.entries.delete(key);
      });
      this.entries.set(key, entry);
    }
    // Reads go through the latest open pool: a change to the database (its host, say) or its role closes the older ones, and is read at once.
    if (!handle.pool.isClosed && entry.handle !== handle) {
      const changed = handle.database.revision !== entry.handle.database.revision;
      entry.handle = handle;
      if (changed) void entry.read(true);
    }
    return entry;
  }

  /** A wire session's hold on its database's snapshot, read first when there is none or it is due. */
  async lease(handle: UpstreamHandle): Promise<CatalogLease> {
    const entry = this.entryFor(handle);
    entry.leases += 1;
    if (entry.stale()) await entry.read();
    let held = true;
    return {
      current: () => entry.current(),
      changed: () => entry.changed(),
      changing: () => entry.changing,
      fresh: () => entry.fresh(),
      moved: (next) => void this.entryFor(next),
      release: () => {
        if (held) entry.leases -= 1;
        held = false;
      },
    };
  }

  /**
   * The snapshot for one MCP call: read first when there is none or it is due, or `fresh` (its
   * statement names a relation the snapshot lacks); after the end of a read DDL started.
   */
  async current(handle: UpstreamHandle, fresh = false): Promise<UpstreamCatalog | CatalogUnavailable> {
    const entry = this.entryFor(handle);
    await entry.changing;
    if (fresh) await entry.fresh();
    if (!entry.stale()) return entry.current();
    await entry.read();
    return entry.current(true);
  }

  /** DDL ran on the database: read its catalog again at once. */
  changed(handle: UpstreamHandle): void {
    this.entryFor(handle).changed();
  }

  close(): void {
    for (const entry of this.entries.values()) clearInterval(entry.timer);
    this.entries.clear();
  }
}

/** The refusal of every statement while no catalog snapshot may be used (fail closed). */
export function catalogRefusal(sql: string, catalog: CatalogUnavailable): Extract<StatementDecision, { action: 'refuse' }> {
  const { upstream } = catalog;
  return {
    action: 'refuse',
    event: 'blocked',
    statementKind: statementKind(sql),
    rule: upstream ? upstreamRule(upstream) : 'catalog.unavailable',
    sqlstate: upstream?.sqlstate ?? CATALOG_UNAVAILABLE,
    reason: upstream?.message ?? `the gateway cannot read the upstream database’s catalog, which it needs to decide statements safely: ${catalog.unavailable} (rule catalog.unavailable); retry shortly`,
    tablesRead: [],
    tablesWritten: [],
    tablesBlocked: [],
    progress: [],
  };
}

/** The policy's decision on `sql`, made on the database's catalog snapshot; refused when there is none to use. */
export function decideWithCatalog<C>(sql: string, context: Omit<StatementContext<C>, 'catalog'>, catalog: UpstreamCatalog | CatalogUnavailable): StatementDecision {
  if (isUnavailable(catalog)) return catalogRefusal(sql, catalog);
  // Field by field: on Node 20 a spread costs microseconds, and this runs for every statement.
  const { credential, policy, protocol, honeytokens, hashKey, sessionValues, sandboxed } = context;
  return decideStatement(sql, { credential, policy, protocol, honeytokens, catalog, hashKey, sessionValues, sandboxed });
}
