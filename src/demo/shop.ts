/**
 * The demo's upstream database: a small shop whose rows are the same on every deployment (no
 * random(), no clock), so the tutorial can show the rows a statement returns.
 */
import type { z } from 'zod';
import type { PolicyProfileCreated } from '../events/policies.js';

export interface ShopColumn {
  readonly name: string;
  readonly type: string;
  readonly description: string;
}

export interface ShopTable {
  readonly name: string;
  readonly description: string;
  readonly rows: number;
  readonly columns: readonly ShopColumn[];
}

export const SHOP_TABLES: readonly ShopTable[] = [
  {
    name: 'customers',
    description: 'the shop’s customers',
    rows: 200,
    columns: [
      { name: 'id', type: 'integer', description: 'primary key' },
      { name: 'name', type: 'text', description: 'full name' },
      { name: 'email', type: 'text', description: 'e-mail address (personal data)' },
      { name: 'country', type: 'text', description: 'ISO 3166 country code' },
      { name: 'created_at', type: 'timestamptz', description: 'when the customer signed up' },
    ],
  },
  {
    name: 'orders',
    description: 'orders the customers placed',
    rows: 600,
    columns: [
      { name: 'id', type: 'integer', description: 'primary key' },
      { name: 'customer_id', type: 'integer', description: 'references customers(id)' },
      { name: 'placed_at', type: 'timestamptz', description: 'when the order was placed' },
      { name: 'status', type: 'text', description: 'placed, paid, shipped or refunded' },
      { name: 'total_cents', type: 'integer', description: 'order total in cents' },
    ],
  },
  {
    name: 'secrets',
    description: 'payment tokens and API keys no agent should read',
    rows: 20,
    columns: [
      { name: 'id', type: 'integer', description: 'primary key' },
      { name: 'customer_id', type: 'integer', description: 'references customers(id)' },
      { name: 'card_token', type: 'text', description: 'payment card token' },
      { name: 'api_key', type: 'text', description: 'the customer’s API key' },
    ],
  },
];

/** What the demo's free tier enforces: read-only, two of the three tables, e-mails masked, results capped. */
export const DEMO_POLICY: Omit<z.input<typeof PolicyProfileCreated.schema>, 'policy_id' | 'project_id'> = {
  name: 'demo (read-only)',
  read_only: true,
  allowed_tables: ['public.customers', 'public.orders'],
  masked_columns: { 'public.customers.email': 'partial' },
  max_rows: 50,
  queries_per_day: 1000,
  bytes_per_month: '0',
  approval: { held_kinds: [], row_threshold: null, expiry_seconds: 3600 },
  honeytokens: [],
  audit_mode: 'best_effort',
  allow_catalog: false,
  statement_timeout_ms: 5000,
};

/** What the demo's paid tier (`pro`, bought per credential: docs/payments.md) enforces: as the free tier, with ten times the rows and queries. */
export const DEMO_PRO_POLICY: typeof DEMO_POLICY = { ...DEMO_POLICY, name: 'demo pro (read-only)', max_rows: 500, queries_per_day: 10_000 };

const FIRST = ['Ada', 'Alan', 'Grace', 'Edsger', 'Barbara', 'Donald', 'Frances', 'John', 'Margaret', 'Ken', 'Radia', 'Dennis', 'Sophie', 'Tim', 'Hedy', 'Linus', 'Katherine', 'Niklaus', 'Shafi', 'Leslie'];
const LAST = ['Lovelace', 'Turing', 'Hopper', 'Dijkstra', 'Liskov', 'Knuth', 'Allen', 'McCarthy', 'Hamilton', 'Thompson', 'Perlman', 'Ritchie', 'Wilson', 'Berners', 'Lamarr', 'Torvalds', 'Johnson', 'Wirth', 'Goldwasser', 'Lamport'];
const COUNTRIES = ['DE', 'FR', 'US', 'GB', 'JP', 'BR', 'IN', 'NL'];
const STATUSES = ['placed', 'paid', 'shipped', 'refunded'];

const sqlArray = (values: readonly string[]): string => `array[${values.map((v) => `'${v}'`).join(', ')}]`;
const [customers, orders, secrets] = SHOP_TABLES as [ShopTable, ShopTable, ShopTable];

/** Creates the tables when absent and inserts the rows not there yet: running it again changes nothing. */
export const SHOP_SQL = `
create table if not exists customers (id integer primary key, name text not null, email text not null, country text not null, created_at timestamptz not null);
create table if not exists orders (id integer primary key, customer_id integer not null references customers, placed_at timestamptz not null, status text not null, total_cents integer not null);
create table if not exists secrets (id integer primary key, customer_id integer not null references customers, card_token text not null, api_key text not null);
insert into customers
  select i, f || ' ' || l, lower(f) || '.' || lower(l) || i || '@example.com', (${sqlArray(COUNTRIES)})[1 + i % ${COUNTRIES.length}],
         timestamptz '2024-01-01 00:00:00+00' + i * interval '37 hours'
    from generate_series(1, ${customers.rows}) as i,
         lateral (select (${sqlArray(FIRST)})[1 + i % ${FIRST.length}] as f, (${sqlArray(LAST)})[1 + (i * 7 + i / ${FIRST.length}) % ${LAST.length}] as l) as n
  on conflict (id) do nothing;
insert into orders
  select i, 1 + (i * 37) % ${customers.rows}, timestamptz '2024-06-01 00:00:00+00' + i * interval '11 hours', (${sqlArray(STATUSES)})[1 + i % ${STATUSES.length}], 500 + (i * 7919) % 50000
    from generate_series(1, ${orders.rows}) as i
  on conflict (id) do nothing;
insert into secrets
  select i, i * 10, 'tok_' || md5('card' || i), 'sk_live_' || md5('key' || i)
    from generate_series(1, ${secrets.rows}) as i
  on conflict (id) do nothing;
`;

/** Statements worth trying with a demo credential, and what each shows. */
export const DEMO_STATEMENTS: readonly { readonly sql: string; readonly shows: string }[] = [
  { sql: 'select id, name, email from customers order by id limit 5', shows: 'masked: each email comes back as its first character and ***' },
  { sql: 'select * from orders order by id', shows: 'truncated: 600 rows match, the row cap returns the first 50' },
  { sql: 'select c.country, count(*) as orders, sum(o.total_cents) / 100 as revenue from orders o join customers c on c.id = o.customer_id group by c.country order by revenue desc', shows: 'allowed: a join and an aggregate over both allowed tables' },
  { sql: 'select * from secrets', shows: 'blocked: the table is not on the allowlist (SQLSTATE 42501)' },
  { sql: "update orders set status = 'refunded'", shows: 'blocked: the policy is read-only (SQLSTATE 42501)' },
];
