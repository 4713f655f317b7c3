/** Policies, agents and hand-made protocol turns for tests that drive the proxy with node-postgres. */
import pg from 'pg';
import { expect } from 'vitest';
import type { AgentSecrets, TestGateway } from './gateway.js';

/** The upstream's seeded customer emails, which a masked or refused read must never show. */
export const RAW_EMAIL = /user\d+@example\.com/;

/** Creates a policy through the API; its id. */
export async function createPolicy(gateway: TestGateway, policy: Record<string, unknown>): Promise<string> {
  const created = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/policies`, payload: policy });
  expect(created.statusCode).toBe(201);
  return (created.json() as { id: string }).id;
}

/** Registers an agent under a policy. */
export async function registerOn(gateway: TestGateway, policyId: string, name: string): Promise<AgentSecrets> {
  const registered = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/agents`, payload: { name, policy_profile_id: policyId } });
  expect(registered.statusCode).toBe(201);
  return registered.json() as AgentSecrets;
}

export async function patchPolicy(gateway: TestGateway, policyId: string, payload: Record<string, unknown>): Promise<void> {
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${policyId}`, payload });
  expect(patched.statusCode).toBe(200);
}

/** A node-postgres client logged in as the agent. */
export async function connectAgentClient(agent: AgentSecrets): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: agent.connection_string });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Runs `work` with a node-postgres client of the agent, then closes it. */
export async function withAgentClient<T>(agent: AgentSecrets, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectAgentClient(agent);
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export interface RawOutcome {
  rows: (string | null)[][];
  copied: string[];
  error?: { code?: string; message?: string; detail?: string };
}

/**
 * A hand-made extended-protocol turn (messages node-postgres would never send, such as a Bind of
 * the unnamed statement without a Parse), or a COPY TO STDOUT, as a node-postgres submittable:
 * the client routes the replies here until ReadyForQuery.
 */
export function rawTurn(client: pg.Client, send: (connection: RawConnection) => void): Promise<RawOutcome> {
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

export interface RawConnection {
  query(text: string): void;
  parse(msg: { name?: string; text: string; types?: number[] }): void;
  bind(msg: { portal?: string; statement?: string; values?: unknown[] }): void;
  describe(msg: { type: 'S' | 'P'; name?: string }): void;
  execute(msg: { portal?: string; rows?: number }): void;
  sync(): void;
}

/** One statement as a hand-made extended-protocol turn: Parse, Bind, Execute, Sync of the unnamed statement and portal. */
export function extendedTurn(client: pg.Client, text: string): Promise<RawOutcome> {
  return rawTurn(client, (connection) => {
    connection.parse({ text });
    connection.bind({});
    connection.execute({});
    connection.sync();
  });
}

/** Changes the gateway's project database through the REST API (pool_config, query_timeout_ms, ...). */
export async function patchDatabase(gateway: TestGateway, payload: Record<string, unknown>): Promise<void> {
  const databases = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/databases` });
  const databaseId = (databases.json() as { databases: { id: string }[] }).databases[0]!.id;
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/databases/${databaseId}`, payload });
  expect(patched.statusCode, patched.body).toBe(200);
}
