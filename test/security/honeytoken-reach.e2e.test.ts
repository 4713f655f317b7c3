/**
 * Red team: masks and denials follow views, partitions and inheritance children (mask-reach.ts);
 * honeytokens did not. Reading a decoy table through a view over it, or a partition of it, or a
 * canary column through a partition or inheritance child of its table, ran and returned the rows
 * without tripping. Now each trips as reading the decoy itself does (canary_tripped in the audit
 * trail, the agent answered as for a table it may not read), on node-postgres simple and extended
 * and the hosted MCP `query` tool. A view over other tables still runs.
 * Round 6: a canary column read through a view (under another name, through an expression, a whole
 * row, a view over that view) or through a column typed as its table's rows ran without tripping.
 * Now each trips; a view whose definition does not name the column still runs.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin } from '../support/pg.js';
import { decisionsOfCredential } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let mcpUrl: string;
const honeytokens: string[] = [];

async function plant(kind: string, target: string): Promise<string> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/honeytokens`, payload: { kind, target } });
  expect(response.statusCode, response.body).toBe(201);
  return (response.json() as { id: string }).id;
}

beforeAll(async () => {
  gateway = await startGateway('honeytoken_reach');
  await admin(gateway.upstream.url, (client) =>
    client.query(`create table api_keys (id int, secret text) partition by range (id);
      create table api_keys_1 partition of api_keys for values from (0) to (10);
      insert into api_keys values (1, 'sk_live_canary');
      create view key_list as select secret from api_keys;
      create view key_list_2 as select * from key_list;
      create table people (id int, ssn text) partition by range (id);
      create table people_a partition of people for values from (0) to (10);
      insert into people values (1, '123-45-6789');
      create table staff (id int, pin text);
      create table staff_archive () inherits (staff);
      insert into staff_archive values (1, '0000');
      create view order_ids as select id from orders;
      create view people_ssn as select id, ssn from people;
      create view people_codes as select id, upper(ssn) as code from people;
      create materialized view people_codes_2 as select code from people_codes;
      create view people_rows as select id, p from people p;
      create view people_ids as select id from people;
      create table people_snapshots (id int, snap people);
      insert into people_snapshots select 1, p from people p;`),
  );
  honeytokens.push(await plant('table', 'public.api_keys'), await plant('column', 'public.people.ssn'), await plant('column', 'public.staff.pin'));
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

/** A fresh credential for each statement: a trip disables the one it tripped. */
let registered = 0;
async function trapped(): Promise<AgentSecrets> {
  return registerAgentWith(gateway, { name: `trapped ${++registered}`, read_only: true, allowed_tables: ['public.*'], honeytokens });
}

async function onWire(as: AgentSecrets, sql: string, mode: 'simple' | 'extended'): Promise<{ rows: unknown[] } | { code: string; message: string }> {
  const client = new pg.Client({ connectionString: as.connection_string });
  await client.connect();
  try {
    return { rows: (await client.query(mode === 'extended' ? ({ text: sql, queryMode: 'extended' } as pg.QueryConfig) : sql)).rows };
  } catch (error) {
    const { code, message } = error as pg.DatabaseError;
    return { code: code!, message };
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function tripOf(as: AgentSecrets, sql: string): Promise<unknown> {
  await waitFor(() => decisionsOfCredential(gateway, as.credential.id).some((d) => d.sql === sql), 5_000, `the decision on ${sql}`);
  return decisionsOfCredential(gateway, as.credential.id).find((d) => d.sql === sql);
}

const reads = [
  ['a view over the decoy table', 'SELECT secret FROM key_list', 'honeytoken.table', 'public.key_list'],
  ['a view over that view', 'SELECT secret FROM key_list_2', 'honeytoken.table', 'public.key_list_2'],
  ['a partition of the decoy table', 'SELECT secret FROM api_keys_1', 'honeytoken.table', 'public.api_keys_1'],
  ['the canary column of a partition of its table', 'SELECT ssn FROM people_a', 'honeytoken.column', 'public.people_a'],
  ['the canary column of an inheritance child of its table', 'SELECT pin FROM staff_archive', 'honeytoken.column', 'public.staff_archive'],
  ['a partition of the canary column’s table, as *', 'SELECT * FROM people_a', 'honeytoken.column', 'public.people_a'],
  ['a view showing the canary column', 'SELECT ssn FROM people_ssn', 'honeytoken.column', 'public.people_ssn'],
  ['a view showing the canary column under another name, through an expression', 'SELECT code FROM people_codes', 'honeytoken.column', 'public.people_codes'],
  ['a materialized view over that view', 'SELECT code FROM people_codes_2', 'honeytoken.column', 'public.people_codes_2'],
  ['a view holding the canary table’s whole rows', 'SELECT p FROM people_rows', 'honeytoken.column', 'public.people_rows'],
  ['a column typed as the canary table’s rows', 'SELECT snap FROM people_snapshots', 'honeytoken.column', 'public.people_snapshots'],
  ['the canary field of a column typed as its table’s rows', 'SELECT (snap).ssn FROM people_snapshots', 'honeytoken.column', 'public.people_snapshots'],
  ['a table with a column typed as the canary table’s rows, as *', 'SELECT * FROM people_snapshots', 'honeytoken.column', 'public.people_snapshots'],
] as const;

describe('a honeytoken trips through views, partitions and inheritance children', () => {
  for (const [what, sql, rule, blocked] of reads) {
    it(`${what}: trips on the simple and extended protocol and MCP, answered as a table not allowed`, async () => {
      for (const mode of ['simple', 'extended'] as const) {
        const agent = await trapped();
        expect(await onWire(agent, sql, mode), mode).toEqual({ code: '42501', message: expect.stringContaining('(rule allowed_tables.not_allowed)') as unknown });
        expect(await tripOf(agent, sql), mode).toMatchObject({ event: 'canary_tripped', decision_rule: rule, tables_blocked: [blocked] });
      }
      const agent = await trapped();
      const result = await withAgentMcp(mcpUrl, agent, async (client) => callTool(client, 'query', { sql }));
      expect(result.isError).toBe(true);
      expect(JSON.stringify(textOf(result))).toContain('decision_rule allowed_tables.not_allowed');
      expect(await tripOf(agent, sql)).toMatchObject({ event: 'canary_tripped', decision_rule: rule });
    });
  }

  it('a view over other tables or other columns of the canary’s table, and the other columns of its partition and of a table of its rows, still run', async () => {
    const agent = await trapped();
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire(agent, 'SELECT id FROM order_ids WHERE id = 1', mode)).toEqual({ rows: [{ id: 1 }] });
      expect(await onWire(agent, 'SELECT id FROM people_a', mode)).toEqual({ rows: [{ id: 1 }] });
      expect(await onWire(agent, 'SELECT id FROM people_ids', mode)).toEqual({ rows: [{ id: 1 }] });
      expect(await onWire(agent, 'SELECT id FROM people_snapshots', mode)).toEqual({ rows: [{ id: 1 }] });
    }
  });
});
