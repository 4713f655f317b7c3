/**
 * `*` written out from the catalog, checked against PostgreSQL itself: for generated FROM clauses
 * (tables, aliases, alias lists, subqueries with and without a column list, joins ON, USING,
 * NATURAL and CROSS), whatever
 * PostgreSQL accepts, the gateway either refuses or runs a rewrite that returns the same column
 * names and types, the same rows in every unmasked column, and no raw masked value.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadParser } from '../../proxy/policy/parser.js';
import { decideSql } from '../../proxy/policy/policy.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';
import { CORPUS_HASH_KEY } from '../security/corpus.js';
import { handCatalog } from '../support/catalog.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const COLUMNS = { customers: ['id', 'name', 'email', 'ssn'], orders: ['id', 'customer_id', 'amount'], tags: ['id', 'label'] } as const;
const catalog = handCatalog(Object.fromEntries(Object.entries(COLUMNS).map(([table, columns]) => [`public.${table}`, columns])));
const MASKS = { email: 'redact', ssn: 'hash' } as const;
const policy: PolicyRules = {
  read_only: true,
  allowed_tables: ['public.customers', 'public.orders', 'public.tags'],
  masked_columns: { 'public.customers.email': MASKS.email, 'public.customers.ssn': MASKS.ssn },
  allow_catalog: false,
  canaries: [],
  hash_key: CORPUS_HASH_KEY,
};
const RAW = /@corp\.example|\d{3}-\d{2}-\d{4}/;

let database: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  await loadParser();
  database = await freshDatabase('policy_star');
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(`
    create table customers (id int primary key, name text, email text, ssn text);
    insert into customers values (1, 'Ann', 'ann@corp.example', '111-11-1111'), (2, 'Bo', 'bo@corp.example', '222-22-2222');
    create table orders (id int primary key, customer_id int, amount numeric);
    insert into orders values (1, 1, 10.00), (2, 2, 20.50), (3, 1, 7.25);
    create table tags (id int primary key, label text);
    insert into tags values (1, 'vip'), (3, 'new');`);
});

afterAll(async () => {
  await client?.end();
  await database?.drop();
});

type Table = keyof typeof COLUMNS;
const table = fc.constantFrom<Table>('customers', 'orders', 'tags');

/** One FROM item: a table, aliased or not, possibly with an alias list, or a subquery over one. */
const item = fc.oneof(
  fc.record({ kind: fc.constant('table' as const), table, alias: fc.constantFrom('', 'a', 'b'), renames: fc.constantFrom(0, 1, 2) }),
  fc.record({ kind: fc.constant('subquery' as const), table, alias: fc.constantFrom('s', 'q'), named: fc.boolean() }),
);
type Item = typeof item extends fc.Arbitrary<infer T> ? T : never;

function itemSql(from: Item, n: number): string {
  if (from.kind === 'subquery') return `(select ${from.named ? COLUMNS[from.table].join(', ') : '*'} from ${from.table}) ${from.alias}${n}`;
  if (!from.alias) return from.table;
  const renames = from.renames > 0 ? `(${['x', 'y'].slice(0, from.renames).map((name) => `${name}${n}`).join(', ')})` : '';
  return `${from.table} as ${from.alias}${n}${renames}`;
}

const join = fc.constantFrom('on true', 'using (id)', 'natural', 'cross', 'comma');

function fromSql(left: Item, how: string, right: Item | null): string {
  const l = itemSql(left, 1);
  if (!right) return l;
  const r = itemSql(right, 2);
  if (how === 'natural') return `${l} natural join ${r}`;
  if (how === 'cross') return `${l} cross join ${r}`;
  if (how === 'comma') return `${l}, ${r}`;
  return `${l} join ${r} ${how}`;
}

async function run(sql: string): Promise<pg.QueryArrayResult | Error> {
  return client.query({ text: sql, rowMode: 'array' }).catch((error: Error) => error);
}

describe('* over generated FROM clauses', () => {
  it('is refused, or returns what PostgreSQL returns with the masked columns masked', async () => {
    let rewritten = 0;
    await fc.assert(
      fc.asyncProperty(item, join, fc.option(item, { nil: null }), fc.constantFrom('*', 'first.*'), async (left, how, right, star) => {
        const from = fromSql(left, how, right);
        const qualifier = left.kind === 'subquery' || left.alias ? `${left.alias}1` : left.table;
        const sql = `select ${star === '*' ? '*' : `${qualifier}.*`} from ${from}`;
        const raw = await run(sql);
        if (raw instanceof Error) return;
        const [verdict] = decideSql(sql, policy, { catalog });
        const decision = verdict!.decision;
        if (decision.action === 'refuse') {
          expect(decision.rule, `${sql}: ${decision.reason}`).toMatch(/^masked_columns\./);
          return;
        }
        const masked = await run(decision.sql);
        if (masked instanceof Error) throw new Error(`${sql} ran as ${decision.sql}: ${masked.message}`);
        rewritten += decision.sql === sql ? 0 : 1;
        expect(masked.fields.map((field) => [field.name, field.dataTypeID]), `${sql} ran as ${decision.sql}`).toEqual(raw.fields.map((field) => [field.name, field.dataTypeID]));
        expect(masked.rows.length).toBe(raw.rows.length);
        expect(JSON.stringify(masked.rows), decision.sql).not.toMatch(RAW);
        // Columns holding raw masked values are masked; every other column has the same values (in any row order).
        const plainColumns = raw.fields.map((_, index) => index).filter((index) => !raw.rows.some((row) => typeof row[index] === 'string' && RAW.test(row[index] as string)));
        const rowsOf = (rows: unknown[][]) => rows.map((row) => JSON.stringify(plainColumns.map((index) => row[index]))).sort();
        expect(rowsOf(masked.rows), decision.sql).toEqual(rowsOf(raw.rows));
      }),
      { numRuns: 300 },
    );
    expect(rewritten).toBeGreaterThan(20);
  });
});
