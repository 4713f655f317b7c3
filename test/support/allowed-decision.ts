import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { decideStatement, type StatementDecision } from '../../proxy/policy/hook.js';

/** A policy that allows every table of `public`, masks nothing and caps nothing; `changes` alter it. */
export function openPolicy(policyId: string, changes: Partial<PolicyRow> = {}): PolicyRow {
  return {
    policy_id: policyId, revision: 1, status: 'active', read_only: false, allowed_tables: ['public.*'], masked_columns: {}, allow_catalog: false, max_rows: null,
    honeytokens: [], statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'off', row_filters: {}, max_affected_rows: null, write_mode: 'normal',
    ...changes,
  } as unknown as PolicyRow;
}

/** The policy engine's decision on `sql` under `policy` (the parser loaded); throws unless it allows it. */
export function allowedUnder(policy: PolicyRow, sql: string, protocol: 'simple' | 'extended' = 'simple'): Extract<StatementDecision, { action: 'allow' }> {
  const decision = decideStatement(sql, { credential: { credential_id: `cred_${policy.policy_id}` } as CredentialRow, policy, protocol, honeytokens: { canariesOf: () => [], tripped: () => undefined } });
  if (decision.action !== 'allow') throw new Error(`${sql}: ${decision.reason}`);
  return decision;
}
