/**
 * Issue 22's result cache through the real proxy: psql (simple protocol) and node-postgres on the
 * extended protocol (unnamed and named statements, text and binary results). The same SELECT twice
 * is a miss then a hit in the audit trail; an UPDATE through the gateway makes the next read a miss
 * with the new value; two credentials whose policies mask differently never see each other's
 * cached rows; an extended-protocol hit returns exactly what its miss returned; a shape whose keys
 * never repeat stops being looked up, and is looked up again once they do.
 */
import { execFile } from 'node:child_process';
import type { Socket } from 'node:net';
import { serialize } from 'pg-protocol';
import { promisify } from 'node:util';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WINDOW as COLD_WINDOW } from '../../proxy/cache/cold-shapes.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { createPolicy, patchDatabase, registerOn, withAgentClient } from '../support/proxy-agents.js';
import { auditedRuns, decisionsOfCredential, recordsText } from '../support/recorded.js';
import { waitFor } from '../support/wire.js';

const exec = promisify(execFile);

let gateway: TestGateway;
let plain: AgentSecrets;
let masked: AgentSecrets;
/** Chains the decisions into the audit trail, which `auditedRuns` reads over REST. */
let ingest: RunningIngest;

beforeAll(async () => {
  gateway = await startGateway('result_cache');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }) });
  plain = await registerOn(gateway, await createPolicy(gateway, { name: 'shows emails', read_only: false, allowed_tables: ['public.*'] }), 'plain');
  masked = await registerOn(gateway, await createPolicy(gateway, { name: 'redacts emails', read_only: false, allowed_tables: ['public.*'], masked_columns: { 'public.customers.email': 'redact' } }), 'masked');
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

async function psql(agent: AgentSecrets, sql: string): Promise<string> {
  const { stdout } = await exec('psql', [agent.connection_string, '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql], { env: { ...process.env, PGCONNECT_TIMEOUT: '10' }, timeout: 20_000 });
  return stdout.trim();
}

/** The cache_status of each recorded run of `sql` by the agent, in order, once there are `count`. */
async function statuses(agent: AgentSecrets, sql: string, count: number): Promise<unknown[]> {
  const find = () => decisionsOfCredential(gateway, agent.credential.id).filter((d) => d.source === 'wire' && recordsText(d.sql, sql));
  await waitFor(() => find().length >= count, 3_000, `${count} decisions on ${sql}`);
  return find().map((d) => d.cache_status);
}

/** Runs `read` until its last recorded run has cache status `status` (a database change reaches the proxy's view within moments). */
function readUntil(client: pg.Client, read: string, status: string): Promise<void> {
  return waitFor(async () => {
    await client.query(read);
    return (await statuses(plain, read, 1)).at(-1) === status;
  }, 5_000, `a ${status} of ${read}`);
}

describe('the result cache on the simple protocol (psql)', () => {
  it('answers the same SELECT again from the cache; an UPDATE through the gateway makes the next read a miss with the new value', async () => {
    const read = 'select total from orders where id = 7';
    expect(await psql(plain, read)).toBe('10.5');
    expect(await psql(plain, read)).toBe('10.5');
    expect(await statuses(plain, read, 2)).toEqual(['miss', 'hit']);
    expect(await psql(plain, 'update orders set total = 99 where id = 7')).toBe('UPDATE 1');
    expect(await psql(plain, read)).toBe('99');
    expect(await psql(plain, read)).toBe('99');
    expect(await statuses(plain, read, 4)).toEqual(['miss', 'hit', 'miss', 'hit']);
    const update = decisionsOfCredential(gateway, plain.credential.id).find((d) => d.statement_kind === 'update');
    expect(update?.cache_status).toBe('bypass');
    // Where each ran (StatementDecided v2), as the audit REST output shows it: misses upstream on the primary, hits from the cache.
    const runs = await auditedRuns(gateway, plain.credential.id, read, 4);
    expect(runs.map((e) => [e.cache_status, e.ran_on, e.replica_id, e.upstream_region])).toEqual([
      ['miss', 'primary', null, 'local'],
      ['hit', 'cache', null, null],
      ['miss', 'primary', null, 'local'],
      ['hit', 'cache', null, null],
    ]);
  });

  it('invalidates at every Execute of a prepared UPDATE, not only at its Parse', async () => {
    const read = 'select total from orders where id = 50';
    await withAgentClient(plain, async (writer) => {
      for (const total of ['1', '2', '3']) {
        // node-postgres parses the named statement once, then sends only Bind and Execute.
        await writer.query({ name: 'set_total', text: 'update orders set total = $1 where id = 50', values: [total] });
        expect(await psql(plain, read)).toBe(total);
        expect(await psql(plain, read)).toBe(total);
      }
    });
    expect(await statuses(plain, read, 6)).toEqual(['miss', 'hit', 'miss', 'hit', 'miss', 'hit']);
  });

  it('keeps no result read inside a transaction the client pipelined (BEGIN sent before the gateway saw it answered)', async () => {
    const read = 'select total from orders where id = 60';
    const turn = [serialize.query('begin'), serialize.query('update orders set total = 777 where id = 60'), serialize.query(read)];
    // While the transaction is open, another session reads the committed value: the uncommitted one was never kept.
    const replies = await rawReplies(plain, turn, 3, async () => expect(await psql(plain, read)).toBe('90.0'));
    expect(replies.includes(Buffer.from('777'))).toBe(true);
    expect(await psql(plain, read)).toBe('90.0');
    expect(await statuses(plain, read, 3)).toEqual(['miss', 'miss', 'hit']);
  });

  it('never serves one policy’s cached rows to a credential whose policy masks differently', async () => {
    const read = 'select id, email from customers order by id limit 2';
    for (let round = 0; round < 2; round++) {
      expect(await psql(plain, read)).toBe('1|user1@example.com\n2|user2@example.com');
      expect(await psql(masked, read)).toBe('1|[redacted]\n2|[redacted]');
    }
    expect(await statuses(plain, read, 2)).toEqual(['miss', 'hit']);
    expect(await statuses(masked, read, 2)).toEqual(['miss', 'hit']);
  });

  it('bypasses a statement with the no-cache hint, a volatile function, and reads in a transaction', async () => {
    const hinted = '/* pgward:no-cache */ select count(*) from orders';
    const volatile = 'select random() < 2 as ok from orders where id = 1';
    for (let round = 0; round < 2; round++) {
      expect(await psql(plain, hinted)).toBe('1000');
      expect(await psql(plain, volatile)).toBe('t');
    }
    expect(await statuses(plain, hinted, 2)).toEqual(['bypass', 'bypass']);
    expect(await statuses(plain, volatile, 2)).toEqual(['bypass', 'bypass']);
    const inTransaction = 'select total from orders where id = 8';
    await withAgentClient(plain, async (client) => {
      await client.query('begin');
      await client.query(inTransaction);
      await client.query(inTransaction);
      await client.query('commit');
    });
    expect(await statuses(plain, inTransaction, 2)).toEqual(['bypass', 'bypass']);
  });

  it('follows the database’s cache_config: turned off, every read bypasses it, in open sessions too; turned on, it caches again', async () => {
    const read = 'select customer from orders where id = 9';
    await withAgentClient(plain, async (client) => {
      await client.query(read);
      await patchDatabase(gateway, { cache_config: { enabled: false, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 } });
      await readUntil(client, read, 'bypass');
      await client.query(read);
      await patchDatabase(gateway, { cache_config: { enabled: true, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 } });
      await readUntil(client, read, 'hit');
    });
    // Before the change reached the proxy's view, reads were still hits; then bypasses only; then a miss (the entries went) and hits.
    const seen = (await statuses(plain, read, 4)).join(' ');
    expect(seen).toMatch(/^miss (hit )*(bypass )+miss( hit)+$/);
  });

  it('counts hits, misses and bytes on /metrics', async () => {
    const text = await gateway.metrics.metrics();
    expect(text).toMatch(/pgward_proxy_cache_lookups_total\{outcome="hit"\} [1-9]/);
    expect(text).toMatch(/pgward_proxy_cache_lookups_total\{outcome="miss"\} [1-9]/);
    expect(text).toMatch(/pgward_proxy_cache_bytes [1-9]/);
  });
});

/** How many ReadyForQuery messages the whole messages in `bytes` hold. */
function readiesIn(bytes: Buffer): number {
  let readies = 0;
  for (let at = 0; at + 5 <= bytes.length; at += 1 + bytes.readInt32BE(at + 1)) if (bytes[at] === 0x5a) readies++;
  return readies;
}

/**
 * Logs in with node-postgres, then sends `messages` by hand on a fresh connection; every byte the
 * gateway answers, up to its `readies`th ReadyForQuery. `meanwhile` runs before the connection closes.
 */
async function rawReplies(agent: AgentSecrets, messages: readonly Buffer[], readies = 1, meanwhile?: () => Promise<void>): Promise<Buffer> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  await client.connect();
  const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
  socket.removeAllListeners('data');
  const received: Buffer[] = [];
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no ReadyForQuery within 10 s')), 10_000);
      socket.on('data', (chunk: Buffer) => {
        received.push(chunk);
        const all = Buffer.concat(received);
        if (readiesIn(all) >= readies) {
          clearTimeout(timer);
          resolve(all);
        }
      });
      socket.write(Buffer.concat(messages));
    }).then(async (replies) => (await meanwhile?.(), replies));
  } finally {
    socket.destroy();
  }
}

describe('the result cache on the extended protocol (node-postgres)', () => {
  it('answers a hit with exactly the bytes its miss got: named statement, binary results, Describe of the portal', async () => {
    const text = 'select id, total, customer from orders where id between $1 and $2 order by id';
    const turn = [
      serialize.parse({ name: 'range', text, types: [23, 23] }),
      serialize.bind({ statement: 'range', values: ['40', '43'], binary: true }),
      serialize.describe({ type: 'P', name: '' }),
      serialize.execute({}),
      serialize.sync(),
    ];
    const miss = await rawReplies(plain, turn);
    const hit = await rawReplies(plain, turn);
    expect(miss.length).toBeGreaterThan(100);
    expect(hit.equals(miss)).toBe(true);
    expect(await statuses(plain, text, 2)).toEqual(['miss', 'hit']);
  });

  const queries: readonly (readonly [string, pg.QueryConfig])[] = [
    ['unnamed, text results', { text: 'select id, total, customer from orders where id = $1', values: [11] }],
    ['named, text results', { name: 'by_id', text: 'select id, total, customer as named from orders where id = $1', values: [12] }],
    ['unnamed, binary results', { text: 'select id, total from orders where id between $1 and $2 order by id', values: [20, 24], binary: true } as pg.QueryConfig],
    ['masked column', { text: 'select id, email from customers where id = $1', values: [3] }],
  ];

  for (const [what, query] of queries) {
    it(`returns on a hit exactly what the miss returned (${what})`, async () => {
      for (const agent of [plain, masked]) {
        await withAgentClient(agent, async (client) => {
          const miss = await client.query({ ...query, queryMode: 'extended' } as pg.QueryConfig);
          const hit = await client.query({ ...query, queryMode: 'extended' } as pg.QueryConfig);
          expect(hit.rows).toEqual(miss.rows);
          expect(hit.fields).toEqual(miss.fields);
          expect(hit.command).toBe(miss.command);
          expect(hit.rowCount).toBe(miss.rowCount);
        });
        expect(await statuses(agent, query.text, 2)).toEqual(['miss', 'hit']);
      }
    });
  }

  it('keys parameters: another value is a miss with its own rows', async () => {
    const text = 'select customer from orders where id = $1';
    await withAgentClient(plain, async (client) => {
      expect((await client.query({ text, values: [31], queryMode: 'extended' } as pg.QueryConfig)).rows).toEqual([{ customer: 'c1' }]);
      expect((await client.query({ text, values: [32], queryMode: 'extended' } as pg.QueryConfig)).rows).toEqual([{ customer: 'c2' }]);
      expect((await client.query({ text, values: [31], queryMode: 'extended' } as pg.QueryConfig)).rows).toEqual([{ customer: 'c1' }]);
    });
    expect(await statuses(plain, text, 3)).toEqual(['miss', 'miss', 'hit']);
  });

  it('skips the lookups of a shape whose keys never repeat, answering each right, and looks it up again once its keys repeat', async () => {
    const text = 'select total from orders where id = $1';
    const other = 'select customer, id from orders where id = $1';
    const counters = async (): Promise<Record<'hit' | 'miss' | 'skip', number>> => {
      const scraped = await gateway.metrics.metrics();
      const count = (name: string): number => Number(scraped.match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1] ?? 0);
      return { hit: count('pgward_proxy_cache_lookups_total\\{outcome="hit"\\}'), miss: count('pgward_proxy_cache_lookups_total\\{outcome="miss"\\}'), skip: count('pgward_proxy_cache_cold_skips_total') };
    };
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    await upstream.connect();
    const totals = new Map((await upstream.query<{ id: number; total: string }>('select id, total::text as total from orders')).rows.map((row) => [row.id, row.total]));
    await upstream.end();
    const start = await counters();
    await withAgentClient(plain, async (client) => {
      const run = async (sql: string, id: number): Promise<unknown> => Object.values((await client.query({ text: sql, values: [id], queryMode: 'extended' } as pg.QueryConfig)).rows[0] ?? {})[0];
      // A window of distinct keys (ids past the table's 1,000 are rows of no one: still distinct results).
      for (let id = 1; id <= COLD_WINDOW; id++) expect(await run(text, id)).toBe(totals.get(id));
      const cold = await counters();
      expect(cold.skip).toBe(start.skip);
      for (let id = 1; id <= 100; id++) expect(await run(text, id)).toBe(totals.get(id));
      // Each of the 100 skipped, or drawn and looked up (a hit: the window kept it); about 15 in 16 skipped.
      const after = await counters();
      expect(after.skip - cold.skip + (after.hit - cold.hit) + (after.miss - cold.miss)).toBe(100);
      expect(after.skip - cold.skip).toBeGreaterThan(70);

      // A skipped read changes nothing the next read of its batch sees: that one is still answered from the cache.
      expect(await run(other, 77)).toBe('c7');
      expect(await run(other, 77)).toBe('c7');
      for (let batch = 0; batch < 3; batch++) {
        const pipelined = [
          serialize.parse({ text }),
          serialize.bind({ values: [String(2000 + batch)] }),
          serialize.execute({}),
          serialize.parse({ text: other }),
          serialize.bind({ values: ['77'] }),
          serialize.execute({}),
          serialize.sync(),
        ];
        await rawReplies(plain, pipelined);
      }
      expect(await statuses(plain, other, 5)).toEqual(['miss', 'hit', 'hit', 'hit', 'hit']);

      // One key again and again: its drawn lookups hit, the shape warms, and then every run is a hit.
      let hits = 0;
      let before = await counters();
      for (let runs = 0; hits < 20 && runs < 8 * COLD_WINDOW; runs++) {
        expect(await run(text, 5)).toBe(totals.get(5));
        const now = await counters();
        hits = now.hit === before.hit + 1 ? hits + 1 : 0;
        before = now;
      }
      expect(hits).toBe(20);
    });
  }, 60_000);

  it('masked rows stay masked on hits, and the other policy’s hits stay unmasked', async () => {
    const query = { text: 'select email from customers where id = $1', values: [4], queryMode: 'extended' } as pg.QueryConfig;
    for (let round = 0; round < 2; round++) {
      expect((await withAgentClient(masked, (client) => client.query(query))).rows).toEqual([{ email: '[redacted]' }]);
      expect((await withAgentClient(plain, (client) => client.query(query))).rows).toEqual([{ email: 'user4@example.com' }]);
    }
  });
});
