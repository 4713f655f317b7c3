import type { SessionValues } from '../policy/row-filters.js';

/** Everything a cached result depends on besides the upstream data: what the key is made of. */
export interface KeyParts {
  readonly databaseId: string;
  /** The server and database the result was read from (upstreamOf): a database re-pointed elsewhere keys anew, whatever its catalog. */
  readonly upstream: string;
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
 * The cache key: an unambiguous encoding of every part, so that two keys are equal only when every
 * part is. Each text is prefixed by its length, each list by its count, a parameter value is its
 * bytes one character each (latin1) and SQL NULL is `n`. The key is the encoding itself, not a
 * digest of it: a Map hashes a string faster than SHA-256 runs, and equal keys cannot collide.
 */
export function cacheKey(parts: KeyParts): string {
  let key = `${text(parts.databaseId)}${text(parts.upstream)}${text(parts.policyId)}${parts.policyRevision}|${text(parts.catalogVersion)}${parts.protocol}|${text(parts.sql)}`;
  key += `${texts(parts.maskedColumns)}${texts(parts.rowFiltered)}`;
  key += parts.sessionValues ? `s${text(parts.sessionValues.credential_id)}${text(parts.sessionValues.project_id)}` : '-';
  key += `${numbers(parts.paramTypes)}${numbers(parts.paramFormats)}${numbers(parts.resultFormats)}`;
  const params = parts.params ?? [];
  key += `${params.length}:`;
  for (const value of params) key += value === null ? 'n' : `${value.length}:${value.toString('latin1')}`;
  key += parts.maxRows === undefined ? '-' : `m${parts.maxRows}`;
  return key;
}

/** Where a registered database's results come from: its host, port, database name and user. */
export function upstreamOf(database: { readonly host: string; readonly port: number; readonly name: string; readonly username: string }): string {
  return `${text(database.host)}${database.port}|${text(database.name)}${text(database.username)}`;
}

/** A text as its length and itself; `u` for none (a session value not at hand). */
const text = (value: string | undefined): string => (value === undefined ? 'u' : `${value.length}:${value}`);

function texts(values: readonly string[]): string {
  let encoded = `${values.length}:`;
  for (const value of values) encoded += text(value);
  return encoded;
}

const numbers = (values: readonly number[] | undefined): string => `${values?.join(',') ?? ''};`;
