/**
 * Row filters keep their OFFSET 0 fence (row-filter-oracle.e2e.test.ts) and still let an index
 * serve the agent's own leakproof predicates: `WHERE id = 41` is copied into the stand-in subquery
 * after the filter, so on a 200,000-row table whose filter column has no index PostgreSQL reads the
 * primary key instead of every row. The plan is EXPLAINed on the upstream with the very text the
 * gateway ran there (pg_stat_activity's last query of its connection: the hosted MCP's ends in
 * DISCARD ALL, so its plan is not seen); the rows are asserted through node-postgres simple and
 * extended and the hosted MCP `query` tool.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, registerAgentWith, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { withAgentClient } from '../support/proxy-agents.js';
import { wireOutcome, type WireOutcome } from '../support/wire-outcome.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let mcpUrl: string;
let upstream: pg.Client;

beforeAll(async () => {
  gateway = await startGateway('row_filter_pushdown');
  upstream = new pg.Client({ connectionString: gateway.upstream.url });
  await upstream.connect();
  // Tenant 1 owns the ids ≡ 1 (mod 4): 50,000 of the 200,000 rows. No index on tenant.
  await upstream.query(`create table big (id int primary key, tenant int not null, note text not null);
    insert into big select g, g % 4, 'n' || g from generate_series(1, 200000) g;
    analyze big;`);
  agent = await registerAgentWith(gateway, { name: 'tenant', read_only: true, allowed_tables: ['public.*'], row_filters: { 'public.big': 'tenant = 1' } });
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
}, 120_000);
afterAll(async () => {
  await upstream?.end();
  await gateway?.stop();
});

const onWire = (sql: string, mode: 'simple' | 'extended'): Promise<WireOutcome> => withAgentClient(agent, (client) => wireOutcome(client, sql, mode));

/** The last statement the gateway ran upstream on `big`, as PostgreSQL recorded it. */
async function ranUpstream(): Promise<string> {
  const { rows } = await upstream.query<{ query: string }>(
    `select query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and query like '%FROM ONLY%big%' order by query_start desc limit 1`,
  );
  expect(rows).toHaveLength(1);
  return rows[0]!.query;
}

/** The scans of the plan PostgreSQL makes for `sql`: node type and index, depth first. */
async function scans(sql: string): Promise<string[]> {
  const { rows } = await upstream.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${sql}`);
  const found: string[] = [];
  const walk = (node: PlanNode): void => {
    if (node['Node Type'].endsWith('Scan') && node['Node Type'] !== 'Subquery Scan') found.push(`${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`);
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(rows[0]!['QUERY PLAN'][0].Plan);
  return found;
}
interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

describe('a leakproof predicate of the agent’s runs before the row filter, on the table’s index', () => {
  it('WHERE id = 41 reads big_pkey, not all 200,000 rows; simple and extended', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire('SELECT id, tenant FROM big WHERE id = 41', mode), mode).toEqual({ rows: [{ id: 41, tenant: 1 }] });
      const ran = await ranUpstream();
      expect(await scans(ran), mode).toEqual(['Index Scan big_pkey']);
      expect(ran, mode).toContain('WHERE big.tenant = 1 AND big.id = 41 OFFSET 0');
    }
  });

  it('a hidden id answers no row, with its alias, in an inner join and through MCP', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire('SELECT id FROM big WHERE id = 42', mode), mode).toEqual({ rows: [] });
      expect(await onWire('SELECT b.id FROM big b JOIN big c ON c.id = b.id + 4 WHERE b.id IN (41, 42) OR b.id = 45 ORDER BY b.id', mode), mode).toEqual({ rows: [{ id: 41 }, { id: 45 }] });
      expect(await onWire('SELECT b.id, c.id AS c FROM big b JOIN big c ON c.id = 45 WHERE b.id = 42 OR b.id = 41', mode), mode).toEqual({ rows: [{ id: 41, c: 45 }] });
      // The OR of two leakproof equalities goes in whole: a bitmap of two probes of the key.
      expect((await scans(await ranUpstream())).sort(), mode).toEqual(['Bitmap Heap Scan', 'Bitmap Index Scan big_pkey', 'Bitmap Index Scan big_pkey', 'Index Scan big_pkey']);
    }
    const mcp = async (sql: string): Promise<unknown[]> => {
      const result = await withAgentMcp(mcpUrl, agent, (client) => callTool(client, 'query', { sql }));
      expect(result.isError ?? false).toBe(false);
      return (result.structuredContent as { rows: unknown[] }).rows;
    };
    expect(await mcp('SELECT id, note FROM big b WHERE b.id = 41')).toEqual([[41, 'n41']]);
    expect(await mcp('SELECT id FROM big WHERE id = 42')).toEqual([]);
  });

  it('a predicate that is not leakproof stays outside the fence: no division by zero on the hidden row 42', async () => {
    for (const mode of ['simple', 'extended'] as const) {
      expect(await onWire('SELECT count(*)::int AS n FROM big WHERE id = 42 AND 100 / (id - 42) > -1000', mode), mode).toEqual({ rows: [{ n: 0 }] });
      expect(await onWire('SELECT count(*)::int AS n FROM big WHERE id BETWEEN 40 AND 44 AND 100 / (id - 42) > -1000', mode), mode).toEqual({ rows: [{ n: 1 }] });
    }
  });

  it('a parameter is not copied in (the decision does not know its declared type), and its rows are still exactly the filtered ones', async () => {
    const rows = await withAgentClient(agent, async (client) => [(await client.query('SELECT id FROM big WHERE id = $1', [41])).rows, (await client.query('SELECT id FROM big WHERE id = $1', [42])).rows]);
    expect(rows).toEqual([[{ id: 41 }], []]);
    expect(await ranUpstream()).not.toContain('big.id = $1');
  });
});
