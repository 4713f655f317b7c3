import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { allowedByList } from '../../../proxy/policy/rules.js';
import type { MaskMode } from '../../events/policies.js';
import { toolError } from '../tool.js';
import type { AgentContext } from './context.js';
import { StatementFailed } from './statement.js';
import { UpstreamUnavailable } from '../../../proxy/upstream/failure.js';
import { isUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import { catalogMasks } from '../../../proxy/policy/mask-reach.js';
import { upstreamRefusal } from './gate.js';

/** A relation the credential may read: tables, views, materialized views, foreign tables. */
export interface VisibleTable {
  /** `schema.name`, as allowed_tables names it. */
  readonly table: string;
  readonly kind: string;
  /** The planner's estimate; null when unknown (never analyzed or vacuumed, or a view). */
  readonly estimated_rows: number | null;
  readonly comment: string | null;
}

export interface VisibleColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable: boolean;
  readonly primary_key: boolean;
  /** The mask every read of it gets, or null. */
  readonly masked: MaskMode | null;
  readonly comment: string | null;
}

/**
 * reltuples is -1 until a table is first vacuumed or analyzed (PostgreSQL 14 on); before 14 it is 0
 * then, with relpages 0, which an analyzed empty table also shows: unknown either way, not 0 rows.
 */
const TABLES_SQL = `select n.nspname, c.relname,
    case c.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' else 'table' end,
    case when c.relkind = 'v' or c.reltuples < 0 or (c.reltuples = 0 and c.relpages = 0 and current_setting('server_version_num')::int < 140000) then null
      else c.reltuples::int8 end,
    obj_description(c.oid, 'pg_class')
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where c.relkind in ('r', 'p', 'v', 'm', 'f') and n.nspname <> 'information_schema' and n.nspname !~ '^pg_'
  order by 1, 2`;

const COLUMNS_SQL = `select n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), not a.attnotnull,
    coalesce(a.attnum = any(i.indkey::int2[]), false), col_description(c.oid, a.attnum)
  from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
    left join pg_index i on i.indrelid = c.oid and i.indisprimary
  where a.attnum > 0 and not a.attisdropped and (n.nspname, c.relname) in (select * from unnest($1::text[], $2::text[]))
  order by n.nspname, c.relname, a.attnum`;

/** Catalog reads are the gateway's own, bounded and read-only; their results are filtered by the policy before anyone sees them. */
const CATALOG_ROWS = 100_000;
const CATALOG_TIMEOUT_MS = 10_000;

/** A PostgreSQL array literal of text values. */
function textArray(values: readonly string[]): string {
  return `{${values.map((value) => `"${value.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;
}

function splitName(table: string): { schema: string; name: string } {
  const dot = table.indexOf('.');
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

async function catalog(context: AgentContext, sql: string, params: readonly string[]) {
  return context.services.databases.run(context.credential, context.upstream, { sql, params, readOnly: true, maxRows: CATALOG_ROWS, timeoutMs: CATALOG_TIMEOUT_MS });
}

/** The relations of the database the policy allows, in schema and name order; none without a policy. */
export async function visibleTables(context: AgentContext): Promise<VisibleTable[]> {
  const policy = context.policy;
  if (!policy) return [];
  const { rows } = await catalog(context, TABLES_SQL, []);
  // A table planted as a canary is shown as any table off the allowlist is: not at all; so is a denied table.
  const denied = context.honeytokens.canariesOf(policy).flatMap((canary) => (canary.kind === 'table' ? [canary.target] : []));
  return rows
    .filter(([schema, name]) => allowedByList({ allowed_tables: policy.allowed_tables, denied, denied_tables: policy.denied_tables }, { schema: String(schema), name: String(name) }))
    .map(([schema, name, kind, estimated, comment]) => ({ table: `${String(schema)}.${String(name)}`, kind: String(kind), estimated_rows: estimated === null ? null : Number(estimated), comment: comment === null ? null : String(comment) }));
}

/** The columns of `tables` (each visible), by table, masked ones marked with their mask. */
export async function columnsOf(context: AgentContext, tables: readonly string[]): Promise<Map<string, VisibleColumn[]>> {
  const out = new Map<string, VisibleColumn[]>(tables.map((table) => [table, []]));
  if (tables.length === 0) return out;
  const names = tables.map(splitName);
  const { rows } = await catalog(context, COLUMNS_SQL, [textArray(names.map((n) => n.schema)), textArray(names.map((n) => n.name))]);
  // As statements are decided: a mask holds on the partitions and inheritance children of its table too.
  const snapshot = await context.services.databases.catalog(context.credential, context.upstream);
  const masks = catalogMasks(context.policy?.masked_columns ?? {}, isUnavailable(snapshot) ? undefined : snapshot);
  for (const [schema, table, name, type, nullable, primaryKey, comment] of rows) {
    const qualified = `${String(schema)}.${String(table)}`;
    out.get(qualified)?.push({
      name: String(name),
      type: String(type),
      nullable: nullable === true,
      primary_key: primaryKey === true,
      masked: masks[`${qualified}.${String(name)}`] ?? null,
      comment: comment === null ? null : String(comment),
    });
  }
  return out;
}

/** A tool's answer built from catalog reads; a read that could not be made is a tool error, anything else is rethrown. */
export async function fromCatalog(answer: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await answer();
  } catch (error) {
    if (error instanceof UpstreamUnavailable) return upstreamRefusal(error.failure);
    if (error instanceof StatementFailed) return toolError(`The database could not list its tables (SQLSTATE ${error.sqlstate}): ${error.message}`);
    throw error;
  }
}
