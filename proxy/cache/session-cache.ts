import { encodeReadyForQuery, type ScannedMessage, type TransactionStatus } from '../protocol/backend.js';
import type { Bind } from '../protocol/frontend.js';
import type { StatementDecision } from '../policy/hook.js';
import { filtersUseSessionValues, type SessionValues } from '../policy/row-filters.js';
import { uncacheable, type CacheSituation } from './cacheable.js';
import type { ResultCaches } from './caches.js';
import { cacheKey, type KeyParts } from './key.js';
import type { ShapeRule } from './rules.js';
import type { CachedResult, EntryTiming, ResultStore } from './store.js';

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

/** What a lookup needs of the session beyond the statement. */
export interface CacheLookup extends CacheSituation {
  readonly sql: string;
  readonly decision: Allowed;
  readonly databaseId: string;
  /** upstreamOf the database row the session's connections were opened on. */
  readonly upstream: string;
  readonly policy: { readonly policy_id: string; readonly revision: number; readonly row_filters?: Readonly<Record<string, string>> };
  readonly catalogVersion: string;
  readonly sessionValues: SessionValues | undefined;
  readonly protocol: KeyParts['protocol'];
  /** Extended protocol: what the Parse and Bind said. */
  readonly wire?: Pick<KeyParts, 'paramTypes' | 'paramFormats' | 'params' | 'resultFormats' | 'maxRows'>;
  /** The statement shape's cache rule (rules.ts): kept out of the cache, or its entry's own ttl and swr. */
  readonly rule?: ShapeRule;
}

/** What to do with a statement: answer it from `result`, run it and capture its replies, or run it past the cache. */
export type CachePlan =
  | { readonly outcome: 'hit' | 'stale'; readonly result: CachedResult }
  | { readonly outcome: 'miss'; /** Undefined when the store does not admit the key (ResultStore.admits). */ readonly capture: Capture | undefined }
  /** `cold`: a read of a cold shape not drawn for a lookup (cold-shapes.ts), which changes nothing a later read of its batch sees. */
  | { readonly outcome: 'bypass'; readonly cold?: true };

const BYPASS: CachePlan = { outcome: 'bypass' };
const COLD: CachePlan = { outcome: 'bypass', cold: true };
const UNCAPTURED: CachePlan = { outcome: 'miss', capture: undefined };

/**
 * The tables a statement the policy allowed may change, for invalidation: null for none, undefined
 * for every table (DDL, a write the analysis names no table of, or one whose reach a trigger, rule
 * or view leaves unknown); else what it writes, with their partition trees and the tables whose
 * foreign keys cascade from them (the decision's writesReach).
 */
export function writtenTables(decision: Allowed): readonly string[] | undefined | null {
  if (decision.writes.ddl) return undefined;
  if (decision.tablesWritten.length > 0) return decision.writesReach === 'unbounded' ? undefined : decision.writesReach;
  return decision.writes.rows === 'none' ? null : undefined;
}

/**
 * The replies of one statement run on a miss, each message whole as the pipeline taps it: stored
 * once the statement ended well (with no error, not suspended, not over the byte bound) outside a
 * transaction. The session may have sent a BEGIN the gateway has not seen answered yet (a client
 * pipelining its queries): a result read inside a transaction may hold its uncommitted writes, so
 * it is kept only when the ReadyForQuery that ends it says the session is idle: on the simple
 * protocol its own, on the extended protocol its batch's Sync's (`finished` defers it till then).
 */
export class Capture {
  /** Views of the tapped chunks, copied into one buffer if the result is kept. */
  private readonly replies: Buffer[] = [];
  private bytes = 0;
  private rows = 0;
  private spoiled = false;
  private endStatus: TransactionStatus | undefined;

  constructor(
    private readonly store: ResultStore,
    private readonly key: string,
    private readonly tables: readonly string[],
    private readonly generation: number,
    private readonly maxBytes: number,
    private readonly finished: (capture: Capture) => void,
    private readonly timing?: EntryTiming,
  ) {}

  tap(message: ScannedMessage, bytes: Buffer): void {
    if (message.kind === 'ReadyForQuery') return void (this.endStatus = message.status);
    if (this.spoiled) return;
    // An error, or an Execute's PortalSuspended (the client fetches in parts): not a whole result.
    if (message.kind === 'ErrorResponse' || message.type === 's') return void (this.spoiled = true);
    this.bytes += bytes.length;
    if (this.bytes > this.maxBytes) return void (this.spoiled = true);
    if (message.kind === 'Run' && message.type === 'D') this.rows += message.count;
    this.replies.push(bytes);
  }

  settled(ok: boolean): void {
    if (!ok || this.spoiled || this.replies.length === 0) return this.store.abandon(this.key);
    if (this.endStatus === undefined) return this.finished(this);
    this.keep(this.endStatus);
  }

  /** Stores the result when the session was idle at its end (`status` I); else hands the refresh on. */
  keep(status: TransactionStatus): void {
    if (status !== 'I') return this.store.abandon(this.key);
    this.store.store(this.key, { reply: Buffer.concat(this.replies, this.bytes), rows: this.rows, tables: this.tables }, this.generation, this.timing);
  }
}

type WireFacts = NonNullable<CacheLookup['wire']>;

/** A session's bound portals beyond this many are forgotten (their Executes then bypass the cache). */
const MAX_PORTALS = 1_000;

/** The parameter types of a Parse message (type, length, name, text, count, types). */
export function paramTypesOf(parse: Buffer): number[] {
  const nameEnd = parse.indexOf(0, 5);
  const textEnd = parse.indexOf(0, nameEnd + 1);
  const count = parse.readUInt16BE(textEnd + 1);
  return Array.from({ length: count }, (_, index) => parse.readUInt32BE(textEnd + 3 + index * 4));
}

/** Each cached result's replies with the ReadyForQuery of an idle session, made at its first simple-protocol hit. */
const idleReplies = new WeakMap<CachedResult, Buffer>();

/** The parameter types of each Parse a statement is bound under: a statement is bound again and again under one Parse. */
const paramTypesByParse = new WeakMap<Buffer, readonly number[]>();

/** What the client gets for a cached result: its replies, and on the simple protocol the ReadyForQuery of `status`. */
export function cachedReply(result: CachedResult, status: TransactionStatus | undefined): Buffer {
  if (status === undefined) return result.reply;
  if (status !== 'I') return Buffer.concat([result.reply, encodeReadyForQuery(status)]);
  let reply = idleReplies.get(result);
  if (!reply) idleReplies.set(result, (reply = Buffer.concat([result.reply, encodeReadyForQuery('I')])));
  return reply;
}

/** A single result larger than this is not kept. */
export const MAX_ENTRY_BYTES = 1024 * 1024;

/** One session's use of the result caches: its lookups, and the writes it sends (seen as they are decided and again as their transaction ends). */
export class SessionCache {
  /** Writes of the open transaction: their entries go again once it ends, so that a read between the write and its commit is not kept. */
  private pending: { readonly databaseId: string; readonly tables: readonly string[] | undefined; readonly writer: string }[] = [];
  /** Extended-protocol results that ended well, kept or not at their batch's ReadyForQuery. */
  private readonly finished: Capture[] = [];
  /** What each portal was bound with, for its Executes' keys. */
  private readonly portals = new Map<string, WireFacts>();

  constructor(
    private readonly caches: ResultCaches | undefined,
    private readonly maxEntryBytes = MAX_ENTRY_BYTES,
  ) {}

  /** A statement the policy allowed is about to run for credential `writer`: what it may write is invalidated now. */
  decided(databaseId: string, decision: Allowed, writer: string): void {
    const tables = writtenTables(decision);
    if (tables === null || !this.caches) return;
    this.caches.invalidate(databaseId, tables, writer);
    this.pending.push({ databaseId, tables, writer });
  }

  /** A Bind of a statement whose Parse was `parse`: its portal's Executes are keyed by what it carries. */
  bound(bind: Bind, parse: Buffer): void {
    if (!this.caches) return;
    if (this.portals.size >= MAX_PORTALS) this.portals.clear();
    let paramTypes = paramTypesByParse.get(parse);
    if (!paramTypes) paramTypesByParse.set(parse, (paramTypes = paramTypesOf(parse)));
    this.portals.set(bind.portal, { paramTypes, paramFormats: bind.paramFormats, params: bind.params, resultFormats: bind.resultFormats });
  }

  /** What the portal was bound with; undefined when unknown (its Execute bypasses the cache). */
  boundOf(portal: string): WireFacts | undefined {
    return this.portals.get(portal);
  }

  /** Whether a ReadyForQuery that ends the transaction now publishes invalidations whose flush the client's answer waits for. */
  get invalidatesAtReady(): boolean {
    return this.pending.length > 0 && this.caches?.sharing === true;
  }

  /**
   * A ReadyForQuery went by: outside a transaction, the writes of the one that ended are invalidated
   * again. Then, when invalidations leave the process, the promise that resolves once they have (the
   * client's answer waits for it); undefined otherwise.
   */
  ready(status: TransactionStatus): Promise<void> | undefined {
    for (const capture of this.finished.splice(0)) capture.keep(status);
    if (status !== 'I' || this.pending.length === 0) return undefined;
    for (const { databaseId, tables, writer } of this.pending.splice(0)) this.caches?.invalidate(databaseId, tables, writer);
    return this.caches?.sharing ? this.caches.flushed() : undefined;
  }

  /**
   * Looks a statement up: the outcome is counted in the metrics; a miss comes with the capture that
   * stores its result. On the extended protocol, a statement of a cold shape (cold-shapes.ts) is not
   * looked up unless drawn; a shape with a rule of its own is always looked up, as its rule asks.
   * The simple protocol's shapes are not tallied: a text with literals gets a decision object of its
   * own each time (the policy's numeric shapes), which no tally would outlive.
   */
  plan(lookup: CacheLookup): CachePlan {
    const caches = this.caches;
    if (!caches) return BYPASS;
    const store = caches.storeOf(lookup.databaseId);
    let plan = BYPASS;
    if (store && lookup.rule?.bypass !== true && !uncacheable(lookup.sql, lookup.decision, lookup)) {
      const { coldShapes } = store;
      if (lookup.rule !== undefined || lookup.protocol !== 'extended') plan = this.lookupIn(store, lookup);
      else if (coldShapes.skips(lookup.decision)) {
        caches.metrics.skipped();
        plan = COLD;
      } else {
        plan = this.lookupIn(store, lookup);
        coldShapes.looked(lookup.decision, plan.outcome !== 'miss');
      }
    }
    caches.metrics.lookup(plan.outcome);
    return plan;
  }

  private lookupIn(store: ResultStore, lookup: CacheLookup): CachePlan {
    const key = lookupKey(lookup);
    const found = store.lookup(key);
    if (found.outcome !== 'miss') return found;
    if (!store.admits(key)) return UNCAPTURED;
    const timing = lookup.rule?.bypass === false ? lookup.rule.timing : undefined;
    // uncacheable() let no unbounded reach through.
    const tables = lookup.decision.readsReach as readonly string[];
    return { outcome: 'miss', capture: new Capture(store, key, tables, store.generation, this.maxEntryBytes, (capture) => this.finished.push(capture), timing) };
  }
}

/** Whether a policy's row filters name session values, by its filters. */
const filtersNameSession = new WeakMap<Readonly<Record<string, string>>, boolean>();

function namesSession(filters: Readonly<Record<string, string>> | undefined): boolean {
  if (filters === undefined) return false;
  let names = filtersNameSession.get(filters);
  if (names === undefined) filtersNameSession.set(filters, (names = filtersUseSessionValues(filters)));
  return names;
}

/** The cache key of a lookup (key.ts): the session values count only when the policy's row filters name them. */
export function lookupKey(lookup: Omit<CacheLookup, keyof CacheSituation | 'sql' | 'rule'>): string {
  const { policy } = lookup;
  const context = {
    databaseId: lookup.databaseId,
    upstream: lookup.upstream,
    policyId: policy.policy_id,
    policyRevision: policy.revision,
    catalogVersion: lookup.catalogVersion,
    protocol: lookup.protocol,
    sessionValues: namesSession(policy.row_filters) ? lookup.sessionValues : undefined,
  };
  return cacheKey(context, lookup.decision, lookup.wire);
}
