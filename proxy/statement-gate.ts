import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import { DRIVER_METADATA } from './policy/catalog.js';
import type { HashKey } from './policy/hash-key.js';
import { statementKind, type StatementDecision } from './policy/hook.js';
import type { SessionReads } from './replica-routing.js';
import type { SessionResults } from './cache/session-results.js';
import type { Allowed, StatementRefusal } from './session-audit.js';
import type { Protocol, SessionHost } from './session-host.js';
import { RELATION_UNKNOWN } from './policy/known-relations.js';
import { decideWithCatalog } from './upstream/catalog-snapshot.js';
import { LastAllowed } from './last-decision.js';

/**
 * A session's policy gate: every statement's decision on its database's catalog snapshot, the
 * budget checked where a statement is sent to run, and refusals audited and answered. What an
 * allowed statement means for the session (session state pins its connection, DDL renews its
 * catalog, a read may go to a replica) is noted here as it is decided.
 */
export class StatementGate {
  private readonly lastAllowed = new LastAllowed();
  private readonly hashKeyFailed = (error: unknown): void => {
    this.host.context.logger.warn({ err: error, session: this.host.id }, 'could not read the project’s hash key; statements a hash mask applies to are refused until it is at hand');
  };

  constructor(
    private readonly host: SessionHost,
    private readonly reads: SessionReads,
    private readonly results: SessionResults,
  ) {}

  /**
   * The policy's decision on a message's SQL. A refusal is answered (and audited) here and yields
   * undefined; so is any statement while strict auditing cannot take records.
   */
  decide(sql: string, protocol: Protocol): Allowed['decision'] | undefined {
    const { host } = this;
    const { context } = host;
    const credential = host.credential!;
    const policy = context.policies.get(credential.policy_profile_id);
    if (policy?.audit_mode === 'strict' && !context.decisions.acceptingStrict()) {
      context.metrics.statementsOf('blocked').inc();
      host.refuse(
        { severity: 'ERROR', code: '58000', message: 'the audit trail cannot take records right now, and this credential’s policy (audit_mode strict) refuses statements it cannot audit; retry shortly' },
        protocol,
      );
      return undefined;
    }
    // A Query runs now; a Parse runs nothing: its statement's budget is checked at each Execute.
    if (protocol === 'simple' && this.overBudget(sql, protocol)) return undefined;
    const decision = this.decideOn(sql, credential, policy, protocol);
    if (decision.action === 'allow' && decision.progress.length > 0) host.schemaChanged = true;
    for (const progress of decision.action === 'allow' ? decision.progress : []) {
      host.audit.publish(credential, { event: progress.event, projectId: credential.project_id, sql, kind: decision.statementKind, rule: progress.rule, reason: progress.reason, rows: 0, bytes: 0, latencyUs: null, ts: new Date().toISOString(), tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten });
    }
    if (decision.action !== 'allow') return this.refuse(sql, protocol, { ...decision, kind: decision.statementKind });
    // Session state (SET, set_config(..., false)) stays where the session's statements run, and is reset before anyone else's do.
    if (decision.changesSession) host.pinned = true;
    this.reads.decided(sql, decision);
    this.results.cache.decided(this.results.databaseId, decision, credential.credential_id);
    return decision;
  }

  /**
   * What a message's decision must wait for, if anything: the catalog read a schema change the
   * session ran started; then, when the statement names a relation the snapshot lacks (it is refused
   * catalog.relation_unknown), a fresh read, so that it is decided on what the upstream has now.
   */
  fresher(sql: string, protocol: Protocol): Promise<void> | undefined {
    const lease = this.host.catalog!;
    const changing = lease.changing();
    if (changing) return changing.then(() => this.fresher(sql, protocol));
    const credential = this.host.credential!;
    const decision = this.decideOn(sql, credential, this.host.context.policies.get(credential.policy_profile_id), protocol);
    return decision.action === 'refuse' && decision.rule === RELATION_UNKNOWN ? lease.fresh() : undefined;
  }

  /**
   * An Execute runs a statement decided at its Parse, perhaps long before: what it may write is
   * invalidated in the result cache, and its write holds the session's reads on the primary again.
   */
  executing(decision: Allowed['decision']): void {
    this.results.cache.decided(this.results.databaseId, decision, this.host.credential!.credential_id);
    this.reads.ran(decision);
  }

  /** The policy's decision on `sql` for this session, on its database's catalog snapshot. */
  decideOn(sql: string, credential: CredentialRow, policy: PolicyRow | undefined, protocol: Protocol): StatementDecision {
    const { host } = this;
    const inputs = { credential, policy, protocol, honeytokens: host.context.honeytokens, hashKey: this.hashKeyOf(policy), sessionValues: host.sessionValues, sandboxed: host.upstream.handle?.branchId !== undefined };
    const catalog = host.catalog!.current();
    return this.lastAllowed.of(sql, inputs, catalog) ?? this.lastAllowed.keep(sql, inputs, catalog, decideWithCatalog(sql, inputs, catalog));
  }

  /**
   * Refuses (audited, 53400) a statement the credential's or its organization's budget has no room
   * for; true when it did. Checked where a statement is sent to run (Query, Execute), so that a
   * statement prepared once and executed again and again is counted and stopped like any other.
   */
  overBudget(sql: string, protocol: Protocol): boolean {
    const { context } = this.host;
    const credential = this.host.credential!;
    const policy = context.policies.get(credential.policy_profile_id);
    const refusal = policy && context.budgets.refusal(credential, policy);
    if (!refusal) return false;
    this.refuse(sql, protocol, { event: 'budget_exhausted', sqlstate: '53400', kind: statementKind(sql), ...refusal, tablesRead: [], tablesWritten: [], tablesBlocked: [] });
    return true;
  }

  /** Refuses a statement before it runs: audited, counted, and answered with `refusal.sqlstate` and its reason. */
  refuse(sql: string, protocol: Protocol, refusal: StatementRefusal): undefined {
    this.host.audit.refused(this.host.credential!, sql, refusal);
    this.host.refuse({ severity: 'ERROR', code: refusal.sqlstate, message: refusal.reason }, protocol);
    return undefined;
  }

  /** The policy's max_rows, when it caps this statement's results; drivers' own type lookups are not the agent's results. */
  rowCap(decision: Allowed['decision'] | undefined): number | undefined {
    const cap = this.host.context.policies.get(this.host.credential!.policy_profile_id)?.max_rows;
    if (!cap || cap <= 0) return undefined;
    return decision && decision.tablesRead.length > 0 && decision.tablesRead.every((table) => DRIVER_METADATA.has(table)) ? undefined : cap;
  }

  /** The project's hash key for a decision under `policy`, when the policy needs it and it is at hand. */
  private hashKeyOf(policy: PolicyRow | undefined): HashKey | undefined {
    return this.host.context.hashKeys.forPolicy(policy, this.hashKeyFailed);
  }
}
