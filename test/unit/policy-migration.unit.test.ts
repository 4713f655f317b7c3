import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { decidePolicy, SCHEMA_CHANGE } from '../../proxy/policy/decide.js';
import { migrationFindings } from '../../proxy/policy/migration.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import type { PolicyRules } from '../../proxy/policy/rules.js';

beforeAll(loadParser);

function stmtOf(sql: string) {
  const parsed = parseStatements(sql);
  if (!parsed.ok || parsed.statements.length !== 1) throw new Error(`not one statement: ${sql}`);
  return parsed.statements[0]!;
}

const rulesOf = (sql: string): string[] => migrationFindings(stmtOf(sql).stmt).map((finding) => finding.rule);

/** Each lock-heavy form, the rule it is flagged with, and its safe sibling (flagged with nothing). */
const FORMS: readonly [string, string, string][] = [
  ['CREATE INDEX orders_total ON orders (total)', 'migration_safety.create_index', 'CREATE INDEX CONCURRENTLY orders_total ON orders (total)'],
  ['CREATE UNIQUE INDEX orders_u ON public.orders (id)', 'migration_safety.create_index', 'CREATE UNIQUE INDEX CONCURRENTLY orders_u ON public.orders (id)'],
  ['DROP INDEX orders_total', 'migration_safety.drop_index', 'DROP INDEX CONCURRENTLY orders_total'],
  ['REINDEX TABLE orders', 'migration_safety.reindex', 'REINDEX (CONCURRENTLY) TABLE orders'],
  ['REINDEX INDEX CONCURRENTLY orders_total', 'none', 'REINDEX INDEX CONCURRENTLY orders_total'],
  ['VACUUM FULL orders', 'migration_safety.vacuum_full', 'VACUUM orders'],
  ['VACUUM (FULL, ANALYZE) orders', 'migration_safety.vacuum_full', 'VACUUM (FULL false) orders'],
  ['CLUSTER orders USING orders_pkey', 'migration_safety.cluster', 'ANALYZE orders'],
  ['REFRESH MATERIALIZED VIEW totals', 'migration_safety.refresh_materialized_view', 'REFRESH MATERIALIZED VIEW CONCURRENTLY totals'],
  ['LOCK TABLE orders', 'migration_safety.lock_table', 'LOCK TABLE orders IN ROW EXCLUSIVE MODE'],
  ['LOCK orders IN SHARE MODE', 'migration_safety.lock_table', 'LOCK orders IN SHARE UPDATE EXCLUSIVE MODE'],
  ['LOCK orders IN EXCLUSIVE MODE', 'migration_safety.lock_table', 'LOCK orders IN ACCESS SHARE MODE'],
  ['TRUNCATE orders', 'migration_safety.truncate', 'DELETE FROM orders WHERE id IN (SELECT id FROM orders LIMIT 1000)'],
  ['ALTER TABLE orders ADD COLUMN token uuid DEFAULT gen_random_uuid()', 'migration_safety.add_column_rewrite', "ALTER TABLE orders ADD COLUMN token text DEFAULT 'x'"],
  ['ALTER TABLE orders ADD COLUMN r float8 NOT NULL DEFAULT random()', 'migration_safety.add_column_rewrite', 'ALTER TABLE orders ADD COLUMN r float8 NOT NULL DEFAULT 0'],
  ['ALTER TABLE orders ADD COLUMN at timestamptz DEFAULT clock_timestamp()', 'migration_safety.add_column_rewrite', 'ALTER TABLE orders ADD COLUMN at timestamptz DEFAULT now()'],
  ["ALTER TABLE orders ADD COLUMN n int DEFAULT (SELECT 1)", 'migration_safety.add_column_rewrite', "ALTER TABLE orders ADD COLUMN n int DEFAULT -1::int"],
  ['ALTER TABLE orders ADD COLUMN seq bigserial', 'migration_safety.add_column_rewrite', 'ALTER TABLE orders ADD COLUMN seq bigint'],
  ['ALTER TABLE orders ADD COLUMN n int GENERATED ALWAYS AS IDENTITY', 'migration_safety.add_column_rewrite', 'ALTER TABLE orders ADD COLUMN n int'],
  ['ALTER TABLE orders ADD COLUMN twice numeric GENERATED ALWAYS AS (total * 2) STORED', 'migration_safety.add_column_rewrite', 'ALTER TABLE orders ADD COLUMN twice numeric'],
  ['ALTER TABLE orders ADD COLUMN code text UNIQUE', 'migration_safety.add_column_constraint', 'ALTER TABLE orders ADD COLUMN code text'],
  ['ALTER TABLE orders ADD COLUMN q int CHECK (q > 0)', 'migration_safety.add_column_constraint', 'ALTER TABLE orders ADD COLUMN q int'],
  ['ALTER TABLE orders ALTER COLUMN total TYPE float8', 'migration_safety.alter_column_type', 'ALTER TABLE orders ALTER COLUMN total SET DEFAULT 0'],
  ['ALTER TABLE orders ALTER COLUMN customer SET NOT NULL', 'migration_safety.set_not_null', 'ALTER TABLE orders ADD CONSTRAINT customer_not_null CHECK (customer IS NOT NULL) NOT VALID'],
  ['ALTER TABLE orders ADD CONSTRAINT positive CHECK (total > 0)', 'migration_safety.add_constraint', 'ALTER TABLE orders ADD CONSTRAINT positive CHECK (total > 0) NOT VALID'],
  ['ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (customer) REFERENCES customers (email)', 'migration_safety.add_constraint', 'ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (customer) REFERENCES customers (email) NOT VALID'],
  ['ALTER TABLE orders ADD CONSTRAINT u UNIQUE (customer)', 'migration_safety.add_index_constraint', 'ALTER TABLE orders ADD CONSTRAINT u UNIQUE USING INDEX orders_customer'],
  ['ALTER TABLE orders ADD PRIMARY KEY (id)', 'migration_safety.add_index_constraint', 'ALTER TABLE orders VALIDATE CONSTRAINT positive'],
  ['ALTER TABLE orders SET TABLESPACE fast', 'migration_safety.alter_table_rewrite', 'ALTER TABLE orders DROP COLUMN note'],
  ['ALTER TABLE orders SET UNLOGGED', 'migration_safety.alter_table_rewrite', 'ALTER TABLE orders RENAME COLUMN note TO memo'],
];

describe('migrationFindings: lock-heavy forms and their safe siblings', () => {
  for (const [heavy, rule, safe] of FORMS) {
    it(`${heavy} → ${rule}; ${safe} → nothing`, () => {
      if (rule !== 'none') expect(rulesOf(heavy)).toEqual([rule]);
      expect(rulesOf(safe)).toEqual([]);
    });
  }

  it('flags nothing of the schema changes that hold their locks briefly', () => {
    for (const sql of ['CREATE TABLE t (id int PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())', 'DROP TABLE orders', 'ALTER TABLE orders DROP CONSTRAINT positive', 'ALTER TABLE orders ALTER COLUMN note DROP NOT NULL', 'ALTER TABLE orders RENAME TO orders2', 'SELECT 1', 'UPDATE orders SET total = 0', 'VACUUM orders', 'ANALYZE orders']) {
      expect(rulesOf(sql), sql).toEqual([]);
    }
  });

  it('lists every lock-heavy command of one ALTER TABLE, in order', () => {
    const sql = 'ALTER TABLE orders ADD COLUMN n int, ALTER COLUMN total TYPE float8, ALTER COLUMN customer SET NOT NULL';
    expect(rulesOf(sql)).toEqual(['migration_safety.alter_column_type', 'migration_safety.set_not_null']);
    const decision = decide(sql, writable('block'));
    expect(decision).toMatchObject({ action: 'refuse', rule: 'migration_safety.alter_column_type', reason: expect.stringContaining('. Also, ALTER TABLE orders ALTER COLUMN customer SET NOT NULL scans every row') });
  });

  it('says what locks what, and what to run instead', () => {
    const [finding] = migrationFindings(stmtOf('CREATE INDEX ON public.orders (total)').stmt);
    expect(finding).toEqual({
      rule: 'migration_safety.create_index',
      what: 'CREATE INDEX without CONCURRENTLY on public.orders',
      risk: 'takes a SHARE lock that blocks every INSERT, UPDATE and DELETE of the table for the whole build',
      instead: 'use CREATE INDEX CONCURRENTLY (outside a transaction block), which lets writes through while it builds',
    });
  });
});

const writable = (migration_safety: 'off' | 'warn' | 'block'): PolicyRules => ({
  read_only: false,
  allowed_tables: ['public.orders', 'public.customers'],
  masked_columns: {},
  allow_catalog: false,
  canaries: [],
  migration_safety,
});

const decide = (sql: string, policy: PolicyRules) => decidePolicy(analyzeStatement(stmtOf(sql)), policy);

describe('migration_safety decisions', () => {
  it('off: a lock-heavy schema change is flagged as any schema change, and runs', () => {
    expect(decide('CREATE INDEX ON orders (total)', writable('off'))).toMatchObject({ action: 'allow', event: 'query', progress: [SCHEMA_CHANGE] });
    expect(decide('TRUNCATE orders', writable('off'))).toMatchObject({ action: 'allow', progress: [] });
  });

  it('warn (the default): it runs, with a migration_flagged row naming the rule and the safe alternative', () => {
    for (const policy of [writable('warn'), { ...writable('warn'), migration_safety: undefined }]) {
      expect(decide('CREATE INDEX ON orders (total)', policy)).toMatchObject({
        action: 'allow',
        event: 'query',
        rule: '',
        progress: [
          {
            event: 'migration_flagged',
            rule: 'migration_safety.create_index',
            reason:
              'CREATE INDEX without CONCURRENTLY on orders takes a SHARE lock that blocks every INSERT, UPDATE and DELETE of the table for the whole build (rule migration_safety.create_index; it ran under migration_safety warn). Instead, use CREATE INDEX CONCURRENTLY (outside a transaction block), which lets writes through while it builds.',
          },
        ],
      });
    }
    expect(decide('TRUNCATE orders', writable('warn'))).toMatchObject({ action: 'allow', progress: [{ event: 'migration_flagged', rule: 'migration_safety.truncate' }] });
    expect(decide('CREATE INDEX CONCURRENTLY ON orders (total)', writable('warn'))).toMatchObject({ action: 'allow', progress: [SCHEMA_CHANGE] });
  });

  it('block: refused with 42501, the rule and the safe alternative; its safe sibling runs', () => {
    expect(decide('ALTER TABLE orders ALTER COLUMN customer SET NOT NULL', writable('block'))).toMatchObject({
      action: 'refuse',
      event: 'blocked',
      sqlstate: '42501',
      rule: 'migration_safety.set_not_null',
      reason: expect.stringContaining('Instead, ADD CONSTRAINT customer_not_null CHECK (customer IS NOT NULL) NOT VALID, then VALIDATE CONSTRAINT customer_not_null'),
    });
    expect(decide('CREATE INDEX ON orders (total)', writable('block'))).toMatchObject({ action: 'refuse', rule: 'migration_safety.create_index', reason: expect.stringMatching(/\(rule migration_safety\.create_index; this credential's policy refuses lock-heavy schema changes, migration_safety block\)\. Instead, use CREATE INDEX CONCURRENTLY /) });
    expect(decide('CREATE INDEX CONCURRENTLY ON orders (total)', writable('block'))).toMatchObject({ action: 'allow', progress: [SCHEMA_CHANGE] });
    expect(decide('ALTER TABLE orders ADD CONSTRAINT positive CHECK (total > 0) NOT VALID', writable('block'))).toMatchObject({ action: 'allow' });
    expect(decide('ALTER TABLE orders VALIDATE CONSTRAINT positive', writable('block'))).toMatchObject({ action: 'allow' });
    expect(decide('TRUNCATE orders', writable('block'))).toMatchObject({ action: 'refuse', rule: 'migration_safety.truncate' });
  });

  it('comes after the table rules: a lock-heavy change of a table off the allowlist is refused as that', () => {
    expect(decide('CREATE INDEX ON secrets (id)', writable('block'))).toMatchObject({ action: 'refuse', rule: 'allowed_tables.not_allowed' });
  });

  it('under a read-only policy, read_only refuses first and nothing is flagged', () => {
    expect(decide('CREATE INDEX ON orders (total)', { ...writable('block'), read_only: true })).toMatchObject({ action: 'refuse', rule: 'read_only.ddl', progress: [] });
  });
});
