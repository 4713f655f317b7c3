/**
 * Estimates and binding of held statements (issue 20): a held write's rows are counted by a trial
 * run rolled back; a row threshold holds only writes estimated above it; an auto-approve ceiling
 * runs writes within it at once; an approved write runs only if it affects the rows its reviewer
 * saw (within the rule's tolerance), else it is rolled back and its request fails; and two MCP calls
 * of one statement at once make one request.
 */
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { openSession, waitFor } from '../support/wire.js';
import { callTool, listenForAgents, withAgentMcp } from '../support/agent-mcp.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let ingest: RunningIngest;

interface Approval {
  id: string;
  status: string;
  sql: string;
  reason: string;
  estimated_rows: number | null;
  estimate_method: string | null;
  hold_rule: string;
  hold_reason: string;
  rows_affected: number | null;
}
interface Entry { event: string; sql: string; decision_rule: string; reason: string }

const approvals = async (): Promise<Approval[]> =>
  ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/approvals?page_size=100&credential_id=${agent.credential.id}` })).json() as { approvals: Approval[] }).approvals;

async function pendingFor(sql: string): Promise<Approval> {
  let found: Approval | undefined;
  await waitFor(async () => (found = (await approvals()).find((a) => a.sql === sql && a.status === 'pending')) !== undefined, 10_000, `a pending request for ${sql}`);
  return found!;
}

async function settled(id: string, status: string): Promise<Approval> {
  let found: Approval | undefined;
  await waitFor(async () => (found = (await approvals()).find((a) => a.id === id))?.status === status, 10_000, `${id} ${status}`);
  return found!;
}

const decide = (id: string, verdict: 'approve' | 'reject') => gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${id}/${verdict}`, payload: { reason: 'checked' } });

async function upstream<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

const amounts = async (grp: number): Promise<string[]> => (await upstream<{ amount: string }>('select amount::text as amount from orders where grp = $1 order by id', [grp])).map((r) => r.amount);

/** The policy's approval rules (and other fields); the proxy follows the change within moments. */
async function policy(payload: Record<string, unknown>): Promise<void> {
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${gateway.policyId}`, payload });
  expect(patched.statusCode, patched.body).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 300));
}

async function entriesFor(sql: string, count: number): Promise<Entry[]> {
  let found: Entry[] = [];
  await waitFor(
    async () => (found = ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100` })).json() as { entries: Entry[] }).entries.filter((e) => e.sql === sql)).length >= count,
    10_000,
    `${count} audit entries of ${sql}`,
  );
  return found;
}

beforeAll(async () => {
  gateway = await startGateway('approval_estimates');
  await upstream('alter table orders add column amount numeric not null default 5, add column grp int');
  // Groups of rows the tests write: 7 (drift), 8 (within tolerance), 9 (the cap), 10 (MCP), 11 (a planner's estimate).
  await upstream(`update orders set grp = case when id in (30, 31) then 7 when id in (40, 41) then 8 when id in (50, 51, 52) then 9 when id = 60 then 10 end where id in (30, 31, 40, 41, 50, 51, 52, 60)`);
  agent = await gateway.register('estimated');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('estimates of held writes', () => {
  it('row_threshold holds only a write estimated above it (a trial count, rolled back: nothing changes while it waits)', async () => {
    await policy({ approval: { row_threshold: 3 } });
    const { client } = await openSession(agent.connection_string);
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    try {
      expect((await client.query('update orders set amount = 1 where id = 1')).rowCount).toBe(1);
      expect(notices).toEqual([]);
      const sql = 'update orders set amount = 2 where id between 10 and 14';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string });
      const request = await pendingFor(sql);
      expect(request).toMatchObject({ estimated_rows: 5, estimate_method: 'trial', hold_rule: 'approval.row_threshold' });
      expect(request.hold_reason).toContain('it is estimated to affect 5 rows, more than the 3');
      expect((await upstream<{ n: number }>(`select count(*)::int as n from orders where id between 10 and 14 and amount = 5`))[0]!.n).toBe(5);
      expect((await decide(request.id, 'reject')).statusCode).toBe(200);
      expect(await failed).toMatchObject({ code: '42501' });
      expect((await upstream<{ amount: string }>('select amount::text as amount from orders where id = 1'))[0]!.amount).toBe('1');
    } finally {
      await client.end();
    }
  });

  it('auto_approve runs a write within its ceiling at once (audited approval.auto_approved); above it, or uncountable, it is held', async () => {
    await policy({ approval: { held_kinds: ['update', 'delete'], auto_approve: { 'public.orders': { max_rows: 2 } } } });
    const { client } = await openSession(agent.connection_string);
    try {
      const within = 'update orders set amount = 3 where id in (20, 21)';
      expect((await client.query(within)).rowCount).toBe(2);
      const [entry] = await entriesFor(within, 1);
      expect(entry).toMatchObject({ event: 'query', decision_rule: 'approval.auto_approved' });
      expect(entry!.reason).toContain('auto-approved: a trial run rolled back estimated 2 rows, within the approval.auto_approve max_rows 2 of public.orders');

      const above = 'update orders set amount = 3 where id between 22 and 24';
      const aboveFailed = client.query(above).then(() => undefined, (error: unknown) => error as { code?: string });
      const held = await pendingFor(above);
      expect(held).toMatchObject({ estimated_rows: 3, estimate_method: 'trial', hold_rule: 'approval.held_kind' });
      await decide(held.id, 'reject');
      expect(await aboveFailed).toMatchObject({ code: '42501' });

      const cte = 'with d as (delete from orders where id = 25 returning id) select * from d';
      const cteFailed = client.query(cte).then(() => undefined, (error: unknown) => error as { code?: string });
      const uncounted = await pendingFor(cte);
      expect(uncounted).toMatchObject({ estimated_rows: null, estimate_method: null });
      await decide(uncounted.id, 'reject');
      expect(await cteFailed).toMatchObject({ code: '42501' });
      expect((await upstream<{ n: number }>('select count(*)::int as n from orders where id = 25'))[0]!.n).toBe(1);
    } finally {
      await client.end();
    }
  });
});

describe('an approved write is bound to the rows its reviewer saw', () => {
  it('rows added between hold and approval: rolled back (55000, approval.count_drift), the request failed with both counts, the table unchanged', async () => {
    await policy({ approval: { held_kinds: ['update'] } });
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'update orders set amount = 4 where grp = 7';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string; message: string });
      const request = await pendingFor(sql);
      expect(request).toMatchObject({ estimated_rows: 2, estimate_method: 'trial' });
      await upstream(`insert into orders (id, customer, total, grp) values (2001, 'late', 1, 7)`);
      expect((await decide(request.id, 'approve')).statusCode).toBe(200);
      const error = await failed;
      expect(error).toMatchObject({ code: '55000' });
      expect(error!.message).toContain('approved it as affecting 2 rows');
      expect(error!.message).toContain('it affected 3 rows, so it was rolled back and nothing changed (rule approval.count_drift)');
      const ended = await settled(request.id, 'failed');
      expect(ended.reason).toContain('failed (55000): its reviewer approved it as affecting 2 rows');
      expect(ended.reason).toContain('it affected 3 rows');
      expect(await amounts(7)).toEqual(['5', '5', '5']);
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('a planner’s estimate (the trial took too long) binds up to ten times it: more rows by approval time roll it back (55000, approval.count_drift)', async () => {
    await policy({ approval: { held_kinds: ['update'] } });
    await upstream(`update orders set grp = 11 where id in (70, 71, 72)`);
    // Updating row 70 takes 2.2 s (a trigger the gateway does not see): the trial runs out of its 2 s, so the estimate is EXPLAIN's.
    await upstream(`create function slow_row() returns trigger language plpgsql as $$ begin if new.id = 70 then perform pg_sleep(2.2); end if; return new; end $$;
      create trigger slow_row before update on orders for each row when (new.grp = 11) execute function slow_row()`);
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'update orders set amount = 3 where grp = 11';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string; message: string });
      const request = await pendingFor(sql);
      expect(request.estimate_method).toBe('plan');
      const planned = request.estimated_rows!;
      const most = Math.max(planned, 1) * 10;
      // One row more than the bound by the time it runs.
      await upstream(`insert into orders (id, customer, total, grp) select g, 'late', 1, 11 from generate_series(3001, 3000 + $1::int) g`, [most + 1 - 3]);
      expect((await decide(request.id, 'approve')).statusCode).toBe(200);
      const error = await failed;
      expect(error).toMatchObject({ code: '55000' });
      expect(error!.message).toBe(
        `its reviewer approved it on the planner’s estimate of ${planned} rows (EXPLAIN; a trial run took too long), and an approval on a planner’s estimate lets it affect at most 10 times that, so it had to affect 0 to ${most} rows; it affected ${most + 1} rows, so it was rolled back and nothing changed (rule approval.count_drift)`,
      );
      const ended = await settled(request.id, 'failed');
      expect(ended.reason).toContain(`it affected ${most + 1} rows`);
      expect((await upstream<{ n: number }>(`select count(*)::int as n from orders where grp = 11 and amount = 3`))[0]!.n).toBe(0);
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
      await upstream('drop trigger slow_row on orders; drop function slow_row()');
    }
  });

  it('within the rule’s row_tolerance_percent it runs (UPDATE 3 against a count of 2 under 50%)', async () => {
    await policy({ approval: { held_kinds: ['update'], row_tolerance_percent: 50 } });
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'update orders set amount = 4 where grp = 8';
      const ran = client.query(sql);
      const request = await pendingFor(sql);
      expect(request.estimated_rows).toBe(2);
      await upstream(`insert into orders (id, customer, total, grp) values (2002, 'late', 1, 8)`);
      await decide(request.id, 'approve');
      expect((await ran).rowCount).toBe(3);
      expect((await settled(request.id, 'executed')).rows_affected).toBe(3);
      expect(await amounts(8)).toEqual(['4', '4', '4']);
    } finally {
      await client.end();
    }
  });

  it('max_affected_rows still applies after approval: rolled back (54000), failed, unchanged', async () => {
    await policy({ approval: { held_kinds: ['update'] }, max_affected_rows: 2 });
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'update orders set amount = 4 where grp = 9';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string });
      const request = await pendingFor(sql);
      await decide(request.id, 'approve');
      expect(await failed).toMatchObject({ code: '54000' });
      expect((await settled(request.id, 'failed')).reason).toContain('failed (54000): the write affected 3 rows');
      expect(await amounts(9)).toEqual(['5', '5', '5']);
    } finally {
      await client.end();
      await policy({ max_affected_rows: null });
    }
  });
});

describe('the hosted MCP', () => {
  it('two calls of one statement at once make one request; approved, two calls at once run it once', async () => {
    await policy({ approval: { held_kinds: ['update'] } });
    const url = await listenForAgents(gateway);
    const sql = 'update orders set amount = amount + 1 where grp = 10';
    await withAgentMcp(`${url}/mcp`, agent, async (client) => {
      const held = await Promise.all([callTool(client, 'query', { sql }), callTool(client, 'query', { sql })]);
      const ids = held.map((result) => (result._meta as Record<string, { approval_id: string }>)['pgward/approval']!.approval_id);
      expect(ids[0]).toBe(ids[1]);
      const request = await pendingFor(sql);
      expect(request.id).toBe(ids[0]);
      expect((await approvals()).filter((a) => a.sql === sql)).toHaveLength(1);
      await decide(request.id, 'approve');
      await settled(request.id, 'approved');
      const ran = (await Promise.all([callTool(client, 'query', { sql }), callTool(client, 'query', { sql })])).filter((result) => !result.isError);
      expect(ran).toHaveLength(1);
      expect((ran[0]!.structuredContent as { command: string }).command).toBe('UPDATE 1');
      await settled(request.id, 'executed');
      expect(await amounts(10)).toEqual(['6']);
      // Executed: the binding's next call is a new request, not a second run.
      const next = await callTool(client, 'query', { sql });
      expect((next._meta as Record<string, { approval_id: string; status: string }>)['pgward/approval']).toMatchObject({ status: 'pending' });
      expect((next._meta as Record<string, { approval_id: string }>)['pgward/approval']!.approval_id).not.toBe(request.id);
    });
    expect(await amounts(10)).toEqual(['6']);
  });
});
