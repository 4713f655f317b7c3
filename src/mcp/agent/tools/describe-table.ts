import { z } from 'zod';
import { structuredResult, toolError } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { columnsOf, fromCatalog, visibleTables, type VisibleTable } from '../schema.js';
import { VisibleTable as TableShape } from './list-tables.js';

export const DescribeTableInput = z.strictObject({
  table: z.string().min(1).max(200).describe('schema.name, or a bare name when only one allowed table has it, e.g. "public.orders" or "orders"'),
});

export const VisibleColumn = z.object({
  name: z.string(),
  type: z.string(),
  nullable: z.boolean(),
  primary_key: z.boolean(),
  masked: z.enum(['redact', 'hash', 'partial', 'null']).nullable().describe('The mask every read of the column gets; null when unmasked'),
  comment: z.string().nullable(),
});

/** The visible table `name` denotes, or a tool error naming the tables that are visible. */
function resolve(tables: readonly VisibleTable[], name: string): VisibleTable | string {
  const matches = tables.filter((t) => t.table === name || (!name.includes('.') && t.table.slice(t.table.indexOf('.') + 1) === name));
  if (matches.length === 1) return matches[0]!;
  const listed = tables.map((t) => t.table).join(', ') || 'none';
  if (matches.length > 1) return `"${name}" may be ${matches.map((t) => t.table).join(' or ')}; name it with its schema.`;
  return `Table "${name}" is not available to this credential. The tables you may query: ${listed}.`;
}

export const describeTable: AgentTool<typeof DescribeTableInput> = {
  name: 'describe_table',
  title: 'Describe a table',
  description: 'The columns of one table your policy allows: name, type, nullability, primary key, comment, and the mask a masked column is read through. A table the policy does not allow is answered as unknown.',
  inputSchema: DescribeTableInput,
  outputSchema: TableShape.extend({ columns: z.array(VisibleColumn) }),
  annotations: { title: 'Describe a table', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler: ({ table }, context) =>
    fromCatalog(async () => {
      const found = resolve(await visibleTables(context), table);
      if (typeof found === 'string') return toolError(found);
      const columns = await columnsOf(context, [found.table]);
      return structuredResult({ ...found, columns: columns.get(found.table) ?? [] });
    }),
};
