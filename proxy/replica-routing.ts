import type { ReplicaRow } from '../projections/databases.js';
import type { ProxyMetrics } from './metrics.js';
import type { StatementDecision } from './policy/hook.js';
import type { RecentWrites } from './recent-writes.js';
import type { UpstreamHold } from './session-upstream.js';
import type { UpstreamHandle } from './upstreams.js';

/** The comment that sends a statement to the primary whatever it is: `/* pgward:primary *\/`, anywhere in the text. */
export const PRIMARY_HINT = /\/\*\s*pgward:primary\s*\*\//i;

/** How long after a statement that may write (or change state) a session's reads stay on the primary, by default. */
export const DEFAULT_READ_YOUR_WRITES_MS = 5_000;

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

/** What every session's read routing shares: the replicas' rotation, the credentials' read-your-writes windows, the metrics. */
export interface ReadRouting {
  /** Whether a database routes reads (auto_read_routing) now, here or, relayed, at its region's peer. */
  readonly routes: (databaseId: string) => boolean;
  /** The next healthy replica of a database, in turn; undefined when none is. */
  readonly next: (databaseId: string) => ReplicaRow | undefined;
  readonly writes: RecentWrites;
  readonly metrics: Pick<ProxyMetrics, 'routed'>;
}

/** Why a statement of an auto_read_routing database goes to the primary, or 'replica' when it may go to one. */
export type Placement = 'replica' | 'not_a_read' | 'hint' | 'read_your_writes';

/**
 * Where a statement the policy allowed may run: on a replica when it only reads, carries no
 * primary hint, and its credential wrote nothing within the read-your-writes window. (Whether a
 * replica is healthy, and whether the session is outside a transaction, is the caller's.)
 */
export function placementOf(sql: string, decision: Pick<Allowed, 'readsOnly'>, msSinceWrite: number, readYourWritesMs: number): Placement {
  if (!decision.readsOnly) return 'not_a_read';
  if (PRIMARY_HINT.test(sql)) return 'hint';
  if (msSinceWrite < readYourWritesMs) return 'read_your_writes';
  return 'replica';
}

/**
 * A session's read routing. The session tells it each statement the policy allowed (`decided`)
 * and, before it takes up an upstream connection, lets it point its hold at the pool that
 * connection should come from (`place`): a healthy replica's for a read outside a transaction,
 * the primary's for everything else. A connection the session holds (in a transaction, a batch,
 * or pinned by session state) is never moved; a parked one is handed back to its pool first.
 */
export class SessionReads {
  private pending: { readonly sql: string; readonly decision: Allowed } | undefined;
  /** A statement that may write was sent since the last ReadyForQuery: the window counts from its end. */
  private writing = false;
  private primary: UpstreamHandle | undefined;

  constructor(
    private readonly routing: ReadRouting | undefined,
    /** The session's credential once logged in: its window is shared by all its sessions. */
    private readonly credentialOf: () => string | undefined,
  ) {}

  decided(sql: string, decision: Allowed): void {
    if (!this.routing) return;
    this.pending = { sql, decision };
    this.ran(decision);
  }

  /**
   * A statement runs: decided now, or an Execute of one decided at an earlier Parse (a prepared
   * write run again opens the window again). One that may write holds the credential's reads on
   * the primary from now, in every session.
   */
  ran(decision: Allowed): void {
    if (!this.routing || decision.readsOnly) return;
    this.wrote();
    this.writing = true;
  }

  /** A ReadyForQuery: a write sent since has ended (committed, when outside a transaction), and the window counts from here. */
  ready(): void {
    if (!this.writing) return;
    this.wrote();
    this.writing = false;
  }

  /** Since the credential's last write; 0 while one of this session's is still running (a read pipelined after it stays on the primary). */
  private msSinceWrite(): number {
    if (this.writing) return 0;
    const credentialId = this.credentialOf();
    return credentialId === undefined ? Number.POSITIVE_INFINITY : this.routing!.writes.msSince(credentialId);
  }

  private wrote(): void {
    const credentialId = this.credentialOf();
    if (credentialId !== undefined) this.routing!.writes.wrote(credentialId);
  }

  /** `forStatement`: the connection is taken up to run (or prepare) the statement last decided; otherwise (Bind, Describe, Sync, ...) it comes from the primary. */
  place(hold: UpstreamHold, forStatement: boolean): void {
    const pending = forStatement ? this.pending : undefined;
    this.pending = undefined;
    const wanted = this.choose(hold, pending);
    if (!wanted) return;
    if (pending) this.routing!.metrics.routed.inc({ target: wanted === this.primary ? 'primary' : 'replica' });
    if (wanted !== hold.handle) hold.moveTo(wanted);
  }

  /** The pool `statement` would take its connection from if it ran now, as `place` would choose it, without moving the hold or counting it. */
  poolFor(hold: UpstreamHold, statement: { readonly sql: string; readonly decision: Allowed }): UpstreamHandle | undefined {
    return this.choose(hold, statement) ?? hold.handle;
  }

  /** The pool read routing sends a message to; undefined when it leaves the hold where it is (no routing, or a connection held). */
  private choose(hold: UpstreamHold, statement: { readonly sql: string; readonly decision: Allowed } | undefined): UpstreamHandle | undefined {
    const current = hold.handle;
    if (!this.routing || !current) return undefined;
    if (current.replicaId === undefined && !current.readLink) this.primary = current;
    if (hold.server && !hold.parked) return undefined;
    const primary = this.primary!;
    if (!this.routing.routes(primary.database.database_id)) return undefined;
    const placement = statement ? placementOf(statement.sql, statement.decision, this.msSinceWrite(), this.routing.writes.windowMs) : 'not_a_read';
    return poolOf(this.routing, primary, placement);
  }
}

/**
 * The pool a statement of a routing database takes its connection from, as placed: the next
 * healthy replica's for a read, the primary's for everything else and while no replica is healthy.
 * The wire's sessions and the hosted MCP both choose with it.
 */
export function poolOf(routing: Pick<ReadRouting, 'next'>, primary: UpstreamHandle, placement: Placement): UpstreamHandle {
  // A closed primary pool (the database changed) is renewed by its user before a replica's is derived from it.
  if (placement !== 'replica' || primary.pool.isClosed) return primary;
  // A relayed database's replicas are probed and chosen by its region's peer, which takes one for a read link.
  if (primary.relayedTo !== undefined) return primary.readLinks?.() ?? primary;
  const replica = routing.next(primary.database.database_id);
  return replica ? primary.onReplica(replica) : primary;
}
