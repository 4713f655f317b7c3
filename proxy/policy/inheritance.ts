import type { Collector } from './analysis.js';
import { pathOf, type Reader } from './ast.js';
import { qualified, type RelationName } from './names.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

/**
 * How a statement treats the plain-inheritance children of a relation it names:
 * - `only`: it would open them too (SELECT, UPDATE, DELETE, TRUNCATE, LOCK), so it runs on the
 *   relation alone (`ONLY`) whenever the catalog shows children or does not know the relation;
 * - `children`: it changes them too and ONLY would not do (ALTER TABLE, RENAME COLUMN), so they
 *   count as relations it writes, which the allowlist must cover;
 * - `self`: it never reaches them (INSERT, COPY, CREATE, DROP without CASCADE, a foreign key's table).
 * Partitions are not children here: a partitioned table's partitions count as the table itself.
 */
export type Reach = 'only' | 'children' | 'self';

/** Records what inheritance adds to a use of `tables` named by the RangeVar `reader`, against the collector's catalog. */
export function inheritance(out: Collector, reader: Reader, tables: readonly RelationName[], text: string, reach: Reach): void {
  const catalog = out.catalog;
  // Without a catalog nothing is known; the proxy and the MCP never decide without one (catalog.unavailable).
  if (!catalog || reach === 'self' || reader.slot === null || reader.fields.inh !== true) return;
  const known = tables.map((table) => catalog.relation(table));
  const unknown = known.includes(undefined);
  if (reach === 'children') {
    for (const child of descendants(catalog, tables)) out.relations.push({ candidates: [child], written: true, text: `${qualified(child)} (inherits from ${text})` });
    if (!unknown) return;
  } else if (!unknown && known.every((relation) => relation!.inheritors.length === 0)) return;
  const relname = reader.fields.relname;
  out.edits.push({
    path: pathOf(reader.slot),
    what: `ONLY ${text}`,
    apply(node) {
      if (node.relname !== relname || node.inh !== true) return `the relation ${text} is not where the analysis found it`;
      delete node.inh;
      return undefined;
    },
  });
}

/** Every relation that inherits from one of `tables`, directly or through others. */
export function descendants(catalog: UpstreamCatalog, tables: readonly RelationName[]): RelationName[] {
  const seen = new Set(tables.map(qualified));
  const found: RelationName[] = [];
  const queue = [...tables];
  for (let table = queue.shift(); table; table = queue.shift()) {
    for (const child of catalog.relation(table)?.inheritors ?? []) {
      if (seen.has(qualified(child))) continue;
      seen.add(qualified(child));
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}
