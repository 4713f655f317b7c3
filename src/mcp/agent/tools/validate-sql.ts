import { z } from 'zod';
import { structuredResult } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { auditRefusal, decide } from '../gate.js';
import { filtersAny } from '../../../../proxy/policy/row-filters.js';
import { withoutHashKey } from '../../../../proxy/policy/hash-key.js';

export const ValidateSqlInput = z.strictObject({
  sql: z.string().min(1).max(100_000).describe('The statement to check, as you would send it to query'),
});

const Verdict = z.object({
  allowed: z.boolean(),
  event: z.string().describe('What query would record: query, masked or blocked'),
  decision_rule: z.string().describe('The rule that decided; empty when the statement runs unmodified'),
  reason: z.string(),
  sqlstate: z.string().nullable().describe('The SQLSTATE of a refusal; null when allowed'),
  statement_kind: z.string(),
  tables_read: z.array(z.string()),
  tables_written: z.array(z.string()),
  tables_blocked: z.array(z.string()),
  runs_as: z.string().nullable().describe('The text that would run upstream (the masked rewrite when masked); null when refused, or when a row filter applies (its predicate is not shown)'),
});

export const validateSql: AgentTool<typeof ValidateSqlInput> = {
  name: 'validate_sql',
  title: 'Check a statement against the policy',
  description:
    'The policy decision on a statement without running it: allowed or refused, the decision_rule and reason, the tables it reads and writes, and the text that would run (masked columns rewritten). ' +
    'Refusals are recorded in the audit trail as they would be by query; an allowed statement records nothing, since nothing ran.',
  inputSchema: ValidateSqlInput,
  outputSchema: Verdict,
  annotations: { title: 'Check a statement against the policy', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ sql }, context) {
    const decision = await decide(context, sql);
    if (decision.action === 'refuse') auditRefusal(context, sql, decision);
    return structuredResult({
      allowed: decision.action === 'allow',
      event: decision.event,
      decision_rule: decision.rule,
      reason: decision.reason,
      sqlstate: decision.action === 'refuse' ? decision.sqlstate : null,
      statement_kind: decision.statementKind,
      tables_read: [...decision.tablesRead],
      tables_written: [...decision.tablesWritten],
      tables_blocked: decision.action === 'refuse' ? [...decision.tablesBlocked] : [],
      runs_as: decision.action === 'allow' && !filtersAny(context.policy?.row_filters, [...decision.tablesRead, ...decision.tablesWritten]) ? withoutHashKey(decision.sql, context.hashKey) : null,
    });
  },
};
