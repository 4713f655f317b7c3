/**
 * Issue 19's write caps (max_affected_rows) and write modes (write_mode), through the real proxy
 * (node-postgres on the simple and extended protocol, postgres.js) and the hosted agent MCP (the
 * official MCP SDK client): exact SQLSTATEs and reasons, the audit rows, and the upstream checked
 * after the fact. One pooled upstream connection (transaction pooling) serves every session, so
 * each check that the next statement runs normally is a check of the connection the write used.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentsWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin, adminRows } from '../support/pg.js';
import { patchDatabase, withAgentClient as withClient } from '../support/proxy-agents.js';
import { recordedFor } from '../support/recorded.js';
import { capExceeded, ROLLED_BACK_NOTICE } from '../../proxy/policy/write-guard.js';

let gateway: TestGateway;
let mcpUrl: string;

const CAP = 10;
const POLICIES = {
  capped: { name: 'capped writer', read_only: false, allowed_tables: ['public.*'], max_affected_rows: CAP },
  rehearsal: { name: 'rehearsal', read_only: false, allowed_tables: ['public.*'], write_mode: 'rollback' },
  sandbox: { name: 'sandbox', read_only: false, allowed_tables: ['public.*'], write_mode: 'sandbox' },
  rows: { name: 'capped rows and writes', read_only: false, allowed_tables: ['public.*'], max_affected_rows: CAP, max_rows: 5 },
} as const;

type Mode = 'simple' | 'extended';
const MODES: Mode[] = ['simple', 'extended'];
let agents: Record<keyof typeof POLICIES, AgentSecrets>;

beforeAll(async () => {
  gateway = await startGateway('write_caps');
  await patchDatabase(gateway, { pool_config: { mode: 'transaction', max_connections: 1, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } });
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table notes (id int primary key, v int not null); insert into notes select g, 0 from generate_series(1, 20) g;
      create table parents (id int primary key); create table children (parent int references parents deferrable initially deferred);`),
  );
  [mcpUrl, agents] = await Promise.all([listenForAgents(gateway).then((url) => `${url}/mcp`), registerAgentsWith(gateway, POLICIES)]);
});
afterAll(() => gateway?.stop());

const upstream = <T>(sql: string): Promise<T[]> => adminRows<T>(gateway.upstream.url, sql);

const state = () => upstream<{ orders: number; notes: number; total: number }>('select (select count(*)::int from orders) as orders, (select count(*)::int from notes) as notes, (select sum(v)::int from notes) as total');
const UNCHANGED = [{ orders: 1000, notes: 20, total: 0 }];

function run(client: pg.Client, sql: string, mode: Mode): Promise<pg.QueryResult> {
  return mode === 'simple' ? client.query(sql) : client.query({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
}

async function failureOf(client: pg.Client, sql: string, mode: Mode): Promise<{ code?: string; message?: string }> {
  return run(client, sql, mode).then(
    () => ({}),
    (error: { code?: string; message?: string }) => ({ code: error.code, message: error.message }),
  );
}

const withMcp = <T>(agent: AgentSecrets, work: (client: Client) => Promise<T>): Promise<T> => withAgentMcp(mcpUrl, agent, work);

const EXCEEDED_1000 = capExceeded(CAP, 1000).reason;

describe('max_affected_rows on the wire', () => {
  for (const mode of MODES) {
    it(`node-postgres, ${mode} protocol: DELETE FROM orders past the cap is rolled back with 54000 and the cap in the reason; every row is still there`, async () => {
      const sql = `delete from orders /* ${mode} */`;
      await withClient(agents.capped, async (client) => {
        expect(await failureOf(client, sql, mode)).toEqual({ code: '54000', message: EXCEEDED_1000 });
        expect(EXCEEDED_1000).toContain('max_affected_rows 10');
        // The pooled connection is out of the write's transaction: the next statement runs, and a write within the cap commits.
        expect((await run(client, 'select count(*)::int as n from orders', mode)).rows).toEqual([{ n: 1000 }]);
        expect((await run(client, 'update notes set v = v + 1 where id <= 3', mode)).rowCount).toBe(3);
      });
      expect(await state()).toEqual([{ orders: 1000, notes: 20, total: 3 }]);
      await upstream('update notes set v = 0');
      expect(await recordedFor(gateway, agents.capped.credential.id, 'wire', sql)).toMatchObject({ event: 'blocked', decision_rule: 'write_cap.exceeded', reason: EXCEEDED_1000, rows_returned: '1000' });
    });

    it(`node-postgres, ${mode} protocol: inside an explicit transaction the write past the cap fails the transaction; nothing of it commits`, async () => {
      await withClient(agents.capped, async (client) => {
        await run(client, 'begin', mode);
        expect((await run(client, 'insert into notes values (100, 1)', mode)).rowCount).toBe(1);
        expect(await failureOf(client, 'delete from notes', mode)).toEqual({ code: '54000', message: capExceeded(CAP, 21).reason });
        expect(await failureOf(client, 'select 1', mode)).toMatchObject({ code: '25P02' });
        expect((await run(client, 'commit', mode)).command).toBe('ROLLBACK');
        expect((await run(client, 'select count(*)::int as n from notes', mode)).rows).toEqual([{ n: 20 }]);
      });
      expect(await state()).toEqual(UNCHANGED);
    });

    it(`node-postgres, ${mode} protocol: a write within the cap that fails at commit (a deferred constraint) reports the failure`, async () => {
      await withClient(agents.capped, async (client) => {
        expect(await failureOf(client, 'insert into children values (1)', mode)).toMatchObject({ code: '23503' });
        expect((await run(client, 'select count(*)::int as n from children', mode)).rows).toEqual([{ n: 0 }]);
      });
    });

    it(`node-postgres, ${mode} protocol: what the gateway cannot count is refused under a cap (0A000 write_cap.unbounded)`, async () => {
      await withClient(agents.capped, async (client) => {
        for (const [sql, what] of [
          ['truncate notes', 'TRUNCATE'],
          ['with gone as (delete from notes returning id) select count(*) from gone', 'a data-modifying WITH query'],
          ['explain analyze delete from notes', 'EXPLAIN ANALYZE of a write'],
        ] as const) {
          const refused = await failureOf(client, sql, mode);
          expect(refused.code, sql).toBe('0A000');
          expect(refused.message, sql).toContain(`this credential’s policy caps every write at ${CAP} rows (max_affected_rows), and the gateway cannot count the rows ${what}`);
          expect(refused.message, sql).toContain('(rule write_cap.unbounded)');
        }
        expect((await run(client, 'select 1 as ok', mode)).rows).toEqual([{ ok: 1 }]);
        // EXPLAIN without ANALYZE runs nothing, and is not a write.
        expect((await run(client, 'explain delete from orders', mode)).rows[0]).toEqual({ 'QUERY PLAN': expect.stringMatching(/^Delete on orders/) });
      });
      expect(await state()).toEqual(UNCHANGED);
      expect(await recordedFor(gateway, agents.capped.credential.id, 'wire', 'truncate notes')).toMatchObject({ event: 'blocked', decision_rule: 'write_cap.unbounded', rows_returned: '0' });
    });
  }

  it('a message of several statements with a write is refused under a cap, as is RETURNING under max_rows', async () => {
    await withClient(agents.capped, async (client) => {
      expect(await failureOf(client, 'select 1; delete from notes where id = 1', 'simple')).toMatchObject({ code: '0A000', message: expect.stringContaining('the gateway cannot count the rows a write in a query string of several statements affects, so it refuses it (rule write_cap.unbounded)') });
    });
    await withClient(agents.rows, async (client) => {
      expect(await failureOf(client, 'delete from notes where id = 1 returning id', 'simple')).toMatchObject({ code: '0A000', message: expect.stringContaining('(rule max_rows.returning)') });
      expect((await client.query('delete from notes where id = 99')).rowCount).toBe(0);
    });
    expect(await state()).toEqual(UNCHANGED);
  });

  it('postgres.js (extended protocol, and simple): refused past the cap, committed within it', async () => {
    const sql = postgres(agents.capped.connection_string, { max: 1, onnotice: () => undefined });
    try {
      await expect(sql.unsafe('delete from orders where id > 500')).rejects.toMatchObject({ code: '54000', message: capExceeded(CAP, 500).reason });
      await expect(sql.unsafe('delete from orders where id > 100').simple()).rejects.toMatchObject({ code: '54000', message: capExceeded(CAP, 900).reason });
      expect(await sql.unsafe('update notes set v = 5 where id = $1 returning id, v', [4])).toEqual([{ id: 4, v: 5 }]);
      await expect(sql.begin((tx) => tx.unsafe('update notes set v = 9'))).rejects.toMatchObject({ code: '54000' });
      // Pipelined on one connection: the refused write's batch is undone, the next query runs after it.
      const [refused, count] = await Promise.allSettled([sql.unsafe('delete from orders'), sql.unsafe('select count(*)::int as n from orders')]);
      expect(refused).toMatchObject({ status: 'rejected', reason: { code: '54000', message: EXCEEDED_1000 } });
      expect(count).toEqual({ status: 'fulfilled', value: expect.arrayContaining([{ n: 1000 }]) });
    } finally {
      await sql.end();
    }
    const rehearse = postgres(agents.rehearsal.connection_string, { max: 1, onnotice: () => undefined });
    try {
      const [rehearsed, after] = await Promise.all([rehearse.unsafe('update notes set v = 7 where id <= $1 returning id', [3]), rehearse.unsafe('select sum(v)::int as total from notes')]);
      expect([...rehearsed]).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
      expect([...after]).toEqual([{ total: 5 }]);
    } finally {
      await rehearse.end();
    }
    expect(await state()).toEqual([{ orders: 1000, notes: 20, total: 5 }]);
    await upstream('update notes set v = 0');
  });
});

describe('write_mode on the wire', () => {
  for (const mode of MODES) {
    it(`node-postgres, ${mode} protocol: rollback answers what the write would have done, with a NOTICE, and nothing changes`, async () => {
      const sql = `delete from notes where id <= 2 returning id /* ${mode} */`;
      await withClient(agents.rehearsal, async (client) => {
        const notices: string[] = [];
        client.on('notice', (notice) => notices.push(notice.message ?? ''));
        const result = await run(client, sql, mode);
        expect(result.rows).toEqual([{ id: 1 }, { id: 2 }]);
        expect([result.command, result.rowCount]).toEqual(['DELETE', 2]);
        expect((await run(client, 'update notes set v = 1', mode)).rowCount).toBe(20);
        expect(notices).toEqual([ROLLED_BACK_NOTICE, ROLLED_BACK_NOTICE]);
        expect((await run(client, 'select count(*)::int as n, sum(v)::int as total from notes', mode)).rows).toEqual([{ n: 20, total: 0 }]);
        // Inside a transaction block a rehearsal is refused, and the transaction goes on.
        await run(client, 'begin', mode);
        expect(await failureOf(client, 'insert into notes values (200, 1)', mode)).toMatchObject({ code: '25001', message: expect.stringContaining('(rule write_mode.rollback_in_transaction)') });
        await run(client, 'rollback', mode);
      });
      expect(await state()).toEqual(UNCHANGED);
      expect(await recordedFor(gateway, agents.rehearsal.credential.id, 'wire', sql)).toMatchObject({ event: 'query', decision_rule: 'write_mode.rolled_back', rows_returned: '2' });
    });

    it(`node-postgres, ${mode} protocol: sandbox without a ready branch refuses writes (0A000 write_mode.sandbox_unavailable) and runs reads`, async () => {
      await withClient(agents.sandbox, async (client) => {
        const refused = await failureOf(client, 'insert into notes values (300, 1)', mode);
        expect(refused.code).toBe('0A000');
        expect(refused.message).toContain('this session has none (no branch of its database was ready when it connected');
        expect(refused.message).toContain('(rule write_mode.sandbox_unavailable)');
        expect(await failureOf(client, 'create table made (id int)', mode)).toMatchObject({ code: '0A000' });
        expect((await run(client, 'select count(*)::int as n from notes', mode)).rows).toEqual([{ n: 20 }]);
      });
      expect(await state()).toEqual(UNCHANGED);
    });
  }
});

describe('max_affected_rows and write_mode on the hosted MCP', () => {
  it('query: DELETE FROM orders past the cap is rolled back, refused with the cap in the reason; within the cap it commits', async () => {
    await withMcp(agents.capped, async (client) => {
      const refused = await callTool(client, 'query', { sql: 'delete from orders' });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toBe(`Refused by the policy (decision_rule write_cap.exceeded, SQLSTATE 54000): ${EXCEEDED_1000}`);
      const truncate = await callTool(client, 'query', { sql: 'truncate notes' });
      expect(textOf(truncate)).toContain('(decision_rule write_cap.unbounded, SQLSTATE 0A000)');
      const ok = await callTool(client, 'query', { sql: 'update notes set v = 2 where id = $1', params: [7] });
      expect(ok.structuredContent).toMatchObject({ command: 'UPDATE 1', rolled_back: false, event: 'query' });
    });
    expect(await state()).toEqual([{ orders: 1000, notes: 20, total: 2 }]);
    await upstream('update notes set v = 0');
    expect(await recordedFor(gateway, agents.capped.credential.id, 'mcp', 'delete from orders')).toMatchObject({ event: 'blocked', decision_rule: 'write_cap.exceeded', rows_returned: '1000' });
  });

  it('query under rollback: rolled_back true, the RETURNING rows, nothing changed; sandbox refused', async () => {
    await withMcp(agents.rehearsal, async (client) => {
      const result = await callTool(client, 'query', { sql: 'update notes set v = 3 where id <= 2 returning id, v' });
      expect(result.structuredContent).toMatchObject({ rows: [[1, 3], [2, 3]], command: 'UPDATE 2', rolled_back: true, event: 'query', decision_rule: 'write_mode.rolled_back' });
      const deleted = await callTool(client, 'query', { sql: 'delete from notes where id <= 4' });
      expect(deleted.structuredContent).toMatchObject({ rows: [], command: 'DELETE 4', rolled_back: true });
    });
    expect(await recordedFor(gateway, agents.rehearsal.credential.id, 'mcp', 'delete from notes where id <= 4')).toMatchObject({ event: 'query', decision_rule: 'write_mode.rolled_back', rows_returned: '4' });
    await withMcp(agents.sandbox, async (client) => {
      expect(textOf(await callTool(client, 'query', { sql: 'delete from notes' }))).toContain('(decision_rule write_mode.sandbox_unavailable, SQLSTATE 0A000)');
    });
    expect(await state()).toEqual(UNCHANGED);
  });
});

describe('the policy document is validated strictly', () => {
  const create = (payload: Record<string, unknown>) => gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload });

  it.each([
    [{ max_affected_rows: 0 }, 'max_affected_rows'],
    [{ max_affected_rows: 2.5 }, 'max_affected_rows'],
    [{ max_affected_rows: '10' }, 'max_affected_rows'],
    [{ write_mode: 'dry_run' }, 'write_mode'],
    [{ write_cap: 10 }, 'write_cap'],
  ])('%j is refused with 400 and the field', async (fields, field) => {
    const response = await create({ name: `bad ${JSON.stringify(fields)}`, ...fields });
    expect(response.statusCode, response.body).toBe(400);
    expect(response.body).toContain(field);
  });

  it('defaults: no cap, write_mode commit; my_permissions shows both', async () => {
    expect((await create({ name: 'write defaults' })).json()).toMatchObject({ max_affected_rows: null, write_mode: 'commit' });
    await withMcp(agents.capped, async (client) => {
      expect(((await callTool(client, 'my_permissions')).structuredContent as { policy: unknown }).policy).toMatchObject({ max_affected_rows: CAP, write_mode: 'commit' });
    });
  });
});
