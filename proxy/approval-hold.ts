/**
 * A statement held for a human decision on the wire (spec §2.8): recorded as an ApprovalRequested
 * event, announced to the client with a NOTICE, then waited for with no upstream connection held,
 * until a reviewer decides, it expires, or the wait is ended. The session runs it once approved.
 */
import type { z } from 'zod';
import { approval, approvalStream, type ApprovalCommand } from '../commands/approvals/approval.js';
import { bindingOf, type BindingFacts } from '../commands/approvals/binding.js';
import { DomainError } from '../commands/domain-error.js';
import { handle } from '../commands/handle.js';
import type { ApprovalRow } from '../projections/approvals.js';
import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import type { ApprovalRequested, ApprovalSource } from '../src/events/approvals.js';
import { newId } from '../src/ids.js';
import type { EventStore } from '../src/store/port.js';
import type { Estimate } from './approval-estimate.js';
import { heldThrough, holdOf, type HoldDecision } from './policy/approval-rules.js';
import type { StatementDecision } from './policy/hook.js';
import { statementIdentity } from './policy/identity.js';
import type { UpstreamCatalog } from './policy/upstream-catalog.js';
import { isUnavailable, type CatalogUnavailable } from './upstream/catalog-snapshot.js';
import type { UpstreamHandle } from './upstreams.js';
import type { LiveView } from './views/live-view.js';

type Allowed = Extract<StatementDecision, { action: 'allow' }>;
export type Hold = Extract<HoldDecision, { held: true }>;

/** What holding needs: the event store (requests and their ends are appended there), the live view of requests, and the estimate of a write's rows. */
export interface ApprovalServices {
  readonly store: Pick<EventStore, 'readStream' | 'append'>;
  readonly approvals: LiveView<ApprovalRow>;
  /** The rows `sql` (as it would run) would affect, on a connection of `pool` (where the statement would run) released at once; null when unknown. */
  estimate?(pool: UpstreamHandle | undefined, owner: string, sql: string, params: readonly (string | null)[]): Promise<Estimate | null>;
}

/**
 * The hold the policy's approval rules put on an allowed statement before any estimate: a row
 * threshold or an auto-approve ceiling holds every counted write here, and `withEstimate` decides
 * it again once its rows are estimated.
 */
export function holdFor(policy: PolicyRow | undefined, decision: Allowed, catalog: UpstreamCatalog | CatalogUnavailable | undefined): Hold | undefined {
  if (!policy?.approval) return undefined;
  const writesThrough = heldThrough(policy.approval, decision.tablesWritten, catalog && !isUnavailable(catalog) ? catalog : undefined);
  const hold = holdOf(policy.approval, { kinds: decision.kinds, tablesWritten: decision.tablesWritten, writes: decision.writes, estimatedRows: null, writesThrough });
  return hold.held ? hold : undefined;
}

/** A held statement decided again with its estimate: still held (with the estimate), or to run now. */
export type Estimated = { readonly hold: Hold; readonly estimate: Estimate | null } | { readonly run: Allowed };

/**
 * Estimates a held counted write (every one, so its reviewer sees the rows and its approval is bound
 * to them) and decides it again: under the row threshold it runs; within an auto-approve ceiling it
 * runs bound to the ceiling (rolled back past it), audited as auto-approved. DDL, writable CTEs and
 * several statements are not estimated: their hold stands.
 */
export async function withEstimate(policy: PolicyRow, decision: Allowed, hold: Hold, estimate: () => Promise<Estimate | null>): Promise<Estimated> {
  if (decision.writes.rows !== 'counted') return { hold, estimate: null };
  const made = await estimate();
  const again = holdOf(policy.approval, { kinds: decision.kinds, tablesWritten: decision.tablesWritten, writes: decision.writes, estimatedRows: made?.rows ?? null, writesThrough: hold.through ?? [] });
  if (again.held) return { hold: again, estimate: made };
  if (!again.autoApproved) return { run: decision };
  const { cap, tables } = again.autoApproved;
  const how = made?.method === 'trial' ? 'a trial run rolled back' : 'the planner';
  const why = `auto-approved: ${how} estimated ${made?.rows ?? 0} rows, within the approval.auto_approve max_rows ${cap} of ${tables.join(', ')}`;
  return {
    run: {
      ...decision,
      rule: 'approval.auto_approved',
      reason: `${why} (rule approval.auto_approved). ${decision.reason}`.trim(),
      writes: { ...decision.writes, bound: { min: 0, max: cap, rule: 'approval.auto_approve_exceeded', why: `it was auto-approved under the approval.auto_approve max_rows ${cap} of ${tables.join(', ')}` } },
    },
  };
}

/**
 * How far a planner's estimate binds an approved write: it may affect up to this many times the rows
 * the planner expected (at least one), and fewer. EXPLAIN's rows are a guess, often off by a small
 * factor, so binding them exactly would fail writes whose reviewer approved what they do; an order of
 * magnitude more is no longer the write its reviewer saw.
 */
export const PLAN_BOUND_FACTOR = 10;

/**
 * The decision an approved statement runs under, bound to the estimate its reviewer saw: a trial
 * count within the rule's row_tolerance_percent, a planner's estimate up to PLAN_BOUND_FACTOR times
 * it (rolled back outside either). None binds a write whose RETURNING rows the policy's max_rows must
 * cut (a bound write's rows are not cut).
 */
export function boundToEstimate(decision: Allowed, row: Pick<ApprovalRow, 'estimated_rows' | 'estimate_method'>, policy: PolicyRow): Allowed {
  const writes = decision.writes;
  if (writes.rows !== 'counted' || !row.estimate_method || row.estimated_rows === null || (writes.returning && policy.max_rows)) return decision;
  const seen = Number(row.estimated_rows);
  if (row.estimate_method === 'plan') {
    const most = Math.max(seen, 1) * PLAN_BOUND_FACTOR;
    return {
      ...decision,
      writes: { ...writes, bound: { min: 0, max: most, rule: 'approval.count_drift', why: `its reviewer approved it on the planner’s estimate of ${seen} rows (EXPLAIN; a trial run took too long), and an approval on a planner’s estimate lets it affect at most ${PLAN_BOUND_FACTOR} times that` } },
    };
  }
  const tolerance = policy.approval.row_tolerance_percent ?? 0;
  const slack = Math.floor((seen * tolerance) / 100);
  const within = tolerance === 0 ? 'exactly' : `within ${tolerance}% of`;
  return {
    ...decision,
    writes: { ...writes, bound: { min: Math.max(0, seen - slack), max: seen + slack, rule: 'approval.count_drift', why: `its reviewer approved it as affecting ${seen} rows (a trial run's count), and the policy's approval.row_tolerance_percent ${tolerance} lets it run only ${within} that` } },
  };
}

/** A held statement sent where the gateway cannot hold it (MCP's explain, a proxy without approval services): refused, saying where it can be held. */
export function holdUnavailable(hold: Hold, where: string): { readonly rule: 'approval.unavailable'; readonly sqlstate: '0A000'; readonly reason: string } {
  return {
    rule: 'approval.unavailable',
    sqlstate: '0A000',
    reason: `this statement needs a human's approval: ${hold.reason}; the gateway holds statements for approval on the Postgres wire (with or without parameters) and through MCP's query tool, not ${where}, so it did not run (rule approval.unavailable)`,
  };
}

export const noticeOf = (approvalId: string): string => `statement held for approval (request ${approvalId}); waiting for a reviewer`;

/** The request a held statement becomes, bound to its exact text, its parameters, its credential and its policy's version. */
export function heldRequest(facts: {
  readonly approvalId?: string;
  readonly source: ApprovalSource;
  readonly credential: Pick<CredentialRow, 'credential_id' | 'project_id' | 'database_id'>;
  readonly policy: PolicyRow;
  readonly sql: string;
  readonly decision: Allowed;
  readonly hold: Hold;
  readonly params: readonly (string | null)[];
  readonly formats?: readonly number[];
  readonly estimate: Estimate | null;
  readonly sessionId: string;
  readonly region: string;
  readonly now: Date;
}): z.input<typeof ApprovalRequested.schema> {
  const { credential, policy, sql, decision, hold } = facts;
  return {
    approval_id: facts.approvalId ?? newId('apr_'),
    project_id: credential.project_id,
    database_id: credential.database_id,
    policy_profile_id: policy.policy_id,
    credential_id: credential.credential_id,
    session_id: facts.sessionId,
    region: facts.region,
    sql,
    normalized_sql: statementIdentity(sql).normalized_sql || sql,
    statement_kind: decision.statementKind || 'other',
    target_tables: [...decision.tablesWritten],
    estimated_rows: facts.estimate === null ? null : String(facts.estimate.rows),
    estimate_method: facts.estimate?.method ?? null,
    expires_at: new Date(facts.now.getTime() + policy.approval.expiry_seconds * 1000).toISOString(),
    source: facts.source,
    policy_version: policy.version,
    binding: bindingOf({ sql, params: facts.params, ...(facts.formats ? { formats: facts.formats } : {}), credentialId: credential.credential_id, policyId: policy.policy_id, policyVersion: policy.version }),
    hold_rule: hold.rule,
    hold_reason: hold.reason,
  };
}

/** Runs one command on a request's stream as `actor`; a refusal (decided meanwhile) is returned, not thrown. */
export async function onRequest(services: Pick<ApprovalServices, 'store'>, approvalId: string, command: ApprovalCommand, actor: string): Promise<DomainError | undefined> {
  try {
    await handle(services.store, approvalStream(approvalId), approval, command, { correlationId: `approval-${approvalId}`, actor });
    return undefined;
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
}

/**
 * Resolves with the request once it is no longer pending, or with undefined once `ended` aborts.
 * At its expires_at the waiter records the lapse itself (`expire` is refused before then, and
 * records expires_at as the time, whoever runs it); `expired` hears whether it did.
 */
export function awaitDecision(services: ApprovalServices, request: z.input<typeof ApprovalRequested.schema>, ended: AbortSignal, expired: (row: ApprovalRow) => void): Promise<ApprovalRow | undefined> {
  const approvalId = request.approval_id;
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (row: ApprovalRow | undefined): void => {
      stop();
      clearTimeout(timer);
      ended.removeEventListener('abort', aborted);
      resolve(row);
    };
    const aborted = (): void => finish(undefined);
    const stop = services.approvals.onChange((key, _before, after) => {
      if (key === approvalId && after && after.status !== 'pending') finish(after);
    });
    ended.addEventListener('abort', aborted);
    if (ended.aborted) {
      finish(undefined);
      return;
    }
    const lapse = async (): Promise<void> => {
      const refused = await onRequest(services, approvalId, { kind: 'expire' }, 'system:approval-expiry').catch(() => new DomainError('CONFLICT', 'could not record the expiry'));
      const row = services.approvals.get(approvalId) ?? (await services.approvals.getOrRead(approvalId, approvalStream(approvalId)));
      if (!refused && row) expired(row);
      // Not yet expired (clock skew), or the store refused: look again shortly.
      if (refused && row?.status === 'pending') timer = setTimeout(() => void lapse(), 1_000).unref();
      else if (row && row.status !== 'pending') finish(row);
    };
    timer = setTimeout(() => void lapse(), Math.max(0, Date.parse(request.expires_at) - Date.now()) + 50).unref();
    // Decided before the listener was attached (and perhaps forgotten by the view since: read from its stream).
    const known = services.approvals.get(approvalId);
    if (known && known.status !== 'pending') finish(known);
    else if (!known) {
      void services.approvals.getOrRead(approvalId, approvalStream(approvalId)).then(
        (row) => row && row.status !== 'pending' && finish(row),
        () => undefined,
      );
    }
  });
}

/** What the client is told when a held statement will not run. */
export function notRunError(row: ApprovalRow): { readonly sqlstate: string; readonly rule: string; readonly message: string } {
  switch (row.status) {
    case 'rejected':
      return {
        sqlstate: '42501',
        rule: 'approval.rejected',
        message: `statement rejected by a reviewer (request ${row.approval_id}, decided by ${row.decided_by ?? 'unknown'}): ${row.reason === '' ? 'no reason given' : row.reason} (rule approval.rejected); it did not run`,
      };
    case 'expired':
      return { sqlstate: '57014', rule: 'approval.expired', message: `approval request ${row.approval_id} expired undecided at ${new Date(row.expires_at).toISOString()} (rule approval.expired); the statement did not run` };
    default:
      return { sqlstate: '55000', rule: 'approval.failed', message: `approval request ${row.approval_id} ended without running: ${row.reason === '' ? row.status : row.reason} (rule approval.failed); the statement did not run` };
  }
}

/**
 * Why an approved request may not run in this session now, if it may not: it is bound to the
 * exact text, the credential, and the policy at the version it was held under.
 */
export function bindingBroken(row: ApprovalRow, credential: CredentialRow, policy: PolicyRow | undefined, sql: string, bound: Pick<BindingFacts, 'params' | 'formats'>): string | undefined {
  if (!policy || policy.status !== 'active') return 'the credential’s policy profile is gone';
  if (policy.policy_id !== row.policy_profile_id || policy.version !== row.policy_version) return `the policy profile changed since the statement was held (version ${row.policy_version}, now ${policy.version})`;
  if (credential.status !== 'active') return `the credential is ${credential.status}`;
  const binding = bindingOf({ sql, ...bound, credentialId: credential.credential_id, policyId: policy.policy_id, policyVersion: policy.version });
  return binding === row.binding ? undefined : 'the statement is not the one that was approved';
}

/**
 * Requests held by wire sessions of an earlier run of this proxy that never ended: those sessions are
 * gone, so each ends `failed`; none runs (a running one's end was never seen). Pending requests of
 * other proxies' live sessions, and MCP requests, are left alone.
 */
export function lostToRestart(rows: Iterable<ApprovalRow>, identity: { readonly proxyId: string; readonly bootEpoch: number }): { readonly approvalId: string; readonly message: string }[] {
  const lost: { approvalId: string; message: string }[] = [];
  const prefix = `${identity.proxyId}.`;
  for (const row of rows) {
    if (row.source !== 'wire' || (row.status !== 'pending' && row.status !== 'approved') || !row.session_id.startsWith(prefix)) continue;
    const epoch = /^(\d+)\.\d+$/.exec(row.session_id.slice(prefix.length))?.[1];
    if (epoch === undefined || Number(epoch) === identity.bootEpoch) continue;
    lost.push({
      approvalId: row.approval_id,
      message: row.started
        ? 'the proxy restarted while the approved statement ran; its end was not seen, and it will not run again'
        : 'the proxy restarted while the statement was held; the session that held it was lost, and the statement did not run',
    });
  }
  return lost;
}
