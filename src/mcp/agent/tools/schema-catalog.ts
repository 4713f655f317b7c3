import { z } from 'zod';
import { structuredResult } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { columnsOf, fromCatalog, visibleTables } from '../schema.js';
import { VisibleColumn } from './describe-table.js';
import { VisibleTable } from './list-tables.js';

export const SchemaCatalogInput = z.strictObject({});

export const schemaCatalog: AgentTool<typeof SchemaCatalogInput> = {
  name: 'schema_catalog',
  title: 'The whole schema you may query',
  description: 'Every table your policy allows with all its columns (type, nullability, primary key, mask) in one answer: list_tables and describe_table for each, at once.',
  inputSchema: SchemaCatalogInput,
  outputSchema: z.object({ tables: z.array(VisibleTable.extend({ columns: z.array(VisibleColumn) })) }),
  annotations: { title: 'The whole schema you may query', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler: (_args, context) =>
    fromCatalog(async () => {
      const tables = await visibleTables(context);
      const columns = await columnsOf(context, tables.map((t) => t.table));
      return structuredResult({ tables: tables.map((t) => ({ ...t, columns: columns.get(t.table) ?? [] })) });
    }),
};
