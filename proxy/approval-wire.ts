/**
 * The wire side of a held statement (approval-hold.ts), apart from the session: recorded, announced,
 * waited for with the upstream connection handed back, and once approved checked against what was
 * approved and taken for running, at most once. The session runs the statement it returns.
 */
import { approval, approvalStream, type ApprovalCommand } from '../commands/approvals/approval.js';
import { handle } from '../commands/handle.js';
import type { ApprovalRow } from '../projections/approvals.js';
import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import { approvalDecision, type ApprovalFacts } from './approval-audit.js';
import type { BoundParams } from './approval-extended.js';
import { awaitDecision, bindingBroken, boundToEstimate, heldRequest, holdUnavailable, noticeOf, notRunError, onRequest, type ApprovalServices, type Hold, withEstimate } from './approval-hold.js';
import type { Decision } from './decisions.js';
import type { Statement } from './pipeline.js';
import type { StatementDecision } from './policy/hook.js';
import { taggedRows } from './policy/write-guard.js';
import { encodeNoticeResponse } from './protocol/backend.js';
import type { StatementRefusal } from './session-audit.js';
import { statementOf } from './session-audit.js';
import type { UpstreamHandle } from './upstreams.js';
import type { LiveView } from './views/live-view.js';

type Allowed = Extract<StatementDecision, { action: 'allow' }>;

/** What holding needs of the session. */
export interface WireHold {
  readonly services: ApprovalServices | undefined;
  readonly credential: CredentialRow;
  readonly policies: LiveView<PolicyRow>;
  readonly sql: string;
  /** Its parameters as bound (approval-extended.ts); none for a simple query. */
  readonly bound?: BoundParams;
  readonly decision: Allowed;
  readonly hold: Hold;
  readonly sessionId: string;
  readonly region: string;
  readonly inTransaction: boolean;
  /** Aborted when the client cancels, or the session ends. */
  readonly wait: AbortSignal;
  publish(record: Decision): void;
  /** Resolves once the decision bus holds the record; rejects when it cannot take it. */
  publishStrict(record: Decision): Promise<void>;
  /** Sends the client a message in order (the NOTICE). */
  notice(bytes: Buffer): void;
  /** Hands the upstream connection back while the statement waits. */
  released(): void;
  /** The pool the statement would run on now (session-acquire.ts), where its estimate is made. */
  pool(): Promise<UpstreamHandle | undefined>;
  closed(): boolean;
  /** Refuses the statement: audited, answered with its SQLSTATE and reason. */
  refuse(refusal: StatementRefusal): void;
  /** Answers the client with an error, not audited: the decision it reports has its own audit row. */
  answer(sqlstate: string, message: string): void;
  /** Decides the statement again, as it is about to run; undefined when refused (answered and audited). */
  redecide(): Allowed | undefined;
}

const refusalOf = (facts: WireHold, rule: string, sqlstate: string, reason: string): StatementRefusal => ({
  event: 'blocked', rule, sqlstate, reason, kind: facts.decision.statementKind, tablesRead: facts.decision.tablesRead, tablesWritten: facts.decision.tablesWritten, tablesBlocked: [],
});

/** The statement to run once approved, its audit record naming the request; undefined when it will not run (the client was answered). */
export async function holdOnWire(facts: WireHold): Promise<{ decision: Allowed; statement: Statement } | undefined> {
  const { services, credential, hold } = facts;
  const policy = facts.policies.get(credential.policy_profile_id);
  if (!services || !policy) return void facts.refuse(refusalOf(facts, 'approval.unavailable', '0A000', holdUnavailable(hold, 'on this proxy').reason));
  if (facts.inTransaction) {
    return void facts.refuse(refusalOf(facts, 'approval.in_transaction', '25001', `this statement needs a human's approval: ${hold.reason}; statements are held for approval outside transaction blocks only, so it did not run (rule approval.in_transaction); end the transaction (COMMIT or ROLLBACK) and send it on its own`));
  }
  const params = facts.bound?.params ?? [];
  const formats = facts.bound?.formats;
  // The estimate runs on a connection of its own: the session's goes back first (a pool of one has no other).
  facts.released();
  const asText = facts.bound ? facts.bound.text : [];
  const estimate = services.estimate;
  const estimated = await withEstimate(policy, facts.decision, hold, async () => (asText && estimate ? estimate(await facts.pool().catch(() => undefined), credential.credential_id, facts.decision.sql, asText) : null));
  if (facts.closed()) return undefined;
  if ('run' in estimated) return { decision: estimated.run, statement: statementOf({ sql: facts.sql, decision: estimated.run }) };
  const request = heldRequest({ source: 'wire', credential, policy, sql: facts.sql, params, ...(formats ? { formats } : {}), decision: facts.decision, hold: estimated.hold, estimate: estimated.estimate, sessionId: facts.sessionId, region: facts.region, now: new Date() });
  const approvalId = request.approval_id;
  const audited: ApprovalFacts = { ...request, credential_id: request.credential_id ?? null, target_tables: [...(request.target_tables ?? [])] };
  const actor = `proxy:${facts.sessionId}`;
  const unavailable = (what: string): void =>
    facts.refuse(refusalOf(facts, 'approval.unavailable', '58000', `this statement needs a human's approval: ${request.hold_reason}; ${what}, so it did not run (rule approval.unavailable); retry shortly`));
  // The bus holds the progress row before the request exists, so every row of its outcome (written by
  // whoever decides it, once it exists) follows it on the bus and in the trail (spec §6).
  try {
    await facts.publishStrict(approvalDecision(audited, { event: 'approval_requested', source: 'wire', rule: request.hold_rule, reason: request.hold_reason, ts: new Date().toISOString() }));
  } catch {
    return void unavailable('the audit trail is not taking records, so the request could not be announced');
  }
  try {
    await handle(services.store, approvalStream(approvalId), approval, { kind: 'request', request }, { correlationId: `approval-${approvalId}`, actor });
  } catch {
    return void unavailable('the approval request could not be recorded');
  }
  facts.notice(encodeNoticeResponse({ severity: 'NOTICE', code: '01000', message: noticeOf(approvalId) }));
  facts.released();

  // A change of the policy ends the wait: the request was bound to the version it was held under.
  const policyChanged = new AbortController();
  const stopWatching = facts.policies.onChange((key, _before, after) => {
    if (key === policy.policy_id && after?.version !== policy.version) policyChanged.abort();
  });
  const ended = AbortSignal.any([facts.wait, policyChanged.signal]);
  const decided = await awaitDecision(services, request, ended, (row) =>
    facts.publish(approvalDecision(row, { event: 'approval_expired', source: 'wire', rule: 'approval.expired', reason: notRunError(row).message, ts: new Date(row.expires_at).toISOString() })),
  ).finally(stopWatching);

  if (!decided) {
    const why = policyChanged.signal.aborted
      ? 'the policy profile changed while the statement waited'
      : facts.closed()
        ? 'the session ended while the statement waited'
        : 'the client cancelled the statement while it waited';
    await onRequest(services, approvalId, { kind: 'fail', sqlstate: policyChanged.signal.aborted ? '55000' : '57014', message: why }, actor).catch(() => undefined);
    if (!facts.closed()) facts.refuse(refusalOf(facts, 'approval.failed', policyChanged.signal.aborted ? '55000' : '57014', `approval request ${approvalId} ended: ${why} (rule approval.failed); the statement did not run`));
    return undefined;
  }
  if (facts.closed()) return undefined;
  if (decided.status !== 'approved') {
    const error = notRunError(decided);
    // Rejections and expiries are audited where they are decided (the deciding route, the sweep or this wait).
    return void facts.answer(error.sqlstate, error.message);
  }
  return approved(facts, services, decided, actor);
}

async function approved(facts: WireHold, services: ApprovalServices, row: ApprovalRow, actor: string): Promise<{ decision: Allowed; statement: Statement } | undefined> {
  const policy = facts.policies.get(facts.credential.policy_profile_id);
  const broken = bindingBroken(row, facts.credential, policy, facts.sql, facts.bound ?? { params: [] });
  if (broken) {
    await onRequest(services, row.approval_id, { kind: 'fail', sqlstate: '55000', message: broken }, actor).catch(() => undefined);
    return void facts.refuse(refusalOf(facts, 'approval.binding', '55000', `approval request ${row.approval_id} was approved, but ${broken} (rule approval.binding); the statement did not run`));
  }
  const redecided = facts.redecide();
  if (!redecided || !policy) {
    await onRequest(services, row.approval_id, { kind: 'fail', sqlstate: '42501', message: 'the policy refused the statement when it was about to run' }, actor).catch(() => undefined);
    return undefined;
  }
  const decision = boundToEstimate(redecided, row, policy);
  const taken = await onRequest(services, row.approval_id, { kind: 'start', executor: `wire:${facts.sessionId}` }, actor);
  if (taken) return void facts.refuse(refusalOf(facts, 'approval.failed', '55000', `approval request ${row.approval_id} cannot run: ${taken.message} (rule approval.failed)`));
  const said = row.reason === '' ? '' : `: ${row.reason}`;
  facts.publish(approvalDecision(row, { event: 'approved', source: 'wire', rule: 'approval.approved', reason: `approved by ${row.decided_by ?? 'unknown'}${said}`, ts: new Date().toISOString() }));
  const statement = statementOf({ sql: facts.sql, decision });
  statement.approvalId = row.approval_id;
  let affected: number | undefined;
  statement.tagged = (tag) => {
    affected = (affected ?? 0) + (taggedRows(tag) ?? 0);
  };
  statement.settled = (ok) => void onRequest(services, row.approval_id, settledCommand(statement, ok, affected), actor).catch(() => undefined);
  return { decision, statement };
}

/** How an approved statement's run ends its request: executed with its rows, or failed (rolled back by its guard, failed upstream, or lost). */
export function settledCommand(statement: Pick<Statement, 'verdict' | 'lost' | 'rows'>, ok: boolean, affected: number | undefined): ApprovalCommand {
  const refused = statement.verdict?.event === 'blocked' ? statement.verdict : undefined;
  if (refused) return { kind: 'fail', sqlstate: refused.rule === 'write_cap.exceeded' ? '54000' : '55000', message: refused.reason };
  if (ok) return { kind: 'executed', rowsAffected: affected ?? statement.rows };
  return { kind: 'fail', sqlstate: 'XX000', message: statement.lost ? 'the connection closed before the statement’s end was seen; it may have run' : 'the statement ran and failed upstream' };
}
