import { z } from 'zod';
import { structuredResult } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { fromCatalog, visibleTables } from '../schema.js';

export const ListTablesInput = z.strictObject({});

export const VisibleTable = z.object({
  table: z.string().describe('schema.name, as statements may name it'),
  kind: z.enum(['table', 'view', 'materialized view', 'foreign table']),
  estimated_rows: z.int().nullable().describe('The planner’s estimate from the table’s last ANALYZE or VACUUM; null when unknown: never analyzed, or a view. Count with SELECT count(*) when you need the number'),
  comment: z.string().nullable(),
});

export const listTables: AgentTool<typeof ListTablesInput> = {
  name: 'list_tables',
  title: 'List the tables you may query',
  description: 'The tables, views and materialized views of your database that your policy allows, with their estimated row counts (null when the database has no estimate: a table never analyzed, a view) and comments. Tables the policy does not allow are not listed.',
  inputSchema: ListTablesInput,
  outputSchema: z.object({ tables: z.array(VisibleTable) }),
  annotations: { title: 'List the tables you may query', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler: (_args, context) => fromCatalog(async () => structuredResult({ tables: await visibleTables(context) })),
};
