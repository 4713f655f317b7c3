import type { StatementAnalysis } from './analysis.js';
import { qualified } from './names.js';
import { INSUFFICIENT_PRIVILEGE, type PolicyRules, type Refusal } from './rules.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/** The rule of a statement naming a relation the catalog snapshot does not have: the session reads the catalog again, and decides once more. */
export const RELATION_UNKNOWN = 'catalog.relation_unknown';

/**
 * Under a policy with masks or denials, a statement that names a relation the catalog snapshot has
 * none of the candidates of is refused: what it shows (a view or partition of a masked or denied
 * table created since the snapshot was read, or in the session's open transaction) cannot be
 * told. The targets a schema change writes (the table it creates, alters or drops) are left out:
 * it shows no rows, and the catalog is read again once it ran. The relations a schema change reads
 * are not (a table created as a copy of a view's rows).
 */
export function knownRelationCheck(analysis: StatementAnalysis, policy: Pick<PolicyRules, 'masked_columns' | 'denied_tables'>, catalog: UpstreamCatalog | undefined): Refusal | null {
  if (!catalog || (Object.keys(policy.masked_columns).length === 0 && (policy.denied_tables ?? []).length === 0)) return null;
  const created = analysis.ddl ? createdName(analysis) : undefined;
  for (const use of analysis.relations) {
    if (analysis.ddl && use.written) continue;
    if (use.candidates.some((candidate) => catalog.relation(candidate) !== undefined)) continue;
    const name = use.candidates.map(qualified).join(' or ');
    if (created !== undefined && use.candidates.some((candidate) => qualified(candidate) === created || candidate.name === created)) continue;
    return {
      rule: RELATION_UNKNOWN,
      reason: `${name} is not in the gateway's snapshot of the upstream catalog, read again just now: it does not exist, or was created in a transaction that has not committed, and the gateway cannot tell whether it shows masked columns or denied tables (rule ${RELATION_UNKNOWN}); commit the schema change first, or check the name.`,
      sqlstate: INSUFFICIENT_PRIVILEGE,
      blocked: use.candidates.map(qualified),
    };
  }
  return null;
}

/** The relation a CREATE VIEW, CREATE MATERIALIZED VIEW or CREATE TABLE AS makes (`schema.name` when qualified, else the name alone). */
function createdName(analysis: StatementAnalysis): string | undefined {
  const stmt = analysis.stmt as Record<string, { view?: RangeVar; into?: { rel?: RangeVar } } | undefined>;
  const target = stmt.ViewStmt?.view ?? stmt.CreateTableAsStmt?.into?.rel;
  if (!target?.relname) return undefined;
  return target.schemaname ? `${target.schemaname}.${target.relname}` : target.relname;
}

interface RangeVar {
  readonly relname?: string;
  readonly schemaname?: string;
}
