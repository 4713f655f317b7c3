/** Small honest audit chains for tests of verification. */
import { chainEntry } from '../../src/audit/chain.js';
import { entryFromDecision, type AuditEntry } from '../../src/audit/entry.js';
import { StatementDecidedV1 } from '../../src/events/audit.js';

export const projectId = 'prj_01jq3v5m8k2r7t9w4x6y0z1a2b';
export const hmacKeys = new Map([['k1', Buffer.alloc(32, 1)]]);

/** Entries 1..size of one project, keyed with k1 when `keyed`. */
export function chain(size: number, keyed: boolean): AuditEntry[] {
  const entries: AuditEntry[] = [];
  for (let seq = 1; seq <= size; seq += 1) {
    const decision = StatementDecidedV1.schema.parse({
      event: 'query', project_id: projectId, credential_id: null, session_id: 's1', source: 'wire', region: 'eu-west-1', client_ip: '',
      ts: '2025-01-31T12:00:00.000Z', sql: `select ${seq}`, normalized_sql: 'select $1', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '',
      cache_status: 'none', rows_returned: '1', bytes_out: '10', latency_us: null, tables_read: [], tables_written: [], tables_blocked: [], parsed: true,
      proxy_id: 'px-1', boot_epoch: 0, seq: String(seq), approval_id: null,
    });
    entries.push(chainEntry(entries.at(-1), entryFromDecision(decision, seq), keyed ? { current: 'k1', keys: hmacKeys } : { keys: hmacKeys }, projectId));
  }
  return entries;
}
