/**
 * A StatementDecided record as JSON members, without building it as an object first: what a
 * session fixes at login and what an allowed text fixes are encoded once, so the record of a
 * statement the wire runs costs one concatenation. `decisionRecord` builds the same record as an
 * object for the paths that are not hot (refusals, MCP); the two are tested equal.
 */
import { AuditEventKind } from '../src/events/audit.js';
import { placementOf, type DecisionFacts } from './decision-record.js';
import { auditSql } from './audit-text.js';
import { auditCount } from './audit-count.js';
import { statementIdentity, type StatementIdentity } from './policy/identity.js';

type SessionFacts = Pick<DecisionFacts, 'projectId' | 'credentialId' | 'sessionId' | 'source' | 'region' | 'clientIp'>;
type TextFacts = Pick<DecisionFacts, 'sql' | 'kind' | 'tablesRead' | 'tablesWritten'>;
type OutcomeFacts = Pick<DecisionFacts, 'event' | 'ts' | 'rule' | 'reason' | 'ran' | 'rows' | 'bytes' | 'latencyUs' | 'tablesBlocked' | 'approvalId' | 'cache' | 'region' | 'upstream'>;

const json = JSON.stringify;

/** Each event kind as JSON, and the empty text: the members an allowed statement's record always has, without a call into JSON.stringify. */
const EVENT_JSON = new Map(AuditEventKind.options.map((event) => [event, json(event)]));
const jsonString = (value: string): string => (value === '' ? '""' : json(value));

/** Statements of one millisecond share their timestamp: its JSON is kept for the next one. */
let lastTs = '';
let lastTsJson = '""';
function jsonTimestamp(ts: string): string {
  if (ts !== lastTs) {
    lastTs = ts;
    lastTsJson = json(ts);
  }
  return lastTsJson;
}

/** The members a session fixes: project, credential, session, source, region and client address. */
export function sessionMembers(facts: SessionFacts): string {
  return `"project_id":${json(facts.projectId)},"credential_id":${json(facts.credentialId)},"session_id":${json(facts.sessionId)},"source":${json(facts.source)},"region":${json(facts.region)},"client_ip":${json(facts.clientIp)}`;
}

const NO_TABLES: readonly string[] = [];

/** The members after the text, by identity: texts that differ only in their numbers share an identity and, from one decision, the analysis. */
const analysisMembersOf = new WeakMap<StatementIdentity, { readonly kind: string; readonly tablesRead: readonly string[]; readonly tablesWritten: readonly string[]; readonly members: string }>();

function analysisMembers(identity: StatementIdentity, kind: string, tablesRead: readonly string[], tablesWritten: readonly string[]): string {
  const known = analysisMembersOf.get(identity);
  if (known?.kind === kind && known.tablesRead === tablesRead && known.tablesWritten === tablesWritten) return known.members;
  const members =
    `"normalized_sql":${json(identity.normalized_sql)},"query_hash":${json(identity.query_hash)},` +
    `"statement_kind":${json(kind)},"tables_read":${json(tablesRead)},"tables_written":${json(tablesWritten)},"parsed":${kind !== ''}`;
  analysisMembersOf.set(identity, { kind, tablesRead, tablesWritten, members });
  return members;
}

/** The members a statement's text and its analysis fix: the text (as the audit keeps it, see auditSql), its audit identity, its kind and tables. */
export function textMembers(facts: TextFacts): string {
  const members = analysisMembers(statementIdentity(facts.sql), facts.kind, facts.tablesRead ?? NO_TABLES, facts.tablesWritten ?? NO_TABLES);
  return `"sql":${json(auditSql(facts.sql))},${members}`;
}

const jsonOrNull = (value: string | null): string => (value === null ? 'null' : json(value));

/** Where it ran (decision-record.ts placementOf) as members. */
function placementMembers(outcome: OutcomeFacts): string {
  const placement = placementOf(outcome.ran, outcome.cache, outcome.region, outcome.upstream);
  return `"ran_on":${jsonOrNull(placement.ran_on)},"replica_id":${jsonOrNull(placement.replica_id)},"upstream_region":${jsonOrNull(placement.upstream_region)}`;
}

/** The whole record, less the publisher's stamp, from its session's and its text's members and what became of it. */
export function decisionMembers(session: string, text: string, outcome: OutcomeFacts): string {
  const latency = outcome.latencyUs !== null && Number.isFinite(outcome.latencyUs) ? outcome.latencyUs : null;
  return (
    `"event":${EVENT_JSON.get(outcome.event) ?? json(outcome.event)},${session},"ts":${jsonTimestamp(outcome.ts)},${text},"decision_rule":${jsonString(outcome.rule)},"reason":${jsonString(outcome.reason)},` +
    `"cache_status":"${outcome.ran ? (outcome.cache ?? 'bypass') : 'none'}","rows_returned":"${auditCount(outcome.rows)}","bytes_out":"${auditCount(outcome.bytes)}","latency_us":${latency},` +
    `"tables_blocked":${outcome.tablesBlocked && outcome.tablesBlocked.length > 0 ? json(outcome.tablesBlocked) : '[]'},"approval_id":${outcome.approvalId === undefined ? 'null' : json(outcome.approvalId)},` +
    placementMembers(outcome)
  );
}
