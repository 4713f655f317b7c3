/**
 * Masked columns and prepared statements on pooled upstream connections (proxy/session.ts): a
 * session binds only statements it prepared itself, decided again under the policy in force when
 * bound. Same setup as policy-escapes.e2e.test.ts: the upstream seeds
 * `customers(id int primary key, email text not null)` with `userN@example.com` values.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverStatementName } from '../../proxy/prepared.js';
import { connectAgentClient, createPolicy, RAW_EMAIL, patchPolicy, rawTurn, registerOn } from '../support/proxy-agents.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;


const policyWith = (policy: Record<string, unknown>): Promise<string> => createPolicy(gateway, policy);
const agentOn = (policyId: string, name: string): Promise<AgentSecrets> => registerOn(gateway, policyId, name);
const patchOf = (policyId: string, payload: Record<string, unknown>): Promise<void> => patchPolicy(gateway, policyId, payload);

beforeAll(async () => {
  gateway = await startGateway('pooled_statements');
});
afterAll(async () => {
  await gateway?.stop();
});

describe('masked columns never reach the agent', () => {
  // PostgreSQL's DETAIL of a failed write can print the whole row, masked columns included: under a
  // policy that masks columns, server errors reach the client without their DETAIL.
  it('through the DETAIL of a failed UPDATE ("Failing row contains ...")', async () => {
    const agent = await agentOn(
      await policyWith({ name: 'rw masked', read_only: false, allowed_tables: ['public.customers'], masked_columns: { 'public.customers.email': 'redact' } }),
      'rw masked',
    );
    const client = await connectAgentClient(agent);
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
    const client = await connectAgentClient(agent);
    try {
      const before = await client.query({ name: 'emails', text: 'SELECT email FROM customers WHERE id = $1', values: [1] });
      expect(before.rows).toEqual([{ email: 'user1@example.com' }]);
      await patchOf(policyId, { masked_columns: { 'public.customers.email': 'redact' } });
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
    const first = await connectAgentClient(open);
    const parsed = await rawTurn(first, (connection) => {
      connection.parse({ name: '', text: 'SELECT email FROM customers ORDER BY id' });
      connection.sync();
    });
    expect(parsed.error).toBeUndefined();
    await first.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await connectAgentClient(narrow);
    try {
      const bound = await rawTurn(second, (connection) => {
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
    const first = await connectAgentClient(open);
    expect((await first.query({ name: 'mine', text })).rows.length).toBe(10);
    await first.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await connectAgentClient(narrow);
    try {
      const bound = await rawTurn(second, (connection) => {
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

describe('the unnamed statement', () => {
  it('is gone after a Parse the policy refused, as after a failed Parse upstream', async () => {
    const agent = await agentOn(await policyWith({ name: 'orders reader', read_only: true, allowed_tables: ['public.orders'] }), 'orders reader');
    const client = await connectAgentClient(agent);
    try {
      const allowed = await rawTurn(client, (connection) => {
        connection.parse({ name: '', text: 'SELECT count(*) FROM orders' });
        connection.sync();
      });
      expect(allowed.error).toBeUndefined();
      const refused = await rawTurn(client, (connection) => {
        connection.parse({ name: '', text: 'SELECT email FROM customers' });
        connection.sync();
      });
      expect(refused.error?.code).toBe('42501');
      const bound = await rawTurn(client, (connection) => {
        connection.bind({ portal: '', statement: '', values: [] });
        connection.execute({ portal: '', rows: 0 });
        connection.sync();
      });
      expect(bound.error).toMatchObject({ code: '26000', message: 'unnamed prepared statement does not exist' });
    } finally {
      await client.end();
    }
  });
});
