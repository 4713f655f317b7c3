import type { AuditEventKind, AuditSource, Placement } from '../src/events/audit.js';
import { auditCount } from './audit-count.js';
import type { Decision } from './decisions.js';
import type { CacheOutcome } from './cache/caches.js';
import { statementIdentity } from './policy/identity.js';
import type { Trip } from './policy/rules.js';

/** The reason of a statement that went upstream and failed there, before the policy's own reason. */
export const FAILED_UPSTREAM = 'the statement ran and failed upstream.';
/** The reason of a statement that went upstream but whose end was never seen (the client left, the connection broke): it may have run. */
export const END_NOT_SEEN = "the connection closed before the statement's end was seen; it may have run.";

/** What a path (the wire or MCP) knows about one decision; the record's shape is the same for both. */
export interface DecisionFacts {
  readonly event: AuditEventKind;
  readonly projectId: string;
  readonly credentialId: string | null;
  readonly sessionId: string;
  readonly source: AuditSource;
  readonly region: string;
  readonly clientIp: string;
  /** When it started, ISO 8601. */
  readonly ts: string;
  readonly sql: string;
  readonly kind: string;
  readonly rule: string;
  readonly reason: string;
  /** Whether the statement ran (upstream, or from the result cache); a refusal did not, and its cache status is `none`. */
  readonly ran: boolean;
  /** What the result cache made of a statement that ran; `bypass` when unset. */
  readonly cache?: CacheOutcome;
  readonly rows: number;
  readonly bytes: number;
  readonly latencyUs: number | null;
  readonly tablesRead?: readonly string[];
  readonly tablesWritten?: readonly string[];
  readonly tablesBlocked?: readonly string[];
  /** The approval request the entry concerns (approval_requested, approved, rejected, approval_expired, and the outcome of an approved statement). */
  readonly approvalId?: string;
  /** Where a statement that went upstream ran, when not on this data plane's primary. */
  readonly upstream?: RanUpstream;
}

/** Where a statement that went upstream ran: this data plane's primary unless it names a replica, or the region whose data plane it was relayed to (and that one's replica, when it names one). */
export interface RanUpstream {
  readonly replicaId?: string | undefined;
  readonly relayedTo?: string | undefined;
}

const NOT_RUN: Placement = { ran_on: null, replica_id: null, upstream_region: null };
const FROM_CACHE: Placement = { ran_on: 'cache', replica_id: null, upstream_region: null };

/**
 * Where a decision's statement ran (StatementDecided v2): nowhere when it did not run, the cache
 * when the cache answered it, else the upstream connection that ran it and that connection's
 * region (`region`, the proxy's own, unless relayed).
 */
export function placementOf(ran: boolean, cache: CacheOutcome | undefined, region: string, upstream: RanUpstream | undefined): Placement {
  if (!ran) return NOT_RUN;
  if (cache === 'hit' || cache === 'stale') return FROM_CACHE;
  // A relayed read the peer ran on one of its replicas is that replica's, in the peer's region.
  if (upstream?.replicaId !== undefined) return { ran_on: 'replica', replica_id: upstream.replicaId, upstream_region: upstream.relayedTo ?? region };
  if (upstream?.relayedTo !== undefined) return { ran_on: 'relay', replica_id: null, upstream_region: upstream.relayedTo };
  return { ran_on: 'primary', replica_id: null, upstream_region: region };
}

/** The StatementDecided record of a decision, less what the publisher stamps. */
export function decisionRecord(facts: DecisionFacts): Decision {
  return {
    event: facts.event,
    project_id: facts.projectId,
    credential_id: facts.credentialId,
    session_id: facts.sessionId,
    source: facts.source,
    region: facts.region,
    client_ip: facts.clientIp,
    ts: facts.ts,
    sql: facts.sql,
    ...statementIdentity(facts.sql),
    statement_kind: facts.kind,
    decision_rule: facts.rule,
    reason: facts.reason,
    cache_status: facts.ran ? (facts.cache ?? 'bypass') : 'none',
    rows_returned: String(auditCount(facts.rows)),
    bytes_out: String(auditCount(facts.bytes)),
    latency_us: facts.latencyUs,
    tables_read: [...(facts.tablesRead ?? [])],
    tables_written: [...(facts.tablesWritten ?? [])],
    tables_blocked: [...(facts.tablesBlocked ?? [])],
    parsed: facts.kind !== '',
    approval_id: facts.approvalId ?? null,
    ...placementOf(facts.ran, facts.cache, facts.region, facts.upstream),
  };
}

/**
 * What the audit trail records of a refusal: for a tripped canary the truth (`canary_tripped`, its
 * `honeytoken.*` rule and the operator's reason), which the agent was never told; else the refusal
 * as the agent got it.
 */
export function recordedRefusal<Event extends AuditEventKind>(refusal: { readonly event: Event; readonly rule: string; readonly reason: string; readonly trip?: Trip }): { event: Event | 'canary_tripped'; rule: string; reason: string } {
  const { trip } = refusal;
  return trip ? { event: 'canary_tripped', rule: trip.rule, reason: trip.reason } : { event: refusal.event, rule: refusal.rule, reason: refusal.reason };
}
