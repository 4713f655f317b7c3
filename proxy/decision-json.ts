/**
 * A StatementDecided record as JSON members, without building it as an object first: what a
 * session fixes at login and what an allowed text fixes are encoded once, so the record of a
 * statement the wire runs costs one concatenation. `decisionRecord` builds the same record as an
 * object for the paths that are not hot (refusals, MCP); the two are tested equal.
 */
import type { DecisionFacts } from './decision-record.js';
import { truncateSql } from './decisions.js';
import { statementIdentity } from './policy/identity.js';

type SessionFacts = Pick<DecisionFacts, 'projectId' | 'credentialId' | 'sessionId' | 'source' | 'region' | 'clientIp'>;
type TextFacts = Pick<DecisionFacts, 'sql' | 'kind' | 'tablesRead' | 'tablesWritten'>;
type OutcomeFacts = Pick<DecisionFacts, 'event' | 'ts' | 'rule' | 'reason' | 'ran' | 'rows' | 'bytes' | 'latencyUs' | 'tablesBlocked'>;

const json = JSON.stringify;

/** The members a session fixes: project, credential, session, source, region and client address. */
export function sessionMembers(facts: SessionFacts): string {
  return `"project_id":${json(facts.projectId)},"credential_id":${json(facts.credentialId)},"session_id":${json(facts.sessionId)},"source":${json(facts.source)},"region":${json(facts.region)},"client_ip":${json(facts.clientIp)}`;
}

/** The members a statement's text and its analysis fix: the text (truncated), its audit identity, its kind and tables. */
export function textMembers(facts: TextFacts): string {
  const identity = statementIdentity(facts.sql);
  return (
    `"sql":${json(truncateSql(facts.sql))},"normalized_sql":${json(identity.normalized_sql)},"query_hash":${json(identity.query_hash)},` +
    `"statement_kind":${json(facts.kind)},"tables_read":${json(facts.tablesRead ?? [])},"tables_written":${json(facts.tablesWritten ?? [])},"parsed":${facts.kind !== ''}`
  );
}

/** The whole record, less the publisher's stamp, from its session's and its text's members and what became of it. */
export function decisionMembers(session: string, text: string, outcome: OutcomeFacts): string {
  const latency = outcome.latencyUs !== null && Number.isFinite(outcome.latencyUs) ? outcome.latencyUs : null;
  return (
    `"event":${json(outcome.event)},${session},"ts":${json(outcome.ts)},${text},"decision_rule":${json(outcome.rule)},"reason":${json(outcome.reason)},` +
    `"cache_status":"${outcome.ran ? 'bypass' : 'none'}","rows_returned":"${outcome.rows}","bytes_out":"${outcome.bytes}","latency_us":${latency},` +
    `"tables_blocked":${json(outcome.tablesBlocked ?? [])},"approval_id":null`
  );
}
