/**
 * Red team: the result cache and the implicit transaction of an extended-protocol batch. Every
 * Execute before a Sync runs in one implicit transaction upstream, so `SET LOCAL` or
 * `set_config(..., true)` in one Execute changes what the next Execute of the batch reads, though the
 * gateway sees the session idle. A read after such a statement is not looked up in the cache nor
 * kept: another credential (or the same one later) would be served rows shaped by this batch's
 * settings. A batch of only reads still caches.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { createPolicy, rawTurn, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

let gateway: TestGateway;
let poisoner: AgentSecrets;
let victim: AgentSecrets;

beforeAll(async () => {
  gateway = await startGateway('cache_batch_state');
  const policy = await createPolicy(gateway, { name: 'readers', read_only: true, allowed_tables: ['public.*'] });
  poisoner = await registerOn(gateway, policy, 'poisoner');
  victim = await registerOn(gateway, policy, 'victim');
});
afterAll(async () => {
  await gateway?.stop();
});

/** One batch: each text as Parse, Bind, Execute of the unnamed statement, then one Sync; the rows of every Execute. */
async function batch(agent: AgentSecrets, texts: readonly string[]): Promise<(string | null)[][]> {
  return withAgentClient(agent, async (client) => {
    const outcome = await rawTurn(client, (connection) => {
      for (const text of texts) {
        connection.parse({ text });
        connection.bind({});
        connection.execute({});
      }
      connection.sync();
    });
    expect(outcome.error).toBeUndefined();
    return outcome.rows;
  });
}

/** The read as node-postgres sends it on its own (its own batch), by another credential of the same policy. */
async function readAlone(agent: AgentSecrets, text: string): Promise<string> {
  const result = await withAgentClient(agent, (client) => client.query({ text, queryMode: 'extended' } as pg.QueryConfig));
  return String((result.rows[0] as { t: string }).t);
}

async function statuses(agent: AgentSecrets, sql: string, count: number): Promise<unknown[]> {
  const find = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'wire' && recordsText(d.sql, sql));
  await waitFor(() => find().length >= count, 3_000, `${count} decisions on ${sql}`);
  return find().map((d) => d.cache_status);
}

const settings: readonly (readonly [string, string])[] = [
  ['set_config(..., true)', "select set_config('timezone', 'Pacific/Chatham', true)"],
  ["set_config(..., 'on')", "select set_config('TimeZone', 'Pacific/Chatham', 'on')"],
  ['SET LOCAL', "set local timezone = 'Pacific/Chatham'"],
  ['SET LOCAL TIME ZONE', "set local time zone 'Pacific/Chatham'"],
];

describe('a read after a local setting in the same extended batch', () => {
  settings.forEach(([how, setting], index) => {
    it(`is neither served from nor kept in the cache (${how})`, async () => {
      const read = `select (timestamptz '2024-01-01 00:00:00+00' + interval '${index} day')::text as t from orders where id = 1`;
      const truth = await readAlone(victim, `/* pgward:no-cache */ ${read}`);
      expect(truth).not.toContain('+13:45');
      const rows = await batch(poisoner, [setting, read]);
      expect(rows.at(-1)?.[0]).toContain('+13:45');
      expect(await readAlone(victim, read)).toBe(truth);
      expect(await readAlone(victim, read)).toBe(truth);
      expect(await statuses(poisoner, read, 1)).toEqual(['bypass']);
      expect(await statuses(victim, read, 2)).toEqual(['miss', 'hit']);
    });
  });

  it('a batch of reads only still caches, and the next batch after a Sync is clean again', async () => {
    const read = 'select customer as t from orders where id = 2';
    await batch(poisoner, ["set local timezone = 'Pacific/Chatham'"]);
    // A result read in a batch is kept at its Sync: the second batch's read is the hit.
    expect(await batch(poisoner, [read])).toEqual([['c2']]);
    expect(await batch(poisoner, [read])).toEqual([['c2']]);
    expect(await statuses(poisoner, read, 2)).toEqual(['miss', 'hit']);
  });
});
