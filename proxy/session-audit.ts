import type { BaseLogger } from 'pino';
import type { CredentialRow } from '../projections/credentials.js';
import { logRecordedRefusal } from './decision-log.js';
import type { AuditEventKind } from '../src/events/audit.js';
import { isoTimestamp } from '../src/iso-time.js';
import type { SessionBudgets } from './budgets.js';
import { decisionMembers, sessionMembers, textMembers } from './decision-json.js';
import { decisionRecord, END_NOT_SEEN, FAILED_UPSTREAM, recordedRefusal, type DecisionFacts } from './decision-record.js';
import type { Decision, DecisionPublisher } from './decisions.js';
import { addressKey, type AuditHold } from './audit-backpressure.js';
import type { ProxyMetrics } from './metrics.js';
import type { StatementDecision } from './policy/hook.js';
import type { Trip } from './policy/rules.js';
import type { Statement } from './pipeline.js';
import { STATEMENT_TIMEOUT_RULE, timeoutNote } from './statement-deadline.js';

/** A statement the policy allowed: its text as sent (for the audit) and the decision (its text to run). */
export interface Allowed {
  readonly sql: string;
  readonly decision: Extract<StatementDecision, { action: 'allow' }>;
}

/** A statement refused before it ran, as audited and answered. */
export interface StatementRefusal {
  readonly event: AuditEventKind;
  readonly rule: string;
  readonly reason: string;
  readonly sqlstate: string;
  readonly kind: string;
  readonly tablesRead: readonly string[];
  readonly tablesWritten: readonly string[];
  readonly tablesBlocked: readonly string[];
  readonly trip?: Trip;
}

type SessionFacts = Pick<DecisionFacts, 'credentialId' | 'sessionId' | 'source' | 'region' | 'clientIp'>;

/** The audit members of each allowed text, built on its first run: an allowed decision is cached per text, so it keys them. */
const textMembersOf = new WeakMap<Allowed['decision'], { readonly sql: string; readonly members: string }>();

function allowedTextMembers(allowed: Allowed): string {
  const known = textMembersOf.get(allowed.decision);
  if (known?.sql === allowed.sql) return known.members;
  const { decision } = allowed;
  const members = textMembers({ sql: allowed.sql, kind: decision.statementKind, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten });
  textMembersOf.set(decision, { sql: allowed.sql, members });
  return members;
}

/** An Execute of a portal the session does not know: it fails upstream, and is audited with no text. */
const UNKNOWN_PORTAL_TEXT = textMembers({ sql: '', kind: '' });

/** The audited statement an Execute or Query starts; an Execute of an unknown portal still gets one (it fails upstream). */
export function statementOf(allowed: Allowed | undefined): Statement {
  const decision = allowed?.decision;
  return {
    text: allowed ? allowedTextMembers(allowed) : UNKNOWN_PORTAL_TEXT,
    event: decision?.event ?? 'query',
    rule: decision?.rule ?? '',
    reason: decision?.reason ?? '',
    startedAt: performance.now(),
    ts: isoTimestamp(),
    rows: 0,
    bytes: 0,
    failed: false,
    lost: false,
    truncated: false,
    replicaId: undefined,
    relayedTo: undefined,
  };
}

/** What a session's audit needs of the context every session shares. */
export interface AuditContext {
  readonly decisions: DecisionPublisher;
  readonly metrics: ProxyMetrics;
  readonly budgets: SessionBudgets;
  readonly identity: { readonly region: string };
  readonly logger: Pick<BaseLogger, 'info' | 'warn'>;
  /** Told each statement decision of a credential: the back-pressure holds the credentials that make the most. */
  readonly auditBackPressure?: Pick<AuditHold, 'used'>;
}

/** The audit of one session: its records carry where they came from; the credential is the caller's, passed in. */
export class SessionAudit {
  /** The audit members this session fixes, once its credential is known. */
  private members = '';

  constructor(
    private readonly context: AuditContext,
    private readonly sessionId: string,
    private readonly clientIp: string,
  ) {}

  /** The credential of a completed login, whose connection's close is recorded by `ended`. */
  private opened: CredentialRow | undefined;

  /**
   * Fixes the members of every statement record once the login completed, and records the
   * connection as opened at `connectedAt` (when the client connected).
   */
  loggedIn(credential: CredentialRow, connectedAt: string): void {
    this.members = sessionMembers({ ...this.sessionFacts(credential), projectId: credential.project_id });
    this.opened = credential;
    this.mark('opened', credential, connectedAt);
  }

  /** The session ended: a connection recorded as opened is recorded as closed. */
  ended(): void {
    if (this.opened) this.mark('closed', this.opened, new Date().toISOString());
    this.opened = undefined;
  }

  private mark(phase: 'opened' | 'closed', credential: CredentialRow, at: string): void {
    this.context.auditBackPressure?.used(credential.credential_id);
    this.context.decisions.publishSession({ phase, project_id: credential.project_id, session_id: this.sessionId, credential_id: credential.credential_id, at });
  }

  /** A statement that went upstream ended (or its end will not be seen); `cancelledAtMs` is the statement deadline's. */
  completed(credential: CredentialRow, statement: Statement, cancelledAtMs: number | undefined): void {
    const failed = statement.failed;
    const latencyUs = Math.round((performance.now() - statement.startedAt) * 1000);
    // A cut result outranks masking: the agent saw masked values, and not all of them.
    const { verdict } = statement;
    const event = verdict?.event ?? (statement.truncated ? 'truncated' : statement.event);
    // A statement that failed once the gateway cancelled it at the statement timeout is recorded as such.
    const cancelledAt = failed ? cancelledAtMs : undefined;
    const rule = cancelledAt !== undefined ? STATEMENT_TIMEOUT_RULE : (verdict?.rule ?? (statement.truncated ? 'max_rows.truncated' : statement.rule));
    const own = verdict ? verdict.reason : statement.truncated ? `${statement.reason} the result was cut at the policy’s max_rows.`.trim() : statement.reason;
    const reason = cancelledAt === undefined ? own : `${timeoutNote(cancelledAt)} ${own}`.trim();
    this.context.metrics.statementsOf(failed ? 'error' : event).inc();
    this.context.metrics.latency.observe(latencyUs / 1e6);
    this.context.budgets.spent(credential, statement.bytes);
    this.context.auditBackPressure?.used(credential.credential_id);
    this.context.decisions.publishMembers(
      credential.project_id,
      decisionMembers(this.members, statement.text, {
        event,
        ran: true,
        rule,
        reason: statement.lost ? `${END_NOT_SEEN} ${reason}`.trim() : failed ? `${FAILED_UPSTREAM} ${reason}`.trim() : reason,
        rows: verdict?.rows ?? statement.rows,
        bytes: statement.bytes,
        latencyUs,
        ts: statement.ts,
        region: this.context.identity.region,
        // Every member present, so the outcome of every statement has one shape.
        approvalId: statement.approvalId,
        cache: statement.cache,
        upstream: statement.replicaId === undefined && statement.relayedTo === undefined ? undefined : { replicaId: statement.replicaId, relayedTo: statement.relayedTo },
        tablesBlocked: undefined,
      }),
    );
  }

  /** A statement the policy allowed that did not run: no upstream connection could be had for it (`rule` says why). */
  notRun(credential: CredentialRow, statement: Statement, rule: string, reason: string): void {
    this.context.metrics.statementsOf('blocked').inc();
    this.context.auditBackPressure?.used(credential.credential_id);
    this.context.decisions.publishMembers(
      credential.project_id,
      decisionMembers(this.members, statement.text, { event: 'blocked', ran: false, rule, reason, rows: 0, bytes: 0, latencyUs: null, ts: statement.ts, region: this.context.identity.region }),
    );
  }

  /** Audits and counts a statement refused before it ran; answering the client is the caller's. */
  refused(credential: CredentialRow, sql: string, refusal: StatementRefusal): void {
    const recorded = recordedRefusal(refusal);
    logRecordedRefusal(this.context.logger, recorded, { source: 'wire', session: this.sessionId, credential_id: credential.credential_id, project_id: credential.project_id });
    this.context.auditBackPressure?.used(credential.credential_id);
    this.context.decisions.publish(
      this.decision(credential, { ...recorded, projectId: credential.project_id, sql, kind: refusal.kind, rows: 0, bytes: 0, latencyUs: null, ts: new Date().toISOString(), tablesRead: refusal.tablesRead, tablesWritten: refusal.tablesWritten, tablesBlocked: refusal.tablesBlocked }),
    );
    this.context.metrics.statementsOf(recorded.event).inc();
  }

  /** Publishes a decision of this session that ran nothing (a refused login, an expiry, a migration's progress). */
  publish(credential: CredentialRow | undefined, facts: Omit<DecisionFacts, keyof SessionFacts | 'ran'>): void {
    // Before the login completed (a refused login) it counts against the client's address, whichever credential it named.
    this.context.auditBackPressure?.used(this.opened ? this.opened.credential_id : addressKey(this.clientIp));
    this.context.decisions.publish(this.decision(credential, facts));
  }

  /** What every record of this session says about where it came from. */
  private sessionFacts(credential: CredentialRow | undefined): SessionFacts {
    return {
      credentialId: credential?.credential_id ?? null,
      sessionId: this.sessionId,
      source: 'wire',
      region: this.context.identity.region,
      clientIp: this.clientIp,
    };
  }

  /** The record of a decision of this session; `ran` only for statements that went upstream. */
  private decision(credential: CredentialRow | undefined, facts: Omit<DecisionFacts, keyof SessionFacts | 'ran'> & { readonly ran?: boolean }): Decision {
    return decisionRecord({ ran: false, ...facts, ...this.sessionFacts(credential) });
  }
}
