import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { psqlCommand } from '../support/psql-held.js';
import { openSession, waitFor } from '../support/wire.js';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;

interface Approval { id: string; status: string; sql: string; reason: string; decided_by: string | null; rows_affected: number | null; credential_id: string }
interface Entry { seq: number; event: string; sql: string; decision_rule: string; reason: string; approval_id?: string | null; rows_returned: number }

const approvals = async (credentialId = agent.credential.id): Promise<Approval[]> =>
  ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/approvals?page_size=100&credential_id=${credentialId}` })).json() as { approvals: Approval[] }).approvals;

/** The pending request for `sql`, once the proxy has recorded it. */
async function pendingFor(sql: string, credentialId = agent.credential.id): Promise<Approval> {
  let found: Approval | undefined;
  await waitFor(async () => (found = (await approvals(credentialId)).find((a) => a.sql === sql && a.status === 'pending')) !== undefined, 10_000, `a pending request for ${sql}`);
  return found!;
}

const decide = (id: string, verdict: 'approve' | 'reject', reason?: string) =>
  gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${id}/${verdict}`, ...(reason === undefined ? {} : { payload: { reason } }) });

async function upstreamAmount(id: number): Promise<string> {
  const client = new pg.Client({ connectionString: gateway.upstream.url });
  await client.connect();
  try {
    return String((await client.query<{ amount: string }>('select amount from orders where id = $1', [id])).rows[0]!.amount);
  } finally {
    await client.end();
  }
}

const psql = (sql: string, marker?: string) => psqlCommand(agent.connection_string, sql, marker);

let listening: string | undefined;
/** The API's URL for agents (listening from the first MCP test on). */
const agentsUrl = async (): Promise<string> => (listening ??= await listenForAgents(gateway));

async function trail(): Promise<Entry[]> {
  return ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100` })).json() as { entries: Entry[] }).entries;
}

async function entriesOf(approvalId: string, count: number): Promise<Entry[]> {
  let found: Entry[] = [];
  await waitFor(async () => (found = (await trail()).filter((e) => e.approval_id === approvalId)).length >= count, 10_000, `${count} audit entries of ${approvalId}`);
  // The trail lists newest first: oldest first here.
  return found.sort((a, b) => a.seq - b.seq);
}

beforeAll(async () => {
  gateway = await startGateway('approvals_wire');
  const seed = new pg.Client({ connectionString: gateway.upstream.url });
  await seed.connect();
  await seed.query('alter table orders add column amount numeric not null default 5');
  await seed.end();
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${gateway.policyId}`, payload: { approval: { held_kinds: ['update', 'delete'], expiry_seconds: 3600 } } });
  expect(patched.statusCode).toBe(200);
  agent = await gateway.register('held');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('statements held for approval on the wire', () => {
  it('psql waits with a NOTICE; approving runs it once (UPDATE 1, changed upstream); the trail shows approval_requested, approved, query, and verifies', async () => {
    const sql = 'update orders set amount = 0 where id = 1';
    const run = psql(sql);
    await run.saw;
    const request = await pendingFor(sql);
    expect(request.id).toMatch(/^apr_[a-z2-7]{26}$/);
    expect(await upstreamAmount(1)).toBe('5');
    const approved = await decide(request.id, 'approve', 'ticket 42');
    expect(approved.statusCode).toBe(200);
    const result = await run.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe('UPDATE 1');
    expect(result.stderr).toContain(`NOTICE:  statement held for approval (request ${request.id}); waiting for a reviewer`);
    expect(await upstreamAmount(1)).toBe('0');
    await waitFor(async () => (await approvals()).find((a) => a.id === request.id)?.status === 'executed', 5_000, 'executed');
    expect((await approvals()).find((a) => a.id === request.id)).toMatchObject({ status: 'executed', rows_affected: 1, reason: 'ticket 42' });
    const entries = await entriesOf(request.id, 3);
    expect(entries.map((e) => e.event)).toEqual(['approval_requested', 'approved', 'query']);
    expect(entries.map((e) => e.sql)).toEqual([sql, sql, sql]);
    expect(entries[1]!.reason).toMatch(/^approved by api_key:key_[a-z2-7]+: ticket 42$/);
    const verified = (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit/verify` })).json() as Record<string, unknown>;
    expect(verified).toMatchObject({ ok: true, first_broken_seq: null });
    // Deciding again changes nothing.
    const again = await decide(request.id, 'approve');
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'INVALID_STATE' });
  });

  it('a rejection fails node-postgres’s query with the reason; deciding again is 409; the session stays usable and nothing changed', async () => {
    const { client } = await openSession(agent.connection_string);
    const notices: string[] = [];
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    try {
      const sql = 'update orders set amount = 7 where id = 2';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string; message: string });
      const request = await pendingFor(sql);
      expect((await decide(request.id, 'reject', 'not during the sale')).statusCode).toBe(200);
      const error = await failed;
      expect(error).toMatchObject({ code: '42501' });
      expect(error!.message).toBe(`statement rejected by a reviewer (request ${request.id}, decided by ${(await approvals()).find((a) => a.id === request.id)!.decided_by}): not during the sale (rule approval.rejected); it did not run`);
      expect(notices).toEqual([`statement held for approval (request ${request.id}); waiting for a reviewer`]);
      const again = await decide(request.id, 'approve');
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ code: 'INVALID_STATE' });
      expect((await client.query('select amount from orders where id = 2')).rows).toEqual([{ amount: '5' }]);
      const entries = await entriesOf(request.id, 2);
      expect(entries.map((e) => e.event)).toEqual(['approval_requested', 'rejected']);
    } finally {
      await client.end();
    }
  });

  it('holds every kind a statement runs: a writable CTE deleting is held like a DELETE', async () => {
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'with d as (delete from orders where id = 3 returning id) select * from d';
      const failed = client.query(sql).then(() => undefined, (error: unknown) => error as { code?: string });
      const request = await pendingFor(sql);
      await decide(request.id, 'reject');
      expect(await failed).toMatchObject({ code: '42501' });
      expect((await client.query('select count(*)::int as n from orders where id = 3')).rows).toEqual([{ n: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('refuses a held statement with parameters inside a transaction block (25001), never running it unheld', async () => {
    const { client } = await openSession(agent.connection_string);
    try {
      await client.query('begin');
      const error = await client.query('update orders set amount = 9 where id = $1', [4]).then(() => undefined, (e: unknown) => e as { code?: string; message: string });
      expect(error).toMatchObject({ code: '25001' });
      expect(error!.message).toContain('rule approval.in_transaction');
      await client.query('rollback');
      expect(await upstreamAmount(4)).toBe('5');
    } finally {
      await client.end();
    }
  });

  it('the hosted MCP answers a held query at once with its request; once approved the same call runs it once; approval_status reports it', async () => {
    const url = await agentsUrl();
    const sql = 'update orders set amount = amount + 1 where id = 8';
    await withAgentMcp(`${url}/mcp`, agent, async (client) => {
      const held = await callTool(client, 'query', { sql });
      expect(held.isError).toBe(true);
      const view = (held._meta as Record<string, { approval_id: string; status: string; expires_at: string; estimated_rows: number | null }>)['pgward/approval']!;
      expect(view).toMatchObject({ status: 'pending', estimated_rows: 1, estimate_method: 'trial' });
      expect(textOf(held)).toContain(`Held for a human’s approval (decision_rule approval.held, request ${view.approval_id}, expires ${view.expires_at})`);
      await pendingFor(sql);
      const again = await callTool(client, 'query', { sql });
      expect(textOf(again)).toContain(`Still waiting for a human’s approval (decision_rule approval.held, request ${view.approval_id}`);
      // Other parameters or text are another binding: another request.
      const other = await callTool(client, 'query', { sql: `${sql} ` });
      expect((other._meta as Record<string, { approval_id: string }>)['pgward/approval']!.approval_id).not.toBe(view.approval_id);
      expect(await upstreamAmount(8)).toBe('5');
      expect((await decide(view.approval_id, 'approve', 'ok')).statusCode).toBe(200);
      await waitFor(async () => (await approvals()).find((a) => a.id === view.approval_id)?.status === 'approved', 5_000, 'approved in the read model');
      // Two calls at once: the request is taken once, so it runs once.
      const [first, second] = await Promise.all([callTool(client, 'query', { sql }), callTool(client, 'query', { sql })]);
      const ran = [first, second].filter((r) => !r.isError);
      expect(ran).toHaveLength(1);
      expect((ran[0]!.structuredContent as { command: string }).command).toBe('UPDATE 1');
      expect(await upstreamAmount(8)).toBe('6');
      await waitFor(async () => (await approvals()).find((a) => a.id === view.approval_id)?.status === 'executed', 5_000, 'executed');
      const status = await callTool(client, 'approval_status', { approval_id: view.approval_id });
      expect(status.structuredContent).toMatchObject({ approval_id: view.approval_id, status: 'executed', rows_affected: 1, reason: 'ok' });
      const entries = await entriesOf(view.approval_id, 3);
      expect(entries.map((e) => e.event)).toEqual(['approval_requested', 'approved', 'query']);
      // Plain EXPLAIN runs nothing and is not held; EXPLAIN ANALYZE would run the update: refused by explain.
      const explained = await callTool(client, 'explain', { sql });
      expect(explained.isError, textOf(explained)).toBeFalsy();
    });
    expect(await upstreamAmount(8)).toBe('6');
  });

  it('an approval is bound to the exact statement: the approved text changed by one byte does not run it (a new request), the exact text does, once', async () => {
    const url = await agentsUrl();
    const sql = 'update orders set amount = 9 where id = 10';
    const changed = 'update orders set amount = 9 where id = 11';
    await withAgentMcp(`${url}/mcp`, agent, async (client) => {
      const held = await callTool(client, 'query', { sql });
      const id = (held._meta as Record<string, { approval_id: string }>)['pgward/approval']!.approval_id;
      await pendingFor(sql);
      expect((await decide(id, 'approve')).statusCode).toBe(200);
      const other = await callTool(client, 'query', { sql: changed });
      expect(other.isError).toBe(true);
      const otherView = (other._meta as Record<string, { approval_id: string; status: string }>)['pgward/approval']!;
      expect(otherView.status).toBe('pending');
      expect(otherView.approval_id).not.toBe(id);
      expect(textOf(other)).toContain(`Held for a human’s approval (decision_rule approval.held, request ${otherView.approval_id}`);
      expect(await upstreamAmount(10)).toBe('5');
      expect(await upstreamAmount(11)).toBe('5');
      expect((await approvals()).find((a) => a.id === id)).toMatchObject({ status: 'approved', rows_affected: null });
      const ran = await callTool(client, 'query', { sql });
      expect(ran.isError, textOf(ran)).toBeFalsy();
      expect((ran.structuredContent as { command: string }).command).toBe('UPDATE 1');
      expect(await upstreamAmount(10)).toBe('9');
      expect(await upstreamAmount(11)).toBe('5');
      expect((await decide(otherView.approval_id, 'reject', 'not this one')).statusCode).toBe(200);
    });
  });

  it('a kill-switch while held ends the wait: the session ends, the request fails, nothing ran', async () => {
    const sql = 'update orders set amount = 8 where id = 5';
    const run = psql(sql);
    await run.saw;
    const request = await pendingFor(sql);
    const disabled = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/agents/${agent.credential.id}`, payload: { status: 'disabled' } });
    expect(disabled.statusCode).toBe(200);
    const result = await run.done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('the credential was disabled');
    await waitFor(async () => (await approvals()).find((a) => a.id === request.id)?.status === 'failed', 5_000, 'failed');
    // Approving it now is refused; nothing ran.
    expect((await decide(request.id, 'approve')).statusCode).toBe(409);
    expect(await upstreamAmount(5)).toBe('5');
    await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/agents/${agent.credential.id}`, payload: { status: 'active' } });
  });

  it('Ctrl-C in psql cancels the wait: 57014, the request fails, nothing runs', async () => {
    const sql = 'update orders set amount = 2 where id = 9';
    const run = psql(sql);
    await run.saw;
    const request = await pendingFor(sql);
    run.interrupt();
    const result = await run.done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`ERROR:  approval request ${request.id} ended: the client cancelled the statement while it waited (rule approval.failed); the statement did not run`);
    await waitFor(async () => (await approvals()).find((a) => a.id === request.id)?.status === 'failed', 5_000, 'failed');
    expect((await decide(request.id, 'approve')).statusCode).toBe(409);
    expect(await upstreamAmount(9)).toBe('5');
  });

  it('a held session lost to a proxy restart ends failed; approving it afterwards is refused and it never runs', async () => {
    const sql = 'update orders set amount = 4 where id = 7';
    const run = psql(sql);
    await run.saw;
    const request = await pendingFor(sql);
    await gateway.restartProxy();
    const result = await run.done;
    expect(result.code).not.toBe(0);
    await waitFor(async () => (await approvals()).find((a) => a.id === request.id)?.status === 'failed', 5_000, 'failed');
    expect((await approvals()).find((a) => a.id === request.id)!.reason).toContain('the session ended while the statement waited');
    const late = await decide(request.id, 'approve');
    expect(late.statusCode).toBe(409);
    expect(await upstreamAmount(7)).toBe('5');
  });

  it('an undecided request expires: the client gets 57014 naming the expiry, the trail approval_expired, nothing ran', async () => {
    const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${gateway.policyId}`, payload: { approval: { held_kinds: ['update'], expiry_seconds: 1 } } });
    expect(patched.statusCode).toBe(200);
    const { client } = await openSession(agent.connection_string);
    try {
      const sql = 'update orders set amount = 6 where id = 6';
      const error = await client.query(sql).then(() => undefined, (e: unknown) => e as { code?: string; message: string });
      expect(error).toMatchObject({ code: '57014' });
      expect(error!.message).toMatch(/^approval request apr_[a-z2-7]{26} expired undecided at .* \(rule approval\.expired\); the statement did not run$/);
      await waitFor(async () => (await approvals()).find((a) => a.sql === sql)?.status === 'expired', 5_000, 'expired in the read model');
      const request = (await approvals()).find((a) => a.sql === sql)!;
      expect((await entriesOf(request.id, 2)).map((e) => e.event)).toEqual(['approval_requested', 'approval_expired']);
      expect(await upstreamAmount(6)).toBe('5');
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });
});
