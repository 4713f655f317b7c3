import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import { describeConstruct } from '../../proxy/policy/constructs.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { decideStatement } from '../../proxy/policy/hook.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import type { UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import { corpus, corpusPolicies } from '../security/corpus.js';

beforeAll(loadParser);

/** The red team's fixture: orders and customers, email and ssn redacted. */
const readOnly: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.orders', 'public.customers'],
  masked_columns: { 'public.customers.email': 'redact', 'public.customers.ssn': 'redact' },
  allow_catalog: false,
  canaries: [],
};
const writable: PolicyRules = { ...readOnly, read_only: false, allowed_tables: ['public.orders'], masked_columns: {} };

/** A catalog where `public` defines operators `=`, `<`, `~~` and `===`, as a database may, and `orders` and `customers` have no inheritance children. */
const shadowed: UpstreamCatalog = {
  version: 'v1',
  relation: (name) => (name.schema === 'public' && ['orders', 'customers'].includes(name.name) ? { kind: 'table', columns: ['id', 'amount', 'note'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] } : undefined),
  functionSchemas: (name) => (name === 'md5' || name === 'lower' ? ['public'] : []),
  operatorSchemas: (name) => (['=', '<', '~~', '==='].includes(name) ? ['public'] : name === '>' ? ['private'] : []),
};

function decide(sql: string, policy: PolicyRules = readOnly, session: AnalysisSession = {}): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(`${sql} does not parse`);
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
}

const ran = (sql: string, policy?: PolicyRules, session?: AnalysisSession): string | undefined => {
  const decision = decide(sql, policy, session);
  return decision.action === 'allow' ? decision.sql : `refused ${decision.rule}: ${decision.reason}`;
};

describe('function resolution', () => {
  it('forwards unqualified vetted calls pg_catalog-qualified, so no overload on the search path can run instead', () => {
    expect(ran('select md5(1)')).toBe('SELECT pg_catalog.md5(1)');
    expect(ran('select lower(5)')).toBe('SELECT pg_catalog.lower(5)');
    expect(ran("SELECT id FROM orders WHERE lower(note) = 'x' ORDER BY upper(note)")).toBe(
      "SELECT id FROM orders WHERE pg_catalog.lower(note) = 'x' ORDER BY pg_catalog.upper(note)",
    );
  });

  it('qualifies aggregates, window functions, FROM functions, filters and ordered sets', () => {
    expect(
      ran(
        'SELECT count(*) FILTER (WHERE amount > 1), sum(amount) OVER (PARTITION BY customer_id ORDER BY id), percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), row_number() OVER () FROM orders GROUP BY id HAVING max(amount) > 0',
      ),
    ).toBe(
      'SELECT pg_catalog.count(*) FILTER (WHERE amount > 1), pg_catalog.sum(amount) OVER (PARTITION BY customer_id ORDER BY id), pg_catalog.percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), pg_catalog.row_number() OVER () FROM orders GROUP BY id HAVING pg_catalog.max(amount) > 0',
    );
    expect(ran('SELECT g FROM generate_series(1, 3) g')).toBe('SELECT g FROM pg_catalog.generate_series(1, 3) AS g');
    expect(ran('SELECT (SELECT max(id) FROM orders), EXISTS (SELECT 1 FROM orders WHERE abs(id) = 1)')).toBe(
      'SELECT (SELECT pg_catalog.max(id) FROM orders), EXISTS (SELECT 1 FROM orders WHERE pg_catalog.abs(id) = 1)',
    );
  });

  it('qualifies calls in DDL, COPY and EXPLAIN operands', () => {
    expect(ran('ALTER TABLE orders ALTER COLUMN amount TYPE text USING md5(1)', writable)).toBe(
      'ALTER TABLE orders ALTER COLUMN amount TYPE text USING pg_catalog.md5(1)',
    );
    expect(ran("ALTER TABLE orders ADD COLUMN tag text DEFAULT lower('X') CHECK (length(tag) < 9)", writable)).toContain("DEFAULT pg_catalog.lower('X')");
    expect(ran("ALTER TABLE orders ADD COLUMN tag text DEFAULT lower('X') CHECK (length(tag) < 9)", writable)).toContain('CHECK (pg_catalog.length(tag) < 9)');
    expect(ran('CREATE INDEX ON orders (lower(note))', writable)).toBe('CREATE INDEX ON orders ((pg_catalog.lower(note)))');
    expect(ran('COPY (SELECT md5(note) FROM orders) TO STDOUT')).toBe("COPY (SELECT pg_catalog.md5(note) FROM orders) TO STDIN"); // the deparser spells STDOUT so; both are a null file name
    expect(ran('EXPLAIN SELECT lower(note) FROM orders')).toBe('EXPLAIN SELECT pg_catalog.lower(note) FROM orders');
    expect(ran('SELECT lower(7)', writable)).toBe('SELECT pg_catalog.lower(7)');
  });

  it('qualifies calls around masked columns, which are masked as before', () => {
    expect(ran('SELECT lower(email) FROM customers')).toBe("SELECT pg_catalog.lower('[redacted]'::text) FROM customers");
  });

  it('refuses functions of other schemas, naming the rule and why', () => {
    expect(decide('SELECT public.md5(1)')).toMatchObject({
      action: 'refuse',
      rule: 'read_only.function',
      reason:
        'function public.md5 is not a built-in (pg_catalog) function (rule read_only.function). Only side-effect-free built-in functions run: arithmetic, string, date/time, JSON, array, text search, aggregate and window functions.',
    });
    expect(decide('SELECT public.lower(7)', writable)).toMatchObject({ action: 'refuse', rule: 'function.not_allowed' });
  });

  it('suggests a vetted alternative where there is one', () => {
    expect(decide('SELECT ifnull(note, 1) FROM orders')).toMatchObject({
      rule: 'read_only.function',
      reason: 'function ifnull is not on the vetted function list (rule read_only.function). Use coalesce(a, b) instead.',
    });
    expect(decide("SELECT group_concat(note) FROM orders")).toMatchObject({ reason: expect.stringContaining("Use string_agg(x, ',') instead.") });
  });
});

describe('analyst functions', () => {
  it('allows current_setting of settings SHOW may read, named by a constant', () => {
    expect(ran("SELECT current_setting('TimeZone')")).toBe("SELECT pg_catalog.current_setting('TimeZone')");
    expect(ran("SELECT current_setting('server_version_num', true)")).toBe("SELECT pg_catalog.current_setting('server_version_num', true)");
    for (const sql of ["SELECT current_setting('app.secret')", "SELECT current_setting('data_directory')", 'SELECT current_setting(note) FROM orders']) {
      expect(decide(sql)).toMatchObject({ action: 'refuse', rule: 'read_only.function', reason: expect.stringContaining('reads only settings SHOW may read, named by a constant (rule read_only.function)') });
    }
  });

  it('allows JSON record functions with column definitions and allowed row types', () => {
    expect(ran(`SELECT * FROM jsonb_to_recordset('[{"a":1,"b":"x"}]') AS x(a int, b text)`)).toBe(
      `SELECT * FROM pg_catalog.jsonb_to_recordset('[{"a":1,"b":"x"}]') x (a int, b text)`,
    );
    expect(decide(`SELECT * FROM jsonb_populate_record(null::orders, '{"id": 1}')`)).toMatchObject({ action: 'allow', tablesRead: ['public.orders'] });
    expect(decide(`SELECT * FROM jsonb_populate_record(null::secrets, '{}')`)).toMatchObject({
      action: 'refuse',
      rule: 'allowed_tables.not_allowed',
      reason: expect.stringContaining('table public.secrets (named as the type name secrets: only built-in types and allowed tables’ row types may be used'.replace('’', "'")),
    });
    expect(decide(`SELECT * FROM jsonb_to_record('{}') AS x(a private.secret_type)`)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed' });
  });

  it('allows text search with built-in configurations only', () => {
    expect(ran("SELECT to_tsvector('english', note) @@ plainto_tsquery('english', 'late') FROM orders")).toBe(
      "SELECT pg_catalog.to_tsvector('english', note) @@ pg_catalog.plainto_tsquery('english', 'late') FROM orders",
    );
    expect(decide("SELECT to_tsquery('pg_catalog.simple', 'a'), 'english'::regconfig, ts_rank(to_tsvector(note), to_tsquery('a')) FROM orders")).toMatchObject({ action: 'allow' });
    expect(decide("SELECT to_tsvector('private.cfg', 'a')")).toMatchObject({
      action: 'refuse',
      rule: 'read_only.function',
      reason: expect.stringContaining("Pass a built-in configuration as a constant: to_tsvector('english', ...)"),
    });
    expect(decide("SELECT to_tsvector('private.cfg'::regconfig, 'a')")).toMatchObject({ action: 'refuse', rule: 'allowed_tables.catalog' });
  });

  it('allows the functions SQL syntax calls: LIKE ... ESCAPE, SIMILAR TO, OVERLAPS', () => {
    expect(decide("SELECT id FROM orders WHERE note LIKE 'a!%' ESCAPE '!' OR note SIMILAR TO 'b%' OR (now(), now()) OVERLAPS (now(), now())")).toMatchObject({ action: 'allow' });
  });

  it('allows named arguments and pg_size_pretty', () => {
    expect(ran('SELECT make_interval(days => 3)')).toBe('SELECT pg_catalog.make_interval(days => 3)');
    expect(ran('SELECT pg_size_pretty(1024::bigint)')).toBe('SELECT pg_catalog.pg_size_pretty(CAST(1024 AS bigint))');
  });
});

describe('reg* types and lookups are catalog reads', () => {
  const spellings = [
    "SELECT 'public.secrets'::regclass::oid",
    "SELECT 'private.nonexistent'::regclass",
    'SELECT g::oid::regclass FROM generate_series(16384, 16500) g',
    "SELECT CAST('public.secrets' AS regclass)",
    "SELECT regclass 'public.secrets'",
    "SELECT '{public.secrets}'::regclass[]",
    "SELECT 'public.secrets'::pg_catalog.regclass",
    "SELECT 'now()'::regprocedure, 'md5'::regproc, 'int4'::regtype, 'public'::regnamespace, 'postgres'::regrole",
    "SELECT '+'::regoper, '+(int,int)'::regoperator, 'simple'::regdictionary, 'C'::regcollation",
    "SELECT 'private.cfg'::regconfig",
    "SELECT to_regclass('public.secrets')",
    "SELECT to_regtype('private.t'), to_regnamespace('private')",
    'SELECT tableoid::regclass FROM orders',
  ];
  it.each(spellings)('%s is refused without allow_catalog', (sql) => {
    const decision = decide(sql);
    expect(decision).toMatchObject({ action: 'refuse', rule: 'allowed_tables.catalog', sqlstate: '42501' });
    expect(decision.reason).toMatch(/^pg_catalog\.pg_\w+ is a system catalog read by (a cast to reg\w+|to_reg\w+\(\)) \(it looks names up in the catalog\) and this credential may not read system catalogs \(rule allowed_tables\.catalog\)\. Compare names as text, or ask for a policy with allow_catalog\.$/);
  });

  it('pg_typeof runs as text, so comparing it with a constant looks no type name up', () => {
    expect(ran("SELECT pg_typeof(id) FROM orders WHERE pg_typeof(lower(note)) = 'private.t'")).toBe(
      "SELECT (pg_catalog.pg_typeof(id))::text FROM orders WHERE (pg_catalog.pg_typeof(pg_catalog.lower(note)))::text = 'private.t'",
    );
  });

  it('allows them with allow_catalog, except role names from pg_authid', () => {
    const catalog = { ...readOnly, allow_catalog: true };
    expect(decide("SELECT 'public.secrets'::regclass::oid, to_regclass('x')", catalog)).toMatchObject({ action: 'allow', tablesRead: ['pg_catalog.pg_class'] });
    expect(decide("SELECT 'postgres'::regrole", catalog)).toMatchObject({ action: 'allow', tablesRead: ['pg_catalog.pg_roles'] });
  });
});

describe('casts', () => {
  it('allows built-in types, qualified when pg_catalog is not searched first', () => {
    expect(decide("SELECT '1'::int, '2'::numeric(10,2), '{}'::jsonb, now()::date, 'x'::text[], interval '1 day'")).toMatchObject({ action: 'allow' });
    expect(decide("SELECT '1'::text", readOnly, { searchPath: ['public', 'pg_catalog'] })).toMatchObject({
      rule: 'parse.unsupported',
      reason: expect.stringContaining('the type name text while the search_path lists a schema before pg_catalog (write pg_catalog.text)'),
    });
    expect(ran("SELECT lower('1'::pg_catalog.text), '{}'::pg_catalog.jsonb")).toBe("SELECT pg_catalog.lower('1'::text), '{}'::jsonb");
  });

  it('refuses domains, enums and other types outside pg_catalog as tables not allowed', () => {
    expect(decide("SELECT 'x'::public.evil_domain")).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed', tablesBlocked: ['public.evil_domain'] });
    expect(decide("SELECT 'x'::mood")).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed', tablesBlocked: ['public.mood'] });
    expect(decide('SELECT null::pg_authid')).toMatchObject({ action: 'refuse', rule: 'allowed_tables.catalog' });
    expect(decide('ALTER TABLE orders ADD COLUMN m evil_domain', writable)).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed' });
    expect(decide('CREATE TABLE orders2 (id serial, note text)', { ...writable, allowed_tables: ['public.*'] })).toMatchObject({ action: 'allow' });
  });
});

describe('operators', () => {
  const session: AnalysisSession = { catalog: shadowed };

  it('keeps operators as written without a catalog', () => {
    expect(ran('SELECT id FROM orders WHERE id = 1 AND note LIKE $1')).toBe('SELECT id FROM orders WHERE id = 1 AND note LIKE $1');
  });

  it('qualifies operators the catalog says are shadowed, where the syntax allows', () => {
    expect(ran("SELECT id FROM orders WHERE id = 1 AND amount > 2 AND note LIKE 'a%'", readOnly, session)).toBe(
      "SELECT id FROM orders WHERE id OPERATOR(pg_catalog.=) 1 AND amount > 2 AND note OPERATOR(pg_catalog.~~) 'a%'",
    );
    expect(ran('SELECT id FROM orders WHERE id = ANY (ARRAY[1, 2]) AND (id, amount) < (3, 4)', readOnly, session)).toBe(
      'SELECT id FROM orders WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY[1, 2]) AND (id, amount) OPERATOR(pg_catalog.<) (3, 4)',
    );
    expect(ran('SELECT id FROM orders WHERE id IN (SELECT id FROM customers)', readOnly, session)).toBe(
      'SELECT id FROM orders WHERE id OPERATOR(pg_catalog.=) ANY (SELECT id FROM customers)',
    );
    expect(ran('SELECT id FROM orders WHERE id > 1', readOnly, { catalog: shadowed, searchPath: ['public'] })).toBe('SELECT id FROM orders WHERE id > 1');
  });

  it('refuses constructs with no syntax for a qualified operator, saying what to write', () => {
    expect(decide('SELECT id FROM orders WHERE id BETWEEN 1 AND 2', readOnly, session)).toMatchObject({ action: 'allow' });
    const cases: [string, string][] = [
      ['SELECT id FROM orders WHERE id IN (1, 2)', 'Write x OPERATOR(pg_catalog.=) ANY (ARRAY[...]) instead.'],
      ['SELECT id FROM orders WHERE id NOT BETWEEN 1 AND 2', 'Write x OPERATOR(pg_catalog.<) low OR x OPERATOR(pg_catalog.>) high instead.'],
      ['SELECT id FROM orders WHERE id IS DISTINCT FROM 1', 'Compare with OPERATOR(pg_catalog.=) and IS NULL instead.'],
      ['SELECT nullif(id, 1) FROM orders', 'Write CASE WHEN a OPERATOR(pg_catalog.=) b THEN NULL ELSE a END instead.'],
      ["SELECT CASE id WHEN 1 THEN 'a' END FROM orders", 'Write CASE WHEN x OPERATOR(pg_catalog.=) value THEN ...'],
      ['SELECT o.id FROM orders o JOIN customers c USING (id)', 'Join with ON a.x OPERATOR(pg_catalog.=) b.x instead.'],
      ['SELECT id FROM orders ORDER BY id USING <', 'Use ASC or DESC instead of USING.'],
    ];
    for (const [sql, instead] of cases) {
      const decision = decide(sql, readOnly, session);
      expect(decision, sql).toMatchObject({ action: 'refuse', rule: 'read_only.function', sqlstate: '42501' });
      expect(decision.reason, sql).toMatch(/^operator \S+ is also defined in schema public, so .+ could run a database-defined operator instead of the built-in one \(rule read_only\.function\)\. /);
      expect(decision.reason.endsWith(instead), sql).toBe(true);
    }
  });

  it('refuses operators of other schemas, however they are spelled', () => {
    expect(decide('SELECT 1 OPERATOR(public.===) 2')).toMatchObject({
      rule: 'read_only.function',
      reason: 'operator OPERATOR(public.===) is not on the vetted function list (rule read_only.function). Use built-in operators (pg_catalog), unqualified or as OPERATOR(pg_catalog.op).',
    });
    expect(decide('SELECT id FROM orders WHERE id OPERATOR(public.=) ANY (SELECT 1)')).toMatchObject({ rule: 'read_only.function' });
  });
});

describe('refusal messages', () => {
  it('name SQL constructs, not parser nodes, with a suggestion where one exists', () => {
    expect(decide("SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (a int PATH '$')) j")).toMatchObject({
      rule: 'parse.unsupported',
      sqlstate: '0A000',
      reason:
        'the statement uses JSON_TABLE, which the policy analyzer does not understand, so it is refused (rule parse.unsupported). Use jsonb_to_recordset(...) AS x(col type, ...) or jsonb_array_elements.',
    });
    expect(decide('SELECT id FROM orders TABLESAMPLE system_rows (10)').reason).toContain('TABLESAMPLE method system_rows (only SYSTEM and BERNOULLI are supported)');
    expect(decide("SELECT json_object('a': 1)").reason).toContain('JSON_OBJECT(...)');
    expect(decide('SELECT xmlelement(name a)').reason).toContain('an XML function');
  });

  it('turn parser names among words into SQL words', () => {
    expect(describeConstruct('ALTER TABLE AddInherit')).toEqual({ sql: 'ALTER TABLE ADD INHERIT' });
    expect(describeConstruct('CreateFunctionStmt')).toEqual({ sql: 'CREATE FUNCTION' });
    expect(describeConstruct('SelectStmt.someField')).toEqual({ sql: 'a form of SELECT the analyzer does not support' });
    expect(describeConstruct('A_Expr.kind')).toEqual({ sql: 'a form of an operator expression the analyzer does not support' });
    expect(describeConstruct('DECLARE ... WITH HOLD')).toEqual({ sql: 'DECLARE ... WITH HOLD' });
    expect(describeConstruct('RangeVar outside the analyzed clauses')).toEqual({ sql: 'a table name outside the analyzed clauses' });
  });

  it('never leak a parser node name, over the whole corpus', () => {
    for (const entry of corpus) {
      const parsed = parseStatements(entry.sql);
      if (!parsed.ok) continue;
      for (const statement of parsed.statements) {
        const policy = corpusPolicies[entry.policy];
        const decision = decidePolicy(analyzeStatement(statement, { searchPath: entry.searchPath }), policy, { searchPath: entry.searchPath });
        if (decision.action === 'refuse') expect(decision.reason, entry.sql).not.toMatch(/\b(?:[A-Z][a-z]+){2,}(?:Stmt|Expr|Clause)?\b|\b[A-Z][a-z]+[A-Z]\w*\.\w+/);
        if (decision.action === 'refuse') expect(decision.reason, entry.sql).toContain(`(rule ${decision.rule})`.replace(/^\(rule honeytoken\.\w+\)$/, ''));
      }
    }
  });
});

describe('shape cache of rewritten statements', () => {
  const credential = { credential_id: 'cred_fixture' } as CredentialRow;
  const policyRow = (): PolicyRow => ({ policy_id: 'pol_fixture', revision: 1, status: 'active', read_only: true, allowed_tables: readOnly.allowed_tables, masked_columns: readOnly.masked_columns, allow_catalog: false, max_rows: 50, honeytoken_ids: [] }) as unknown as PolicyRow;
  const context = (policy: PolicyRow) => ({ credential, policy, protocol: 'simple' as const, honeytokens: { canariesOf: () => [], tripped: () => undefined } });

  it('serves other numbers with the rewrite carrying them, as deciding afresh does', () => {
    const shared = policyRow();
    const texts = [
      'SELECT count(*), lower(note) FROM orders WHERE id > 5 AND amount < 007 LIMIT 10',
      'SELECT count(*), lower(note) FROM orders WHERE id > 123 AND amount < 9 LIMIT 3',
      'SELECT count(*), lower(note) FROM orders WHERE id > - 4 AND amount < 2.5 LIMIT 1',
      'SELECT lower(email), abs(id - 3) FROM customers WHERE id = 42',
      'SELECT lower(email), abs(id - 9) FROM customers WHERE id = 1',
      'SELECT md5(note) FROM orders OFFSET 3 LIMIT 3',
      'SELECT md5(note) FROM orders OFFSET 5 LIMIT 8',
    ];
    for (const sql of texts) expect(decideStatement(sql, context(shared)), sql).toEqual(decideStatement(sql, context(policyRow())));
    expect(decideStatement(texts[1]!, context(shared))).toMatchObject({ sql: 'SELECT pg_catalog.count(*), pg_catalog.lower(note) FROM orders WHERE id > 123 AND amount < 9 LIMIT 3' });
    expect(decideStatement(texts[6]!, context(shared))).toMatchObject({ sql: 'SELECT pg_catalog.md5(note) FROM orders LIMIT 8 OFFSET 5' });
  });
});
