import { createHash } from 'node:crypto';
import type { SessionValues } from '../policy/row-filters.js';

/** Everything a cached result depends on besides the upstream data: what the key is made of. */
export interface KeyParts {
  readonly databaseId: string;
  readonly policyId: string;
  readonly policyRevision: number;
  /** The upstream catalog's version the decision was made on (names resolve through it). */
  readonly catalogVersion: string;
  /** The wire's protocols, or the hosted MCP's `query` tool (its results are rows as JSON, not wire messages). */
  readonly protocol: 'simple' | 'extended' | 'mcp';
  /** The text the gateway runs: after masking and row-filter rewrites. */
  readonly sql: string;
  /** What the policy shows of it: masked columns (`schema.table.column:mode`) and row-filtered tables. */
  readonly maskedColumns: readonly string[];
  readonly rowFiltered: readonly string[];
  /** The session values the policy's row filters name, when they name any (the rewrite holds them); undefined otherwise. */
  readonly sessionValues: SessionValues | undefined;
  /** Extended protocol: the Parse's parameter types, the Bind's parameter formats and values, and the result formats asked for. */
  readonly paramTypes?: readonly number[];
  readonly paramFormats?: readonly number[];
  readonly params?: readonly (Buffer | null)[];
  readonly resultFormats?: readonly number[];
  /** MCP: the rows the result was cut at (the policy's or the request's max_rows). */
  readonly maxRows?: number;
}

/**
 * The cache key: a SHA-256 of an unambiguous encoding of every part (JSON of an array, with
 * parameter values in base64 and SQL NULL as null), so that two keys are equal only when every
 * part is.
 */
export function cacheKey(parts: KeyParts): string {
  const encoded = JSON.stringify([
    parts.databaseId,
    parts.policyId,
    parts.policyRevision,
    parts.catalogVersion,
    parts.protocol,
    parts.sql,
    parts.maskedColumns,
    parts.rowFiltered,
    parts.sessionValues ? [parts.sessionValues.credential_id, parts.sessionValues.project_id] : null,
    parts.paramTypes ?? [],
    parts.paramFormats ?? [],
    (parts.params ?? []).map((value) => (value === null ? null : value.toString('base64'))),
    parts.resultFormats ?? [],
    parts.maxRows ?? null,
  ]);
  return createHash('sha256').update(encoded).digest('hex');
}
