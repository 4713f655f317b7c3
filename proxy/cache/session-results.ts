import type { Statement, Tap } from '../pipeline.js';
import type { Protocol, SessionHost } from '../session-host.js';
import type { Allowed } from '../session-audit.js';
import { catalogVersionOf } from './cacheable.js';
import { upstreamOf } from './key.js';
import { shapeRuleOf } from './rules.js';
import { cachedReply, SessionCache, type CacheLookup, type CachePlan } from './session-cache.js';
import type { CachedResult } from './store.js';

/** What a miss adds to its statement: the capture that stores its result when it ends, and the tap that feeds it. */
export interface MissHooks {
  readonly settled: (ok: boolean) => void;
  readonly tap: Tap;
}

/**
 * The result cache as a session's statement modules use it (session-simple.ts,
 * session-extended.ts, statement-gate.ts): a statement's plan from what the session knows, a hit
 * answered in order and audited, a miss's capture hooks.
 */
export class SessionResults {
  readonly cache: SessionCache;

  constructor(private readonly host: SessionHost) {
    this.cache = new SessionCache(host.context.resultCaches);
  }

  /** The id of the session's database, for invalidation. */
  get databaseId(): string {
    return this.host.upstream.handle!.database.database_id;
  }

  /**
   * The cache's plan for a statement the policy allowed; the statement records its outcome.
   * `batchChanged`: an earlier Execute of its extended-protocol batch (one implicit transaction) may
   * have changed what it reads, as an open transaction would.
   */
  plan(sql: string, decision: Allowed['decision'], protocol: Protocol, statement: Statement, wire?: CacheLookup['wire'], batchChanged = false): CachePlan {
    const { host } = this;
    const policy = host.context.policies.get(host.credential!.policy_profile_id)!;
    const databaseId = this.databaseId;
    // A replica's result may lag a write the cache saw: databases that route reads cache nothing; nor
    // do sandboxed sessions, whose branch (docs/branches.md) is not the database the key names.
    const elsewhere = host.upstream.handle!.branchId !== undefined || host.context.readRouting?.routes(databaseId) === true;
    const rule = shapeRuleOf(host.context.cacheControls?.get(databaseId), sql);
    // Field by field, as the other per-statement lookups: on Node 20 a spread costs about a microsecond.
    const plan = this.cache.plan({
      sql,
      decision,
      databaseId,
      upstream: upstreamOf(host.upstream.handle!.database),
      policy,
      catalogVersion: catalogVersionOf(host.catalog!.current()),
      sessionValues: host.sessionValues,
      protocol,
      inTransaction: host.status !== 'I' || batchChanged,
      pinned: host.pinned || elsewhere,
      wire,
      rule,
    });
    statement.cache = plan.outcome;
    return plan;
  }

  /** Answers a statement from the cache, in order, and audits it as run with its cache outcome. */
  answer(statement: Statement, plan: Extract<CachePlan, { result: unknown }>, protocol: Protocol): void {
    const { host } = this;
    const { result } = plan;
    statement.rows = result.rows;
    statement.bytes = result.reply.length;
    host.context.budgets.admit(host.credential!);
    if (protocol === 'extended') host.unsynced = true;
    host.pipeline.expect({ kind: 'synthetic', reply: protocol === 'simple' ? simpleReply(result, host) : result.reply });
    host.audit.completed(host.credential!, statement, undefined);
  }
}

/**
 * A simple-protocol hit's reply, made when it goes out: its ReadyForQuery carries the session's
 * status then (a BEGIN pipelined before it has been answered by then).
 */
function simpleReply(result: CachedResult, host: SessionHost): () => Buffer {
  return () => cachedReply(result, host.status);
}

/** A miss's hooks, bound to its capture; undefined for any other plan. */
export function missHooks(plan: CachePlan | undefined): MissHooks | undefined {
  const capture = plan?.outcome === 'miss' ? plan.capture : undefined;
  if (!capture) return undefined;
  return { settled: capture.settled.bind(capture), tap: capture.tap.bind(capture) };
}
