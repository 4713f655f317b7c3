import { qualified, type RelationName } from './names.js';
import type { CatalogRelation, UpstreamCatalog } from './upstream-catalog.js';

/** `schema.table` as a relation name. */
export function relationOf(table: string): RelationName {
  const dot = table.indexOf('.');
  return { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

/**
 * `start` (`schema.table` names) and every relation `next` leads to from them, transitively, on the
 * catalog snapshot; undefined as soon as `next` says the reach cannot be bounded (undefined).
 */
function closure(start: readonly string[], catalog: UpstreamCatalog, next: (relation: CatalogRelation | undefined) => readonly RelationName[] | undefined): readonly string[] | undefined {
  const seen = new Set(start);
  const queue = start.map(relationOf);
  for (let table = queue.shift(); table; table = queue.shift()) {
    const reached = next(catalog.relation(table));
    if (!reached) return undefined;
    for (const relation of reached) {
      const name = qualified(relation);
      if (seen.has(name)) continue;
      seen.add(name);
      queue.push(relation);
    }
  }
  return seen.size === start.length ? start : [...seen];
}

/**
 * The tables whose rows a write to `written` (`schema.table`) may change, on the catalog snapshot:
 * the written tables, and, transitively, the other members of their partition trees and the tables
 * whose foreign keys cascade from them (`writesReach`). Undefined when that cannot be bounded: a
 * reached relation runs a trigger or rule of the database's, is a view (its base tables, or its
 * INSTEAD OF triggers, are not followed), or is not in the snapshot. Without a snapshot (unit
 * tests decide without one; the proxy and the MCP never do) the written tables alone.
 */
export function writeReach(written: readonly string[], catalog: UpstreamCatalog | undefined): readonly string[] | undefined {
  if (!catalog || written.length === 0) return written;
  return closure(written, catalog, (relation) => (!relation || relation.writesRunCode || relation.kind === 'view' ? undefined : relation.writesReach));
}

/**
 * The relations a read of `read` depends on, for the result cache's entries: the relations read,
 * and, transitively, what each view among them reads (`viewReads`), so that a write to a view's
 * base table drops the entries that read the view. Undefined when that cannot be bounded: a reached
 * relation runs code on a read (`readsRunCode`: a view calling a function, row-level security).
 */
export function readReach(read: readonly string[], catalog: UpstreamCatalog | undefined): readonly string[] | undefined {
  if (!catalog || read.length === 0) return read;
  return closure(read, catalog, (relation) => (relation?.readsRunCode ? undefined : (relation?.viewReads ?? [])));
}

/**
 * The relations whose rows a read of `read` may show through views and materialized views, at any
 * depth (`viewReads`), for the policy's masks and denials; the relations functions called by a view
 * read are not followed (docs/policy.md, known limits).
 */
export function viewedRelations(read: readonly string[], catalog: UpstreamCatalog): readonly string[] {
  return closure(read, catalog, (relation) => relation?.viewReads ?? []) ?? read;
}
