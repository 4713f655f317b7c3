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

/** What a session fixes of a key: the database, where it points, the policy's revision, the catalog, the protocol and the session values. */
type ContextParts = Pick<KeyParts, 'databaseId' | 'upstream' | 'policyId' | 'policyRevision' | 'catalogVersion' | 'protocol' | 'sessionValues'>;

/**
 * The cache key: an unambiguous encoding of every part, so that two keys are equal only when every
 * part is. Each text is prefixed by its length, each list by its count, a parameter value is its
 * bytes one character each (latin1) and SQL NULL is `n`. The parts a session fixes are encoded
 * once and stand in the key as the number they were given (contextId); the rest is the encoding
 * itself, not a digest of it: a Map hashes a string faster than SHA-256 runs, and equal keys
 * cannot collide.
 */
export function cacheKey(context: ContextParts, statement: StatementParts, wire: WireParts = NO_WIRE): string {
  return `${contextId(context)}${statementKey(statement)}${wireKey(wire)}`;
}

/** What the statement's decision fixes of a key (an allowed decision holds these parts). */
type StatementParts = Pick<KeyParts, 'sql' | 'maskedColumns' | 'rowFiltered'>;
/** What the wire (a Bind, or the MCP call) fixes of a key. */
type WireParts = Pick<KeyParts, 'paramTypes' | 'paramFormats' | 'params' | 'resultFormats' | 'maxRows'>;

const NO_WIRE: WireParts = {};

/** The statement parts of the last key, and their encoding: a session runs one statement again and again. */
let lastStatement: (StatementParts & { readonly encoded: string }) | undefined;

/** The encoding of what the statement's decision fixes: the text the gateway runs and what the policy shows of it. */
function statementKey(parts: StatementParts): string {
  const last = lastStatement;
  if (last?.sql === parts.sql && last.maskedColumns === parts.maskedColumns && last.rowFiltered === parts.rowFiltered) return last.encoded;
  const encoded = `${text(parts.sql)}${texts(parts.maskedColumns)}${texts(parts.rowFiltered)}`;
  lastStatement = { sql: parts.sql, maskedColumns: parts.maskedColumns, rowFiltered: parts.rowFiltered, encoded };
  return encoded;
}

/** The encoding of what the wire (or the MCP call) carries beside the statement: parameters, their formats and types, result formats, a row cut. */
function wireKey(parts: WireParts): string {
  let key = `${numbers(parts.paramTypes)}${numbers(parts.paramFormats)}${numbers(parts.resultFormats)}`;
  const params = parts.params ?? [];
  key += `${params.length}:`;
  for (const value of params) key += value === null ? 'n' : `${value.length}:${value.toString('latin1')}`;
  key += parts.maxRows === undefined ? '-' : `m${parts.maxRows}`;
  return key;
}

/** Context encodings by the number that stands for them; emptied past MAX_CONTEXTS (numbers are never given twice). */
const contextIds = new Map<string, string>();
const MAX_CONTEXTS = 10_000;
let lastContextId = 0;
/** The context of the last key, and its number: a session's statements share one. */
let lastContext: (ContextParts & { readonly id: string }) | undefined;

/**
 * The number of a key's context, as `<digits>|`. Equal contexts get one number while it is
 * remembered; a context forgotten and seen again gets a new one, so entries keyed under the old
 * number are never found again (they age out), and no two contexts ever share a number.
 */
function contextId(parts: ContextParts): string {
  const last = lastContext;
  if (
    last !== undefined &&
    last.databaseId === parts.databaseId &&
    last.upstream === parts.upstream &&
    last.policyId === parts.policyId &&
    last.policyRevision === parts.policyRevision &&
    last.catalogVersion === parts.catalogVersion &&
    last.protocol === parts.protocol &&
    last.sessionValues?.credential_id === parts.sessionValues?.credential_id &&
    last.sessionValues?.project_id === parts.sessionValues?.project_id &&
    (last.sessionValues === undefined) === (parts.sessionValues === undefined)
  ) {
    return last.id;
  }
  const context = `${text(parts.databaseId)}${text(parts.upstream)}${text(parts.policyId)}${parts.policyRevision}|${text(parts.catalogVersion)}${parts.protocol}|${
    parts.sessionValues ? `s${text(parts.sessionValues.credential_id)}${text(parts.sessionValues.project_id)}` : '-'
  }`;
  let id = contextIds.get(context);
  if (id === undefined) {
    if (contextIds.size >= MAX_CONTEXTS) contextIds.clear();
    id = `${++lastContextId}|`;
    contextIds.set(context, id);
  }
  lastContext = { databaseId: parts.databaseId, upstream: parts.upstream, policyId: parts.policyId, policyRevision: parts.policyRevision, catalogVersion: parts.catalogVersion, protocol: parts.protocol, sessionValues: parts.sessionValues, id };
  return id;
}

type UpstreamParts = { readonly host: string; readonly port: number; readonly name: string; readonly username: string };

/** The last database upstreamOf encoded, and its encoding: a session's statements ask for one. */
let lastUpstream: (UpstreamParts & { readonly encoded: string }) | undefined;

/** Where a registered database's results come from: its host, port, database name and user. */
export function upstreamOf(database: UpstreamParts): string {
  const last = lastUpstream;
  if (last?.host === database.host && last.port === database.port && last.name === database.name && last.username === database.username) return last.encoded;
  const encoded = `${text(database.host)}${database.port}|${text(database.name)}${text(database.username)}`;
  lastUpstream = { host: database.host, port: database.port, name: database.name, username: database.username, encoded };
  return encoded;
}

/** A text as its length and itself; `u` for none (a session value not at hand). */
const text = (value: string | undefined): string => (value === undefined ? 'u' : `${value.length}:${value}`);

function texts(values: readonly string[]): string {
  let encoded = `${values.length}:`;
  for (const value of values) encoded += text(value);
  return encoded;
}

/** A list of numbers joined by commas, then `;`; none or one (what a Bind mostly carries) without a join. */
function numbers(values: readonly number[] | undefined): string {
  if (values === undefined || values.length === 0) return ';';
  return values.length === 1 ? `${values[0]};` : `${values.join(',')};`;
}
