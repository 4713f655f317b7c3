import type { StatementAnalysis } from './analysis.js';
import { sameRows } from './mask-reach.js';
import { qualified } from './names.js';
import { relationOf, viewedRelations } from './reach.js';
import type { Canary } from './rules.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/**
 * The relation the statement names that shows a table or column canary's rows under another name,
 * on the catalog snapshot, as masks and denials follow them (mask-reach.ts): for a decoy table, a
 * view or materialized view reading it at any depth, or a member of its partition tree or an
 * inheritance child of it; for a canary column, the same column of a member of its table's
 * partition tree or of an inheritance child, read by name or as a whole row. Null when none does
 * (or there is no snapshot); the canary's own table named is canaryHit's.
 */
export function canaryReach(analysis: StatementAnalysis, canary: Canary, catalog: UpstreamCatalog | undefined): string | null {
  if (!catalog || canary.kind === 'value') return null;
  const table = canary.kind === 'table' ? canary.target : canary.target.slice(0, canary.target.lastIndexOf('.'));
  const shown = new Set(sameRows(relationOf(table), catalog).map(qualified));
  if (canary.kind === 'column') {
    const column = canary.target.slice(table.length + 1);
    const named = (name: string): boolean => shown.has(name) && catalog.relation(relationOf(name))?.columns.includes(column) === true;
    for (const use of analysis.columns) for (const candidate of use.candidates) if (candidate.column === column && named(qualified(candidate.table))) return qualified(candidate.table);
    for (const use of analysis.wholeRows) for (const whole of use.tables) if (named(qualified(whole))) return qualified(whole);
    return null;
  }
  for (const use of analysis.relations) {
    for (const candidate of use.candidates) {
      const name = qualified(candidate);
      if (name === table) continue;
      if (shown.has(name) || viewedRelations([name], catalog).includes(table)) return name;
    }
  }
  return null;
}
