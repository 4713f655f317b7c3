import { qualified, type RelationName } from '../../proxy/policy/names.js';
import type { CatalogRelation, UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';

/** An upstream catalog built by hand for unit tests: `schema.table` → its columns in attribute order. */
export function handCatalog(tables: Readonly<Record<string, readonly string[]>>, version = 'hand-1'): UpstreamCatalog {
  return {
    version,
    relation: (name: RelationName): CatalogRelation | undefined => {
      const columns = tables[qualified(name)];
      return columns ? { kind: 'table', columns, inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] } : undefined;
    },
    functionSchemas: () => [],
    operatorSchemas: () => [],
  };
}
