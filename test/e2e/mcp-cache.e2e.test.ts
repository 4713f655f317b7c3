/**
 * Issue 22: the hosted MCP `query` tool answers from the result cache, and invalidations cross
 * processes. The MCP (official SDK client) reads twice: a miss, then a hit in the audit trail; an
 * UPDATE through the wire proxy (node-postgres) makes its next read a miss with the new value, and
 * an UPDATE through the MCP does the same to the wire's next read. Run with the two fan-outs a
 * deployment uses between the proxy and the API: `pgward serve`'s (the supervisor's in-process
 * fan-out, relayed to the API worker over a channel on a real MessageChannel) and a split
 * deployment's (NATS core pub/sub, one connection for each).
 */
import { randomUUID } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryFanout, type Fanout } from '../../src/bus/fanout.js';
import { fanoutOver, serveFanoutOver } from '../../src/bus/fanout-channel.js';
import { connectNatsFanout } from '../../src/bus/nats-fanout.js';
import { Channel } from '../../src/workers/channel.js';
import { connectAgent, listenForAgents } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { connectAgentClient, createPolicy, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { slowLink, type SlowLink } from '../support/slow-link.js';
import { decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';
import { endpoint } from '../contract/message-port-endpoint.js';

interface Deployment {
  readonly proxy: Fanout;
  readonly api: Fanout;
  close(): Promise<void>;
}

/** `pgward serve`: the proxy on the supervisor's fan-out, the API in a worker reached over its channel. */
function embedded(): Deployment {
  const supervisor = createMemoryFanout();
  const { port1, port2 } = new MessageChannel();
  const supervisorSide = new Channel(endpoint(port1));
  const workerSide = new Channel(endpoint(port2));
  const relay = serveFanoutOver(supervisor, supervisorSide);
  return {
    proxy: supervisor,
    api: fanoutOver(workerSide),
    async close() {
      relay.detach();
      supervisorSide.close('stopped');
      workerSide.close('stopped');
      port1.close();
      port2.close();
    },
  };
}

/** A split deployment: the proxy and the API each on their own NATS connection. */
async function split(): Promise<Deployment> {
  const options = { url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', subject: `pgward.test.cache.${randomUUID()}` };
  const proxy = await connectNatsFanout(options);
  const api = await connectNatsFanout(options);
  return {
    proxy,
    api,
    async close() {
      await Promise.all([proxy.close(), api.close()]);
    },
  };
}

for (const [name, deploy] of [['pgward serve (supervisor relay)', async () => embedded()], ['split (NATS)', split]] as const) {
  describe(`the hosted MCP's result cache, invalidated across processes: ${name}`, () => {
    let deployment: Deployment;
    let gateway: TestGateway;
    let agent: AgentSecrets;
    let mcp: Client;
    let masked: AgentSecrets;
    let maskedMcp: Client;

    beforeAll(async () => {
      deployment = await deploy();
      gateway = await startGateway(`mcp_cache_${name.startsWith('split') ? 'nats' : 'serve'}`, undefined, 60_000, {}, undefined, {}, { proxy: { cacheFanout: deployment.proxy }, apiCacheFanout: deployment.api });
      agent = await registerOn(gateway, await createPolicy(gateway, { name: 'writes orders', read_only: false, allowed_tables: ['public.*'] }), 'agent');
      masked = await registerOn(gateway, await createPolicy(gateway, { name: 'redacts emails', read_only: true, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'redact' } }), 'masked');
      const url = `${await listenForAgents(gateway)}/mcp`;
      mcp = await connectAgent(url, agent.mcp_token, 'pgward-cache-test');
      maskedMcp = await connectAgent(url, masked.mcp_token, 'pgward-cache-test');
    });
    afterAll(async () => {
      await mcp?.close();
      await maskedMcp?.close();
      await gateway?.stop();
      await deployment?.close();
    });

    async function mcpQuery(sql: string, client = mcp): Promise<unknown[][]> {
      const result = await client.callTool({ name: 'query', arguments: { sql } });
      expect(result.isError ?? false).toBe(false);
      return (result.structuredContent as { rows: unknown[][] }).rows;
    }

    /** The cache_status of each recorded run of `sql` from `source`, in order, once there are `count`. */
    async function statuses(source: 'wire' | 'mcp', sql: string, count: number, of = agent): Promise<unknown[]> {
      const find = () => decisionsOfCredential(gateway, of.credential.id).filter((d) => d.source === source && recordsText(d.sql, sql));
      await waitFor(() => find().length >= count, 3_000, `${count} ${source} decisions on ${sql}`);
      return find().map((d) => d.cache_status);
    }

    it('answers the same MCP query from the cache; an UPDATE through the wire proxy makes the next MCP read a miss with the new value', async () => {
      const read = 'select total from orders where id = 7';
      expect(await mcpQuery(read)).toEqual([['10.5']]);
      expect(await mcpQuery(read)).toEqual([['10.5']]);
      expect(await statuses('mcp', read, 2)).toEqual(['miss', 'hit']);
      await withAgentClient(agent, async (client) => {
        expect((await client.query('update orders set total = 99 where id = 7')).rowCount).toBe(1);
      });
      expect(await mcpQuery(read)).toEqual([['99']]);
      expect(await mcpQuery(read)).toEqual([['99']]);
      expect(await statuses('mcp', read, 4)).toEqual(['miss', 'hit', 'miss', 'hit']);
    });

    it('an UPDATE through the MCP makes the wire proxy’s next read a miss with the new value', async () => {
      const read = 'select total from orders where id = 8';
      await withAgentClient(agent, async (client) => {
        expect((await client.query(read)).rows).toEqual([{ total: '12.0' }]);
        expect((await client.query(read)).rows).toEqual([{ total: '12.0' }]);
        const update = await mcp.callTool({ name: 'query', arguments: { sql: 'update orders set total = 5 where id = 8' } });
        expect((update.structuredContent as { command: string }).command).toBe('UPDATE 1');
        expect((await client.query(read)).rows).toEqual([{ total: '5' }]);
        expect((await client.query(read)).rows).toEqual([{ total: '5' }]);
      });
      expect(await statuses('wire', read, 4)).toEqual(['miss', 'hit', 'miss', 'hit']);
      expect(await statuses('mcp', 'update orders set total = 5 where id = 8', 1)).toEqual(['bypass']);
    });

    it('never serves one policy’s cached MCP rows to a credential whose policy masks differently', async () => {
      const read = 'select id, email from customers order by id limit 2';
      for (let round = 0; round < 2; round++) {
        expect(await mcpQuery(read)).toEqual([[1, 'user1@example.com'], [2, 'user2@example.com']]);
        expect(await mcpQuery(read, maskedMcp)).toEqual([[1, '[redacted]'], [2, '[redacted]']]);
      }
      expect(await statuses('mcp', read, 2)).toEqual(['miss', 'hit']);
      expect(await statuses('mcp', read, 2, masked)).toEqual(['miss', 'hit']);
    });
  });
}

// Issue 22 (hole 3): the wire proxy answered a write before its invalidation left the process, so
// the agent's next read through the hosted MCP of a split deployment could be served the cached
// result from before the write. With the proxy's link to NATS slowed (a real TCP hop that takes
// LINK_DELAY_MS towards the server), the answer now waits for the note to reach NATS; reads do not wait.
describe('the wire proxy answers a write once its invalidation reached NATS (split, the proxy’s link slow)', () => {
  const LINK_DELAY_MS = 300;
  let link: SlowLink;
  let proxyFanout: Fanout;
  let apiFanout: Fanout;
  let gateway: TestGateway;
  let agent: AgentSecrets;
  let mcp: Client;

  beforeAll(async () => {
    const nats = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
    link = await slowLink({ host: nats.hostname, port: Number(nats.port || 4222) }, LINK_DELAY_MS);
    const subject = `pgward.test.cache.${randomUUID()}`;
    proxyFanout = await connectNatsFanout({ url: `nats://127.0.0.1:${link.port}`, subject });
    apiFanout = await connectNatsFanout({ url: nats.toString(), subject });
    gateway = await startGateway('mcp_cache_slow', undefined, 60_000, {}, undefined, {}, { proxy: { cacheFanout: proxyFanout }, apiCacheFanout: apiFanout });
    agent = await registerOn(gateway, await createPolicy(gateway, { name: 'writes orders', read_only: false, allowed_tables: ['public.*'] }), 'agent');
    mcp = await connectAgent(`${await listenForAgents(gateway)}/mcp`, agent.mcp_token, 'pgward-cache-test');
  });
  afterAll(async () => {
    await mcp?.close();
    await gateway?.stop();
    await Promise.all([proxyFanout?.close(), apiFanout?.close()]);
    await link?.close();
  });

  const mcpTotal = async (id: number): Promise<unknown> => {
    const result = await mcp.callTool({ name: 'query', arguments: { sql: `select total from orders where id = ${id}` } });
    return (result.structuredContent as { rows: unknown[][] }).rows[0]![0];
  };

  it('an UPDATE on either protocol, or a COMMIT, then at once an MCP read: a miss with the new value', async () => {
    const client = await connectAgentClient(agent);
    try {
      const writes: [number, (total: number) => Promise<unknown>][] = [
        [9, (total) => client.query(`update orders set total = ${total} where id = 9`)],
        [10, (total) => client.query({ text: 'update orders set total = $1 where id = 10', values: [total] })],
        [11, async (total) => {
          await client.query('begin');
          await client.query(`update orders set total = ${total} where id = 11`);
          return client.query('commit');
        }],
      ];
      for (const [id, write] of writes) {
        expect(await mcpTotal(id)).toBe((id * 1.5).toFixed(1));
        expect(await mcpTotal(id)).toBe((id * 1.5).toFixed(1));
        const started = performance.now();
        await write(id + 100);
        const answeredMs = performance.now() - started;
        expect(await mcpTotal(id)).toBe(String(id + 100));
        expect(answeredMs).toBeGreaterThanOrEqual(LINK_DELAY_MS - 10);
        const find = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'mcp' && recordsText(d.sql, `select total from orders where id = ${id}`));
        await waitFor(() => find().length >= 3, 3_000, `3 MCP reads of order ${id}`);
        expect(find().map((d) => d.cache_status)).toEqual(['miss', 'hit', 'miss']);
      }
      // A read publishes nothing: its answer does not wait for the link.
      const started = performance.now();
      expect((await client.query('select total from orders where id = 9')).rows).toEqual([{ total: '109' }]);
      expect(performance.now() - started).toBeLessThan(LINK_DELAY_MS - 10);
    } finally {
      await client.end();
    }
  });
});
