/**
 * Held statements sent with parameters (the extended protocol: Parse, Bind, Execute) are held like
 * simple queries, bound to their parameter values and formats: node-postgres's client.query(text,
 * params) and postgres.js (named prepared statements) get the NOTICE, then their result once
 * approved, or the rejection; other parameters are another request.
 */
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { RawWire, serialize } from '../support/raw-wire.js';
import { openSession, waitFor } from '../support/wire.js';

let gateway: TestGateway;
let agent: AgentSecrets;

interface Approval { id: string; status: string; sql: string; estimated_rows: number | null; estimate_method: string | null }

const approvals = async (): Promise<Approval[]> =>
  ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/approvals?page_size=100&credential_id=${agent.credential.id}` })).json() as { approvals: Approval[] }).approvals;

/** The pending requests for `sql` other than `known`, once there are `count`. */
async function pendingFor(sql: string, count = 1, known: readonly string[] = []): Promise<Approval[]> {
  let found: Approval[] = [];
  await waitFor(async () => (found = (await approvals()).filter((a) => a.sql === sql && a.status === 'pending' && !known.includes(a.id))).length >= count, 10_000, `${count} pending requests for ${sql}`);
  return found;
}

const decide = (id: string, verdict: 'approve' | 'reject') => gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${id}/${verdict}`, payload: { reason: 'checked' } });

async function amountOf(id: number): Promise<string> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return (await client.query<{ amount: string }>('select amount::text as amount from orders where id = $1', [id])).rows[0]!.amount;
  } finally {
    await client.end();
  }
}

const UPDATE = 'update orders set amount = $1 where id = $2';

beforeAll(async () => {
  gateway = await startGateway('approvals_extended');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  await seed.query('alter table orders add column amount numeric not null default 5');
  await seed.end();
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${gateway.policyId}`, payload: { approval: { held_kinds: ['update'] } } });
  expect(patched.statusCode).toBe(200);
  agent = await gateway.register('held-extended');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('parameterised statements held for approval', () => {
  it('node-postgres: NOTICE, approved over REST, then its own result; the estimate counts with its parameters', async () => {
    const { client } = await openSession(agent.connection_string);
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    try {
      const ran = client.query(UPDATE, [11, 70]);
      const [request] = await pendingFor(UPDATE);
      expect(request).toMatchObject({ estimated_rows: 1, estimate_method: 'trial' });
      expect(await amountOf(70)).toBe('5');
      expect((await decide(request!.id, 'approve')).statusCode).toBe(200);
      expect((await ran).rowCount).toBe(1);
      expect(notices).toEqual([`statement held for approval (request ${request!.id}); waiting for a reviewer`]);
      expect(await amountOf(70)).toBe('11');
      await waitFor(async () => (await approvals()).find((a) => a.id === request!.id)?.status === 'executed', 5_000, 'executed');
      expect((await client.query('select amount::text as amount from orders where id = $1', [70])).rows).toEqual([{ amount: '11' }]);
    } finally {
      await client.end();
    }
  });

  it('node-postgres: a rejection fails the query with the reason; the session stays usable; nothing changed', async () => {
    const { client } = await openSession(agent.connection_string);
    try {
      const failed = client.query(UPDATE, [12, 71]).then(() => undefined, (error: unknown) => error as { code?: string; message: string });
      const [request] = await pendingFor(UPDATE);
      await decide(request!.id, 'reject');
      const error = await failed;
      expect(error).toMatchObject({ code: '42501' });
      expect(error!.message).toContain(`statement rejected by a reviewer (request ${request!.id}`);
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      expect(await amountOf(71)).toBe('5');
    } finally {
      await client.end();
    }
  });

  it('other parameters are another request: approving one runs only its own values', async () => {
    const first = await openSession(agent.connection_string);
    const second = await openSession(agent.connection_string);
    try {
      const ranFirst = first.client.query(UPDATE, [13, 72]);
      const [mine] = await pendingFor(UPDATE);
      const failedSecond = second.client.query(UPDATE, [14, 72]).then(() => undefined, (error: unknown) => error as { code?: string });
      const [other] = await pendingFor(UPDATE, 1, [mine!.id]);
      expect(other!.id).not.toBe(mine!.id);
      await decide(mine!.id, 'approve');
      expect((await ranFirst).rowCount).toBe(1);
      expect(await amountOf(72)).toBe('13');
      expect((await approvals()).find((a) => a.id === other!.id)?.status).toBe('pending');
      await decide(other!.id, 'reject');
      expect(await failedSecond).toMatchObject({ code: '42501' });
      expect(await amountOf(72)).toBe('13');
    } finally {
      await first.client.end();
      await second.client.end();
    }
  });

  it('postgres.js (named prepared statements): NOTICE, approved, its result; a second run of the statement is held again', async () => {
    const notices: string[] = [];
    const sql = postgres(agent.connection_string, { max: 1, onnotice: (notice) => notices.push(String(notice.message)) });
    try {
      // postgres.js sends a query once it is awaited (then is called).
      const ran = sql`update orders set amount = ${16} where id = ${73}`.then((result) => result.count);
      const text = 'update orders set amount = $1 where id = $2';
      const [request] = await pendingFor(text);
      await decide(request!.id, 'approve');
      expect(await ran).toBe(1);
      expect(notices).toEqual([`statement held for approval (request ${request!.id}); waiting for a reviewer`]);
      expect(await amountOf(73)).toBe('16');
      const again = sql`update orders set amount = ${17} where id = ${73}`.then(() => undefined, (error: unknown) => error as { code?: string });
      const [next] = await pendingFor(text, 1, [request!.id]);
      await decide(next!.id, 'reject');
      expect(await again).toMatchObject({ code: '42501' });
      expect(await amountOf(73)).toBe('16');
    } finally {
      await sql.end();
    }
  });

  it('a held Execute after another Execute of its batch is refused as in a transaction block (25001): the batch rolls back (as after any refusal), nothing is held, the session goes on', async () => {
    const wire = await RawWire.open(agent.connection_string);
    try {
      const insert = serialize.parse({ text: `insert into orders (id, customer, total) values (4001, 'batch', 1)` });
      const update = serialize.parse({ text: UPDATE });
      const replies = await wire.turn([insert, serialize.bind({}), serialize.execute({}), update, serialize.bind({ values: ['18', '74'] }), serialize.execute({}), serialize.sync()]);
      expect(replies.slice(0, 5)).toEqual(['1', '2', 'C INSERT 0 1', '1', '2']);
      expect(replies[5]).toMatch(/^E 25001 this statement needs a human's approval: .*; statements are held for approval outside transaction blocks only, so it did not run \(rule approval\.in_transaction\); end the transaction \(COMMIT or ROLLBACK\) and send it on its own$/);
      expect(replies.slice(6)).toEqual(['Z I']);
      expect(await wire.query('select count(*) from orders where id = 4001')).toEqual(['T', 'D 1', 'C SELECT 1', 'Z I']);
      expect(wire.values.at(-1)).toBe('0');
      expect(await amountOf(74)).toBe('5');
      expect((await approvals()).filter((a) => a.sql === UPDATE && a.status === 'pending')).toEqual([]);
      // Any refusal of the gateway after a statement of its batch ran undoes the batch, as PostgreSQL's own error would.
      const refused = await wire.turn([serialize.parse({ text: `insert into orders (id, customer, total) values (4002, 'batch', 1)` }), serialize.bind({}), serialize.execute({}), serialize.parse({ text: 'select * from other.secrets' }), serialize.bind({}), serialize.execute({}), serialize.sync()]);
      expect(refused.slice(0, 3)).toEqual(['1', '2', 'C INSERT 0 1']);
      expect(refused.slice(3, 4)).toEqual([expect.stringMatching(/^E 42501 /)]);
      expect(refused.slice(4)).toEqual(['Z I']);
      expect(await wire.query('select count(*) from orders where id in (4001, 4002)')).toEqual(['T', 'D 1', 'C SELECT 1', 'Z I']);
      expect(wire.values.at(-1)).toBe('0');
    } finally {
      wire.close();
    }
  });
});
