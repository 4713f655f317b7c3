import { z } from 'zod';
import { statementKind } from '../../../../proxy/policy/hook.js';
import { structuredResult, toolError } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { admit } from '../gate.js';
import { isRan, runAllowed } from '../run.js';

export const ExplainInput = z.strictObject({
  sql: z.string().min(1).max(100_000).describe('The statement to plan, without EXPLAIN; it is never executed'),
});

export const explain: AgentTool<typeof ExplainInput> = {
  name: 'explain',
  title: 'Show the query plan',
  description:
    'The planner’s plan for a statement the policy allows, as EXPLAIN (FORMAT JSON): the statement is planned, never executed (no ANALYZE), in a read-only transaction. ' +
    'It is decided and audited as the statement EXPLAIN (FORMAT JSON) <sql>; a refusal is a tool error with the decision_rule and reason.',
  inputSchema: ExplainInput,
  outputSchema: z.object({
    plan: z.unknown().describe('PostgreSQL’s JSON plan'),
    decision_rule: z.string(),
    reason: z.string(),
  }),
  annotations: { title: 'Show the query plan', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ sql }, context) {
    if (statementKind(sql) === 'explain') return toolError('Send the statement itself: explain adds EXPLAIN (FORMAT JSON), and never ANALYZE.');
    const statement = `EXPLAIN (FORMAT JSON) ${sql}`;
    const admitted = await admit(context, statement);
    if ('refused' in admitted) return admitted.refused;
    const ran = await runAllowed(context, statement, admitted.allowed, [], { rows: 1, by: 'request' });
    if (!isRan(ran)) return ran;
    return structuredResult({ plan: ran.result.rows[0]?.[0] ?? null, decision_rule: ran.rule, reason: ran.reason });
  },
};
