/**
 * Policy escapes the corpus did not cover, through the real proxy (node-postgres on the
 * simple and the extended protocol). Each test states what must not reach the agent: the upstream
 * seeds `customers(id int primary key, email text not null)` with `userN@example.com` values and
 * `orders` with 1000 rows.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAgentClient, createPolicy, RAW_EMAIL, rawTurn, registerOn } from '../support/proxy-agents.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;


const policyWith = (policy: Record<string, unknown>): Promise<string> => createPolicy(gateway, policy);
const agentOn = (policyId: string, name: string): Promise<AgentSecrets> => registerOn(gateway, policyId, name);

beforeAll(async () => {
  gateway = await startGateway('policy_escapes');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('max_rows caps every result', () => {
  it('a simple query string that does not start with a read is still capped (or refused)', async () => {
    const agent = await agentOn(await policyWith({ name: 'cap multi', read_only: true, allowed_tables: ['public.orders'], max_rows: 3 }), 'cap multi');
    const client = await connectAgentClient(agent);
    try {
      for (const sql of ['BEGIN; SELECT id FROM orders; COMMIT', "SET application_name = 'x'; SELECT id FROM orders", 'SHOW timezone; SELECT id FROM orders']) {
        const outcome = await client.query(sql).then(
          (results) => ({ rows: (Array.isArray(results) ? results : [results]).map((result) => result.rows.length) }),
          (error: { code?: string }) => ({ code: error.code }),
        );
        if ('rows' in outcome) expect(Math.max(...outcome.rows), sql).toBeLessThanOrEqual(3);
        else expect(outcome.code, sql).toBe('0A000');
      }
    } finally {
      await client.end();
    }
  });

  it('a cursor read in another query string, and COPY (SELECT ...) TO STDOUT, are capped (or refused)', async () => {
    const agent = await agentOn(await policyWith({ name: 'cap cursor', read_only: true, allowed_tables: ['public.orders'], max_rows: 3 }), 'cap cursor');
    const client = await connectAgentClient(agent);
    try {
      await client.query('BEGIN');
      const declared = await client.query('DECLARE c CURSOR FOR SELECT id FROM orders').then(
        () => true,
        () => false,
      );
      if (declared) {
        const fetched = await client.query('FETCH ALL FROM c').then(
          (result) => result.rows.length,
          () => 0,
        );
        expect(fetched).toBeLessThanOrEqual(3);
      }
      await client.query('ROLLBACK');
      const copied = await rawTurn(client, (connection) => connection.query('COPY (SELECT id FROM orders) TO STDOUT'));
      expect(copied.copied.length).toBeLessThanOrEqual(3);
      if (copied.error) expect(copied.error.code).toBe('0A000');
      const extended = await rawTurn(client, (connection) => {
        connection.parse({ name: '', text: 'COPY (SELECT id FROM orders) TO STDOUT' });
        connection.bind({ portal: '', statement: '', values: [] });
        connection.execute({ portal: '', rows: 3 });
        connection.sync();
      });
      expect(extended.copied.length).toBeLessThanOrEqual(3);
      // FETCH on the extended protocol: each Bind of it would be a new result of up to the cap, so it is refused (row-cap.e2e.test.ts).
      await client.query('BEGIN');
      await client.query('DECLARE c2 CURSOR FOR SELECT id FROM orders ORDER BY id');
      const fetched = await client.query({ text: 'FETCH ALL FROM c2', queryMode: 'extended' } as pg.QueryConfig).then(
        (result) => result.rows.length,
        (error: { code?: string }) => error.code,
      );
      expect(fetched).toBe('0A000');
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
  });

  it('INSERT/UPDATE/DELETE ... RETURNING on the simple protocol is capped (or refused); on the extended one its Execute caps it', async () => {
    const agent = await agentOn(await policyWith({ name: 'cap returning', read_only: false, allowed_tables: ['public.orders'], max_rows: 3 }), 'cap returning');
    const client = await connectAgentClient(agent);
    try {
      const simple = await client.query('UPDATE orders SET total = total RETURNING id').then(
        (result) => ({ rows: result.rows.length }),
        (error: { code?: string }) => ({ code: error.code }),
      );
      if ('rows' in simple) expect(simple.rows).toBeLessThanOrEqual(3);
      else expect(simple.code).toBe('0A000');
      const extended = await client.query({ text: 'UPDATE orders SET total = total RETURNING id', queryMode: 'extended' } as pg.QueryConfig);
      expect(extended.rows.length).toBeLessThanOrEqual(3);
    } finally {
      await client.end();
    }
  });
});

describe('writes stay on allowed tables', () => {
  it('TRUNCATE ... CASCADE and DROP TABLE ... CASCADE do not reach tables outside allowed_tables', async () => {
    const admin = new pg.Client({ connectionString: gateway.upstream.url });
    await admin.connect();
    try {
      await admin.query(`create schema staging; create table staging.parent (id int primary key); insert into staging.parent values (1);
        create table public.ledger (id int primary key, parent_id int references staging.parent (id)); insert into public.ledger values (1, 1)`);
      const agent = await agentOn(await policyWith({ name: 'staging writer', read_only: false, allowed_tables: ['staging.*'] }), 'staging writer');
      const client = await connectAgentClient(agent);
      try {
        for (const sql of ['TRUNCATE staging.parent CASCADE', 'DROP TABLE staging.parent CASCADE']) {
          await client.query(sql).catch(() => undefined);
        }
      } finally {
        await client.end();
      }
      expect((await admin.query('select count(*)::int as n from public.ledger')).rows).toEqual([{ n: 1 }]);
      const constraints = await admin.query(`select count(*)::int as n from pg_constraint where conrelid = 'public.ledger'::regclass and contype = 'f'`);
      expect(constraints.rows).toEqual([{ n: 1 }]);
    } finally {
      await admin.query('drop table if exists public.ledger; drop schema if exists staging cascade');
      await admin.end();
    }
  });
});

describe('vetted functions', () => {
  it('a masked query string is joined back so that a trailing -- comment cannot merge two statements into an unvetted call', async () => {
    const agent = await agentOn(
      await policyWith({ name: 'masked joiner', read_only: true, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } }),
      'masked joiner',
    );
    const admin = new pg.Client({ connectionString: gateway.upstream.url });
    await admin.connect();
    const version = (await admin.query('show server_version')).rows[0].server_version as string;
    await admin.end();
    const client = await connectAgentClient(agent);
    try {
      // Alone, `SELECT current_setting -- x` reads a column; followed by `((SELECT 'server_version'))` on the next line it calls current_setting().
      const outcome = await client.query("SELECT current_setting -- x\n; ((SELECT 'server_version')); SELECT email FROM customers").then(
        (results) => JSON.stringify((Array.isArray(results) ? results : [results]).map((result) => result.rows)),
        (error: { code?: string; message: string }) => `${error.code ?? ''} ${error.message}`,
      );
      expect(outcome).not.toContain(version);
      expect(outcome).not.toMatch(RAW_EMAIL);
    } finally {
      await client.end();
    }
  });
});

describe('allowed tables', () => {
  it("allow_catalog does not expose other sessions' statement text (pg_stat_activity.query)", async () => {
    const agent = await agentOn(await policyWith({ name: 'catalog reader', read_only: true, allowed_tables: ['public.orders'], allow_catalog: true }), 'catalog reader');
    const admin = new pg.Client({ connectionString: gateway.upstream.url });
    await admin.connect();
    try {
      // Another client's last statement, with a value from a table the agent may not read.
      await admin.query("select 'launch-code-7781' as secret");
      const client = await connectAgentClient(agent);
      try {
        const seen = await client.query('SELECT query FROM pg_stat_activity').then(
          (result) => JSON.stringify(result.rows),
          (error: { code?: string }) => error.code ?? '',
        );
        expect(seen).not.toContain('launch-code-7781');
      } finally {
        await client.end();
      }
    } finally {
      await admin.end();
    }
  });

  it('an unqualified name never resolves to a schema named after the upstream user ("$user" on the search_path)', async () => {
    const agent = await agentOn(await policyWith({ name: 'public orders', read_only: true, allowed_tables: ['public.orders'] }), 'public orders');
    const admin = new pg.Client({ connectionString: gateway.upstream.url });
    await admin.connect();
    const user = (await admin.query('select current_user as name')).rows[0].name as string;
    try {
      // PostgreSQL's own advice (the secure schema usage pattern) is a schema per user, named after it.
      await admin.query(`create schema "${user}"; create table "${user}".orders (id int, secret text); insert into "${user}".orders values (1, 'user-schema-secret')`);
      const client = await connectAgentClient(agent);
      try {
        const rows = await client.query('SELECT * FROM orders ORDER BY id LIMIT 1').then(
          (result) => JSON.stringify(result.rows),
          (error: Error) => error.message,
        );
        expect(rows).not.toContain('user-schema-secret');
      } finally {
        await client.end();
      }
    } finally {
      await admin.query(`drop schema "${user}" cascade`);
      await admin.end();
    }
  });
});

describe('session state is never shared across credentials', () => {
  it("through a WITH HOLD cursor another credential's session left on the upstream connection", async () => {
    const open = await agentOn(await policyWith({ name: 'open reader 3', read_only: true, allowed_tables: ['public.customers'] }), 'open reader 3');
    const narrow = await agentOn(await policyWith({ name: 'orders only 3', read_only: true, allowed_tables: ['public.orders'] }), 'orders only 3');
    const first = await connectAgentClient(open);
    const declared = await first.query('BEGIN; DECLARE held CURSOR WITH HOLD FOR SELECT email FROM customers; COMMIT').then(
      () => 'declared',
      (error: { code?: string }) => error.code,
    );
    expect(['declared', '0A000']).toContain(declared);
    await first.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await connectAgentClient(narrow);
    try {
      const fetched = await second.query('FETCH ALL FROM held').then(
        (result) => JSON.stringify(result.rows),
        (error: Error) => error.message,
      );
      expect(fetched).not.toMatch(RAW_EMAIL);
    } finally {
      await second.end();
    }
  });
});
