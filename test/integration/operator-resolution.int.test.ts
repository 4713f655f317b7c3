/**
 * Operator qualification against the real PostgreSQL: a database defines operators that shadow
 * built-in names with better-matching signatures (one reads a secret, one writes a row). The
 * analyzer gets a catalog snapshot read from that database (which operator names are defined
 * outside pg_catalog) and the statement it allows must run pg_catalog's operators only.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement, type AnalysisSession } from '../../proxy/policy/analyze.js';
import { decidePolicy, type PolicyDecision } from '../../proxy/policy/decide.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import type { UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const SECRET = 'OPERATOR-SECRET-51c2';
const policy: PolicyRules = { read_only: true, allowed_tables: ['public.orders'], masked_columns: {}, allow_catalog: false, canaries: [] };

let database: TestDatabase;
let client: pg.Client;
let session: AnalysisSession;

beforeAll(async () => {
  await loadParser();
  database = await freshDatabase('operator_resolution');
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(`create table orders (id int primary key, note text); insert into orders values (1, 'a1'), (2, 'b2');
    create table secrets (token text); insert into secrets values ('${SECRET}'); create table sink (v text);
    create function leak_eq(text, integer) returns boolean language sql security definer as $$ select (select token from secrets) is not null $$;
    create operator public.= (leftarg = text, rightarg = integer, function = leak_eq);
    create function sink_like(text, integer) returns boolean language sql as $$ insert into sink values ($1) returning true $$;
    create operator public.~~ (leftarg = text, rightarg = integer, function = sink_like);`);
  const { rows } = await client.query<{ name: string; schemas: string[] }>(
    `select oprname as name, array_agg(distinct nspname::text) as schemas from pg_operator o join pg_namespace n on n.oid = o.oprnamespace where nspname <> 'pg_catalog' group by oprname`,
  );
  const shadowed = new Map(rows.map((row) => [row.name, row.schemas]));
  const catalog: UpstreamCatalog = { version: 'snapshot', relation: () => undefined, functionSchemas: () => [], operatorSchemas: (name) => shadowed.get(name) ?? [] };
  session = { catalog };
});

afterAll(async () => {
  await client?.end();
  await database?.drop();
});

function decide(sql: string): PolicyDecision {
  const parsed = parseStatements(sql);
  if (!parsed.ok) throw new Error(`${sql} does not parse`);
  return decidePolicy(analyzeStatement(parsed.statements[0]!, session), policy, session);
}

async function runAllowed(sql: string): Promise<{ rows: unknown[] } | { code: string | undefined }> {
  const decision = decide(sql);
  if (decision.action !== 'allow') throw new Error(`${sql} refused: ${decision.reason}`);
  return client.query(decision.sql).then(
    (result) => ({ rows: result.rows }),
    (error: { code?: string }) => ({ code: error.code }),
  );
}

describe('operators shadowed by the database', () => {
  it('run as written they would call the database-defined functions (the fixture works)', async () => {
    expect((await client.query("select note = 1 as hit from orders where id = 1")).rows).toEqual([{ hit: true }]);
    await client.query('truncate sink');
  });

  it('the allowed statement runs pg_catalog’s operators: no operator text = integer exists there (42883)', async () => {
    for (const sql of ['select note = 1 as hit from orders', 'select id from orders where note like 1', 'select id from orders where note = any (array[1])', 'select id from orders where note not like 2']) {
      expect(await runAllowed(sql), sql).toEqual({ code: '42883' });
    }
    expect((await client.query('select count(*)::int as n from sink')).rows).toEqual([{ n: 0 }]);
  });

  it('built-in comparisons still give their results', async () => {
    expect(await runAllowed("select id from orders where note = 'a1' or note like 'b%' order by id")).toEqual({ rows: [{ id: 1 }, { id: 2 }] });
    expect(await runAllowed('select id from orders where id in (select id from orders where id = 2)')).toEqual({ rows: [{ id: 2 }] });
  });

  it('forms with no qualified syntax are refused, naming what to write', () => {
    for (const sql of ['select id from orders where note in (1, 2)', 'select nullif(note, 1) from orders', "select case note when 1 then 'x' end from orders"]) {
      expect(decide(sql), sql).toMatchObject({ action: 'refuse', rule: 'read_only.function', reason: expect.stringContaining('is also defined in schema public') });
    }
  });
});
