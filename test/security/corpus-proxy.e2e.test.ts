/**
 * The bypass corpus through the real proxy, with node-postgres on the simple protocol (a Query
 * message) and on the extended protocol (a named statement: Parse, Bind, Describe, Execute, Sync).
 * Each entry runs on its policy's credential and must get the exact decision and rule on the wire
 * and on the bus; afterwards the upstream must be unchanged and no masked value may have reached a
 * client. What the client received is read from its socket, so rows, COPY data, notices and errors
 * are all searched.
 */
import { Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { DEFAULT_SEARCH_PATH } from '../../proxy/policy/names.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { openSession, waitFor } from '../support/wire.js';
import { recordsText } from '../support/recorded.js';
import { corpus, corpusPolicies, CORPUS_SCHEMA as SCHEMA, type CorpusEntry, type CorpusOutcome, type CorpusPolicyName } from './corpus.js';

type Protocol = 'simple' | 'extended';
type Decision = { credential_id: string; sql: string; event: string; decision_rule: string };
type Outcome = { code?: string; message?: string; severity?: string };

/** Every table's row count and content checksum, and a checksum of the schemas' objects (tables, columns, indexes, functions, sequences). */
const STATE = `
  select n.nspname || '.' || c.relname as name, c.relkind::text as kind, a.columns
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  left join lateral (select string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' order by attnum) as columns
    from pg_attribute where attrelid = c.oid and attnum > 0 and not attisdropped) a on true
  where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
  union all
  select n.nspname || '.' || p.proname, 'function', pg_get_function_arguments(p.oid)
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname not in ('pg_catalog', 'information_schema')
  order by 1, 2`;

/**
 * Allowed by the policy, rejected by PostgreSQL whatever the schema: the proxy must forward them
 * and relay PostgreSQL's error. The SQLSTATE is given per protocol.
 */
const UPSTREAM_ERRORS: Readonly<Record<string, Partial<Record<Protocol, string>>>> = {
  // missing FROM-clause entry for table "a"
  'SELECT id FROM accounts WHERE a.recovery_code IS NULL': { simple: '42P01', extended: '42P01' },
  // cross-database references are not implemented
  'SELECT * FROM prod.public.orders': { simple: '0A000', extended: '0A000' },
  // column reference "id" is ambiguous: both tables have one, and the first entry naming analytics.daily_revenue needs its id
  'SELECT id FROM analytics.daily_revenue d JOIN orders o ON o.created_at::date = d.day': { simple: '42702', extended: '42702' },
  // a simple query has no parameters (the extended protocol binds PARAMETERS)
  'SELECT id FROM orders WHERE total > $1 AND customer_id = $2': { simple: '42P02' },
  // SAVEPOINT can only be used in transaction blocks
  'SAVEPOINT s1; ROLLBACK TO SAVEPOINT s1; RELEASE s1': { simple: '25P01' },
};

/** Values bound on the extended protocol. */
const PARAMETERS: Readonly<Record<string, readonly unknown[]>> = { 'SELECT id FROM orders WHERE total > $1 AND customer_id = $2': [100, 1] };

/** The proxy decides under the default search_path, which a client cannot change (SET search_path is refused). */
const reproducible = (entry: CorpusEntry): boolean => entry.searchPath === undefined || entry.searchPath.join() === DEFAULT_SEARCH_PATH.join();

const SQLSTATE_OF_RULE: Readonly<Record<string, string>> = { 'parse.error': '42601', 'parse.too_large': '54000', 'parse.unsupported': '0A000' };

/**
 * On the wire a string ends at its first NUL, so an entry holding one arrives as a malformed
 * message (bytes after the string's end): a protocol violation, 08P01, before any statement exists
 * to decide. PostgreSQL answers such a message with 08P01 "invalid message format".
 */
const malformedOnTheWire = (entry: CorpusEntry): boolean => entry.sql.includes('\u0000');

/** The SQLSTATE the client must see: 08P01 for a malformed message, the refusal's, PostgreSQL's for the entries above, 42601 for several statements in one Parse, else none. */
function expectedCode(entry: CorpusEntry, protocol: Protocol): string | undefined {
  if (malformedOnTheWire(entry)) return '08P01';
  const expected = outcomeOf(entry);
  if (expected.action === 'refuse') return SQLSTATE_OF_RULE[expected.rule] ?? '42501';
  const upstream = UPSTREAM_ERRORS[entry.sql]?.[protocol];
  if (upstream) return upstream;
  return protocol === 'extended' && statementCount(entry.sql) > 1 ? '42601' : undefined;
}

/** The proxy decides on the upstream catalog it reads, so an entry's outcome is the one with the catalog. */
const outcomeOf = (entry: CorpusEntry): CorpusOutcome => entry.withCatalog ?? entry.expect;

function statementCount(sql: string): number {
  const parsed = parseStatements(sql);
  return parsed.ok ? parsed.statements.length : 1;
}

interface Session {
  client: pg.Client;
  ended: () => boolean;
  /** Everything the proxy sent since the last entry started. */
  received: Buffer[];
}

let gateway: TestGateway;
let upstream: pg.Client;
let stateBefore: unknown[];
const credentials = new Map<CorpusPolicyName, { id: string; url: string }>();
const sessions = new Map<string, Session>();
/** Per policy, the raw values of its masked columns. */
const maskedValues = new Map<CorpusPolicyName, string[]>();
/** Per credential, how many of its published decisions the entries have accounted for. */
const consumed = new Map<string, number>();

async function post<T>(url: string, payload: Record<string, unknown>): Promise<T> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}${url}`, payload });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as T;
}

/** Plants the corpus's canaries as honeytokens that never disable, so the shared credentials stay usable. */
async function plantCanaries(): Promise<Map<string, string>> {
  const canaries = Object.values(corpusPolicies).flatMap((policy) => policy.canaries);
  const planted = new Map<string, string>();
  for (const canary of canaries) {
    if (!planted.has(canary.honeytoken_id)) planted.set(canary.honeytoken_id, (await post<{ id: string }>('/honeytokens', { kind: canary.kind, target: canary.target, disable_credential: false })).id);
  }
  return planted;
}

async function registerPolicies(): Promise<void> {
  const planted = await plantCanaries();
  for (const [name, policy] of Object.entries(corpusPolicies) as [CorpusPolicyName, (typeof corpusPolicies)[CorpusPolicyName]][]) {
    const { canaries, hash_key: _key, ...rules } = policy;
    const created = await post<{ id: string }>('/policies', { name, ...rules, honeytokens: canaries.map((canary) => planted.get(canary.honeytoken_id)) });
    const agent = await post<{ credential: { id: string }; connection_string: string }>('/agents', { name, policy_profile_id: created.id });
    credentials.set(name, { id: agent.credential.id, url: agent.connection_string });
    maskedValues.set(name, await rawValues(Object.keys(policy.masked_columns)));
  }
}

async function rawValues(columns: readonly string[]): Promise<string[]> {
  const values: string[] = [];
  for (const column of columns) {
    const [schema, table, name] = column.split('.').map((part) => pg.escapeIdentifier(part));
    const { rows } = await upstream.query<{ value: string }>(`select distinct ${name}::text as value from ${schema}.${table} where ${name} is not null`);
    values.push(...rows.map((row) => row.value));
  }
  return values;
}

async function upstreamState(): Promise<unknown[]> {
  const { rows } = await upstream.query<{ name: string; kind: string }>(STATE);
  const tables = rows.filter((row) => row.kind === 'r');
  for (const table of tables) {
    const [schema, name] = table.name.split('.').map((part) => pg.escapeIdentifier(part));
    const { rows: content } = await upstream.query(`select count(*)::int as rows, md5(coalesce(string_agg(t::text, ',' order by t::text), '')) as md5 from ${schema}.${name} t`);
    Object.assign(table, content[0]);
  }
  const { rows: sequences } = await upstream.query('select schemaname, sequencename, last_value from pg_sequences order by 1, 2');
  return [...rows, ...sequences];
}

/** The session of a policy on a protocol, reconnected when the proxy ended the last one. */
async function sessionOf(policy: CorpusPolicyName, protocol: Protocol): Promise<Session> {
  const key = `${policy}/${protocol}`;
  const open = sessions.get(key);
  if (open && !open.ended()) return open;
  const received: Buffer[] = [];
  const socket = new Socket();
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  const session = { ...(await openSession(credentials.get(policy)!.url, { stream: () => socket })), received };
  sessions.set(key, session);
  return session;
}

async function send(session: Session, entry: CorpusEntry, index: number, protocol: Protocol): Promise<Outcome> {
  const query = protocol === 'simple' ? entry.sql : { name: `corpus_${index}`, text: entry.sql, values: [...(PARAMETERS[entry.sql] ?? [])] };
  return session.client.query(query).then(
    () => ({}),
    (error: { code?: string; message: string; severity?: string }) => ({ code: error.code, message: error.message, severity: error.severity }),
  );
}

/**
 * Runs one entry. An allowed entry of the write-capable policy runs inside a transaction that is
 * rolled back, so its writes do not count as changes; every other entry runs as sent, and a
 * transaction it leaves open is rolled back afterwards.
 */
async function run(entry: CorpusEntry, index: number, protocol: Protocol): Promise<{ outcome: Outcome; received: Buffer }> {
  const session = await sessionOf(entry.policy, protocol);
  session.received.length = 0;
  const contained = !corpusPolicies[entry.policy].read_only && outcomeOf(entry).action === 'allow';
  if (contained) await session.client.query('BEGIN');
  const outcome = await send(session, entry, index, protocol);
  if (outcome.severity === 'FATAL') await waitFor(session.ended, 2000, 'the session to end after a FATAL error');
  else if (session.client.getTransactionStatus() !== 'I') await session.client.query('ROLLBACK');
  return { outcome, received: Buffer.concat(session.received) };
}

const HARNESS_STATEMENTS = new Set(['BEGIN', 'ROLLBACK']);

/**
 * The decision published for an entry: the next decision of its credential with its text. Only the
 * harness's own BEGIN and ROLLBACK and migration_flagged progress rows may come before it.
 */
async function decisionOf(entry: CorpusEntry): Promise<Decision> {
  const credentialId = credentials.get(entry.policy)!.id;
  const from = consumed.get(credentialId) ?? 0;
  // A text longer than an entry keeps is recorded abridged, naming its digest.
  const isEntry = (d: Decision) => recordsText(d.sql, entry.sql) && d.event !== 'migration_flagged';
  await waitFor(() => unaccounted(credentialId).some(isEntry), 3000, `the decision on ${entry.sql.slice(0, 60)}`);
  const published = unaccounted(credentialId);
  const at = published.findIndex(isEntry);
  consumed.set(credentialId, from + at + 1);
  expect(unexpected(published.slice(0, at))).toEqual([]);
  return published[at]!;
}

/** A credential's published decisions that no entry has accounted for yet. */
function unaccounted(credentialId: string): Decision[] {
  const all = gateway.decisions.map((record) => record.decision as Decision | undefined).filter((d): d is Decision => d?.credential_id === credentialId);
  return all.slice(consumed.get(credentialId) ?? 0);
}

const unexpected = (decisions: readonly Decision[]): Decision[] => decisions.filter((d) => !HARNESS_STATEMENTS.has(d.sql) && d.event !== 'migration_flagged');

const cases = corpus.flatMap((entry, index) => (reproducible(entry) ? [[index, entry.family, entry.sql.slice(0, 80).replace(/\p{Cc}/gu, ' '), entry] as const] : []));

beforeAll(async () => {
  await loadParser();
  gateway = await startGateway('corpus');
  upstream = new pg.Client({ connectionString: gateway.upstream.url });
  await upstream.connect();
  await upstream.query(SCHEMA);
  await registerPolicies();
  stateBefore = await upstreamState();
});
afterAll(async () => {
  await Promise.all([...sessions.values()].map((session) => session.client.end()));
  await upstream?.end();
  await gateway?.stop();
});

describe.each(['simple', 'extended'] as const)('the corpus through the proxy, %s protocol', (protocol) => {
  it.each(cases)('#%i %s: %s', async (index, _family, _sql, entry) => {
    const { outcome, received } = await run(entry, index, protocol);
    expect(maskedValues.get(entry.policy)!.filter((value) => received.includes(value))).toEqual([]);
    // A malformed message is decided by no one; the next entry's decision proves none was published for it.
    const decision = malformedOnTheWire(entry) ? undefined : await decisionOf(entry);
    expect(outcome.code, outcome.message).toBe(expectedCode(entry, protocol));
    if (!decision) return;
    const expected = outcomeOf(entry);
    if (expected.action === 'refuse' && expected.event !== 'canary_tripped') expect(outcome.message).toContain(`(rule ${expected.rule})`);
    const event = expected.event ?? (expected.action === 'refuse' ? 'blocked' : 'query');
    expect({ event: decision.event, rule: decision.decision_rule }).toEqual({ event, rule: expected.rule });
  });
});

describe('afterwards', () => {
  it('the upstream is unchanged: every table, its rows, the schema objects and the sequences', async () => {
    expect(await upstreamState()).toEqual(stateBefore);
  });

  it('every decision published belongs to an entry or to the harness', () => {
    expect([...credentials.values()].flatMap((credential) => unexpected(unaccounted(credential.id)))).toEqual([]);
  });

  it('no decision on the bus carries a masked value', () => {
    const published = JSON.stringify(gateway.decisions);
    expect([...maskedValues.values()].flat().filter((value) => published.includes(value))).toEqual([]);
  });
});
