/**
 * Red team: the result cache keyed a registered database by its id and its catalog's version, not
 * by the server it reads. A database re-pointed at another server or database (PATCH host, port,
 * name or username: a failover, a move from staging to production) whose schema reads the same
 * (so its catalog snapshot has the same version) went on serving the old server's rows from the
 * cache, on the wire (simple and extended protocol) and through the hosted MCP, until the ttl.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, listenForAgents, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { admin, freshDatabase, type TestDatabase } from '../support/pg.js';
import { patchDatabase } from '../support/proxy-agents.js';
import { decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let other: TestDatabase;
let mcpUrl: string;

const READ = 'select customer from orders where id = 3';

beforeAll(async () => {
  gateway = await startGateway('cache_repointed');
  // The same tables as the gateway's upstream (startGateway), other rows.
  other = await freshDatabase('cache_repointed_other');
  await admin(other.url, (client) =>
    client.query(`create table orders (id int primary key, customer text not null, total numeric not null);
      insert into orders select g, 'other' || g, g from generate_series(1, 1000) g;
      create table customers (id int primary key, email text not null);`),
  );
  agent = await gateway.register('reader');
  mcpUrl = `${await listenForAgents(gateway)}/mcp`;
}, 60_000);
afterAll(async () => {
  await gateway?.stop();
  await other?.drop();
});

const databaseName = (url: string): string => new URL(url).pathname.slice(1);

/** The rows of `sql` through the proxy, logged in to database `name`, on `protocol`. */
async function wire(name: string, sql: string, protocol: 'simple' | 'extended'): Promise<unknown[]> {
  const url = new URL(agent.connection_string);
  url.pathname = `/${name}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return (await client.query({ text: sql, rowMode: 'array', ...(protocol === 'extended' ? { values: [], queryMode: 'extended' } : {}) } as pg.QueryConfig)).rows;
  } finally {
    await client.end();
  }
}

async function mcp(sql: string): Promise<unknown[]> {
  return withAgentMcp(mcpUrl, agent, async (client) => (await callTool(client, 'query', { sql })).structuredContent?.rows as unknown[]);
}

function statuses(source: 'wire' | 'mcp', sql: string): unknown[] {
  return decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === source && recordsText(d.sql, sql)).map((d) => d.cache_status);
}

describe('a database re-pointed at another upstream', () => {
  it('serves no result cached from the one before, on the wire and the hosted MCP', async () => {
    const before = databaseName(gateway.upstream.url);
    const simple = `${READ} /* simple */`;
    const extended = `${READ} /* extended */`;
    for (let i = 0; i < 2; i += 1) {
      expect(await wire(before, simple, 'simple')).toEqual([['c3']]);
      expect(await wire(before, extended, 'extended')).toEqual([['c3']]);
      expect(await mcp(READ)).toEqual([['c3']]);
    }
    await patchDatabase(gateway, { name: databaseName(other.url) });
    // Once the proxy and the API read the change: a read past the cache comes from the other database.
    const after = databaseName(other.url);
    await waitFor(async () => JSON.stringify(await wire(after, `/* pgward:no-cache */ ${READ}`, 'simple').catch(() => [])) === '[["other3"]]', 10_000, 'the proxy on the other database');
    await waitFor(async () => JSON.stringify(await mcp(`/* pgward:no-cache */ ${READ}`)) === '[["other3"]]', 10_000, 'the MCP on the other database');
    expect(await wire(after, simple, 'simple')).toEqual([['other3']]);
    expect(await wire(after, extended, 'extended')).toEqual([['other3']]);
    expect(await mcp(READ)).toEqual([['other3']]);
    await waitFor(() => statuses('mcp', READ).length === 3 && statuses('wire', extended).length === 3, 3_000, 'the decisions');
    expect(statuses('wire', simple)).toEqual(['miss', 'hit', 'miss']);
    expect(statuses('wire', extended)).toEqual(['miss', 'hit', 'miss']);
    expect(statuses('mcp', READ)).toEqual(['miss', 'hit', 'miss']);
  }, 60_000);
});
