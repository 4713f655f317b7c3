import { CATALOG_SCHEMAS, isTempSchema, PG_CATALOG_RELATIONS } from './catalog.js';

/** A relation as the catalog stores it; parts are compared exactly (quoted identifiers keep their case). */
export interface RelationName {
  readonly schema: string;
  readonly name: string;
}

/**
 * The search_path decisions are made on, which the proxy also sets on every upstream session. No
 * `$user`: the analyzer cannot know the upstream role's name, and a schema named after it (the
 * schema-per-user pattern PostgreSQL's documentation recommends) would otherwise take unqualified
 * names away from the schema the policy checked.
 */
export const DEFAULT_SEARCH_PATH: readonly string[] = ['public'];

export function qualified(relation: RelationName): string {
  return `${relation.schema}.${relation.name}`;
}

/** The schemas an unqualified name is looked up in, as PostgreSQL orders them. */
export interface SearchPath {
  /** pg_catalog is searched before every listed schema (it is, unless listed after another one). */
  readonly catalogFirst: boolean;
  /** Listed schemas in order, without `$user` (treated as absent) and temp schemas (the agent can create no temp objects). */
  readonly schemas: readonly string[];
}

export function searchPathOf(listed: readonly string[]): SearchPath {
  const schemas = listed.filter((schema) => schema !== '$user' && !isTempSchema(schema));
  const catalogAt = schemas.indexOf('pg_catalog');
  return { catalogFirst: catalogAt <= 0, schemas: schemas.filter((schema) => schema !== 'pg_catalog' || catalogAt > 0) };
}

/**
 * The relations an unqualified name may denote. Without a catalog the analyzer cannot know which
 * listed schema holds the table, so every schema that would be searched before a match is a
 * candidate, and a policy check must hold for each of them.
 */
export function resolveRelation(schema: string | undefined, name: string, path: SearchPath): RelationName[] {
  if (schema !== undefined) return [{ schema, name }];
  const inCatalog = PG_CATALOG_RELATIONS.has(name);
  if (inCatalog && path.catalogFirst) return [{ schema: 'pg_catalog', name }];
  const candidates: RelationName[] = [];
  for (const listed of path.schemas) {
    if (listed === 'pg_catalog') {
      if (inCatalog) return [...candidates, { schema: listed, name }];
      continue;
    }
    candidates.push({ schema: listed, name });
  }
  return candidates;
}

export function isCatalog(relation: RelationName): boolean {
  return CATALOG_SCHEMAS.has(relation.schema);
}
