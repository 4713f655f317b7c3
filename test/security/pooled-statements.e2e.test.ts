/**
 * Masked columns and prepared statements on pooled upstream connections (proxy/session.ts): a
 * session binds only statements it prepared itself, decided again under the policy in force when
 * bound. Same setup as policy-escapes.e2e.test.ts: the upstream seeds
 * `customers(id int primary key, email text not null)` with `userN@example.com` values.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverStatementName } from '../../proxy/prepared.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;

const RAW_EMAIL = /user\d+@example\.com/;

async function policyWith(policy: Record<string, unknown>): Promise<string> {
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: policy });
  expect(created.statusCode).toBe(201);
  return (created.json() as { id: string }).id;
}

async function agentOn(policyId: string, name: string): Promise<AgentSecrets> {
  const registered = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name, policy_profile_id: policyId } });
  expect(registered.statusCode).toBe(201);
  return registered.json() as AgentSecrets;
}

async function patchPolicy(policyId: string, payload: Record<string, unknown>): Promise<void> {
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${policyId}`, payload });
  expect(patched.statusCode).toBe(200);
}

async function connect(agent: AgentSecrets): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

interface RawOutcome {
  rows: (string | null)[][];
  copied: string[];
  error?: { code?: string; message?: string; detail?: string };
}

/**
 * A hand-made extended-protocol turn (messages node-postgres would never send, such as a Bind of
 * the unnamed statement without a Parse), or a COPY TO STDOUT, as a node-postgres submittable:
 * the client routes the replies here until ReadyForQuery.
 */
function raw(client: pg.Client, send: (connection: RawConnection) => void): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const outcome: RawOutcome = { rows: [], copied: [] };
    const submittable = {
      submit: (connection: RawConnection) => send(connection),
      handleRowDescription: () => undefined,
      handleDataRow: (msg: { fields: (Buffer | string | null)[] }) => outcome.rows.push(msg.fields.map((field) => (field === null ? null : field.toString()))),
      handleCommandComplete: () => undefined,
      handleEmptyQuery: () => undefined,
      handlePortalSuspended: () => undefined,
      handleCopyInResponse: () => undefined,
      handleCopyData: (msg: { chunk: Buffer }) => outcome.copied.push(msg.chunk.toString()),
      // node-postgres drops the active query at an ErrorResponse: its ReadyForQuery is not routed here.
      handleError: (error: { code?: string; message?: string; detail?: string }) => {
        outcome.error = { code: error.code, message: error.message, detail: error.detail };
        resolve(outcome);
      },
      handleReadyForQuery: () => resolve(outcome),
    };
    (client as unknown as { query: (q: unknown) => void }).query(submittable);
  });
}

interface RawConnection {
  query(text: string): void;
  parse(msg: { name?: string; text: string; types?: number[] }): void;
  bind(msg: { portal?: string; statement?: string; values?: unknown[] }): void;
  describe(msg: { type: 'S' | 'P'; name?: string }): void;
  execute(msg: { portal?: string; rows?: number }): void;
  sync(): void;
}

beforeAll(async () => {
  gateway = await startGateway('pooled_statements');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('masked columns never reach the agent', () => {
  // Known gap, not fixed yet (docs/policy.md, "Limits"): PostgreSQL's DETAIL of a failed write can
  // print the whole row, masked columns included; the proxy relays server errors as they come.
  it.fails('through the DETAIL of a failed UPDATE ("Failing row contains ...")', async () => {
    const agent = await agentOn(
      await policyWith({ name: 'rw masked', read_only: false, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } }),
      'rw masked',
    );
    const client = await connect(agent);
    try {
      for (const sql of ['UPDATE customers SET id = NULL WHERE id = 1', 'INSERT INTO customers (id, email) VALUES (2, $$x$$) ON CONFLICT (id) DO UPDATE SET id = NULL']) {
        const error = await client.query(sql).then(
          () => undefined,
          (e: { message?: string; detail?: string }) => e,
        );
        expect(`${error?.message ?? ''} ${error?.detail ?? ''}`, sql).not.toMatch(RAW_EMAIL);
      }
      expect((await client.query('SELECT email FROM customers WHERE id = 1')).rows).toEqual([{ email: '[redacted]' }]);
    } finally {
      await client.end();
    }
  });

  it('through a statement prepared before the policy masked the column', async () => {
    const policyId = await policyWith({ name: 'tightened', read_only: true, allowed_tables: ['public.customers'] });
    const agent = await agentOn(policyId, 'tightened');
    const client = await connect(agent);
    try {
      const before = await client.query({ name: 'emails', text: 'SELECT email FROM customers WHERE id = $1', values: [1] });
      expect(before.rows).toEqual([{ email: 'user1@example.com' }]);
      await patchPolicy(policyId, { masked_columns: { 'public.customers.email': 'redact' } });
      // The proxy learns of the change from the bus: a fresh statement shows the new policy is in force.
      const deadline = Date.now() + 5000;
      while ((await client.query('SELECT email FROM customers WHERE id = 2')).rows[0]?.email !== '[redacted]') {
        if (Date.now() > deadline) throw new Error('the policy change did not reach the proxy');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // node-postgres sends only Bind and Execute for a statement it has prepared.
      const after = await client.query({ name: 'emails', text: 'SELECT email FROM customers WHERE id = $1', values: [3] }).then(
        (result) => JSON.stringify(result.rows),
        (error: Error) => error.message,
      );
      expect(after).not.toMatch(RAW_EMAIL);
    } finally {
      await client.end();
    }
  });

  it("through the upstream's unnamed statement, prepared by another credential's session", async () => {
    const open = await agentOn(await policyWith({ name: 'open reader', read_only: true, allowed_tables: ['public.customers'] }), 'open reader');
    const narrow = await agentOn(await policyWith({ name: 'orders only', read_only: true, allowed_tables: ['public.orders'] }), 'orders only');
    // Both read-only policies of one database share the upstream pool; a session hands its connection back without DISCARD ALL.
    const first = await connect(open);
    const parsed = await raw(first, (connection) => {
      connection.parse({ name: '', text: 'SELECT email FROM customers ORDER BY id' });
      connection.sync();
    });
    expect(parsed.error).toBeUndefined();
    await first.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await connect(narrow);
    try {
      const bound = await raw(second, (connection) => {
        connection.bind({ portal: '', statement: '', values: [] });
        connection.execute({ portal: '', rows: 0 });
        connection.sync();
      });
      expect(JSON.stringify(bound.rows)).not.toMatch(RAW_EMAIL);
    } finally {
      await second.end();
    }
  });

  it("through a server-side statement another credential's session prepared, bound by its computable name", async () => {
    const open = await agentOn(await policyWith({ name: 'open reader 2', read_only: true, allowed_tables: ['public.customers'] }), 'open reader 2');
    const narrow = await agentOn(await policyWith({ name: 'orders only 2', read_only: true, allowed_tables: ['public.orders'] }), 'orders only 2');
    const text = 'SELECT email FROM customers WHERE id > 0';
    const first = await connect(open);
    expect((await first.query({ name: 'mine', text })).rows.length).toBe(10);
    await first.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await connect(narrow);
    try {
      const bound = await raw(second, (connection) => {
        connection.bind({ portal: '', statement: serverStatementName(text, []), values: [] });
        connection.execute({ portal: '', rows: 0 });
        connection.sync();
      });
      expect(JSON.stringify(bound.rows)).not.toMatch(RAW_EMAIL);
    } finally {
      await second.end();
    }
  });
});
