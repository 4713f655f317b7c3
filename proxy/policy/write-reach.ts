import { qualified, type RelationName } from './names.js';
import type { UpstreamCatalog } from './upstream-catalog.js';

function relationOf(table: string): RelationName {
  const dot = table.indexOf('.');
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

/**
 * The tables whose rows a write to `written` (`schema.table`) may change, on the catalog snapshot:
 * the written tables, and, transitively, the other members of their partition trees and the tables
 * whose foreign keys cascade from them (`writesReach`). Undefined when that cannot be bounded: a
 * reached relation runs a trigger or rule of the database's, is a view (its base tables, or its
 * INSTEAD OF triggers, are not read here), or is not in the snapshot. Without a snapshot (unit
 * tests decide without one; the proxy and the MCP never do) the written tables alone.
 */
export function writeReach(written: readonly string[], catalog: UpstreamCatalog | undefined): readonly string[] | undefined {
  if (!catalog || written.length === 0) return written;
  const seen = new Set(written);
  const queue = written.map(relationOf);
  for (let table = queue.shift(); table; table = queue.shift()) {
    const relation = catalog.relation(table);
    if (!relation || relation.writesRunCode || relation.kind === 'view') return undefined;
    for (const reached of relation.writesReach) {
      const name = qualified(reached);
      if (seen.has(name)) continue;
      seen.add(name);
      queue.push(reached);
    }
  }
  return [...seen];
}
