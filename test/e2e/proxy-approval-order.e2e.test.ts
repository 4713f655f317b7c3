/**
 * A held statement's progress row comes before its outcome in the trail (spec §6), even when the
 * reviewer decides at once and the progress row is slow to reach the bus: here every bus message
 * carrying an `approval_requested` row takes a second longer to publish (a slow link to the bus, or
 * a publisher's linger), and the reviewer rejects as soon as the request's id is known (the wire's
 * NOTICE, the MCP's held answer).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecisionBus } from '../../src/bus/port.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { callTool, listenForAgents, withAgentMcp } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { openSession, waitFor } from '../support/wire.js';

const PROGRESS_DELAY_MS = 1_000;

/** The bus, publishing every message that carries an approval_requested row PROGRESS_DELAY_MS late. */
function slowProgressRows(bus: DecisionBus): DecisionBus {
  return {
    kind: bus.kind,
    maxMessageBytes: bus.maxMessageBytes,
    async publish(message) {
      if (Buffer.from(message.data).includes('"event":"approval_requested"')) await sleep(PROGRESS_DELAY_MS);
      await bus.publish(message);
    },
    consume: (options, handler) => bus.consume(options, handler),
    backlog: (durable) => bus.backlog(durable),
    close: () => bus.close(),
  };
}

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;

interface Entry { seq: number; event: string; approval_id?: string | null; source: string }

const reject = (id: string) => gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/approvals/${id}/reject`, payload: { reason: 'at once' } });

/** The trail's entries of one request, oldest first, once there are `count`. */
async function entriesOf(approvalId: string, count: number): Promise<Entry[]> {
  let found: Entry[] = [];
  await waitFor(
    async () => (found = ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100` })).json() as { entries: Entry[] }).entries.filter((e) => e.approval_id === approvalId)).length >= count,
    10_000,
    `${count} audit entries of ${approvalId}`,
  );
  return found.sort((a, b) => a.seq - b.seq);
}

async function chainVerifies(): Promise<void> {
  const verified = (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit/verify` })).json() as Record<string, unknown>;
  expect(verified).toMatchObject({ ok: true, first_broken_seq: null });
}

beforeAll(async () => {
  gateway = await startGateway('approvals_order', undefined, 60_000, {}, pino({ level: 'silent' }), {}, { publishVia: slowProgressRows });
  const patched = await gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url: `/v1/projects/${gateway.projectId}/policies/${gateway.policyId}`, payload: { approval: { held_kinds: ['update'] } } });
  expect(patched.statusCode).toBe(200);
  agent = await gateway.register('held-order');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('a request decided at once, its progress row slow to the bus', () => {
  it('on the wire: rejected on its NOTICE, the trail is approval_requested then rejected, and the chain verifies', async () => {
    const { client } = await openSession(agent.connection_string);
    let decided: Promise<{ statusCode: number }> | undefined;
    client.on('notice', (notice) => {
      const id = /request (apr_[a-z2-7]{26})/.exec(notice.message ?? '')?.[1];
      if (id) decided = reject(id);
    });
    try {
      const error = (await client.query('update orders set total = 0 where id = 1').then(
        () => undefined,
        (e: unknown) => e as { code?: string; message: string },
      ))!;
      expect(error.code).toBe('42501');
      expect((await decided!).statusCode).toBe(200);
      const id = /request (apr_[a-z2-7]{26})/.exec(error.message)![1]!;
      expect((await entriesOf(id, 2)).map((e) => [e.event, e.source])).toEqual([
        ['approval_requested', 'wire'],
        ['rejected', 'rest'],
      ]);
      await chainVerifies();
    } finally {
      await client.end();
    }
  });

  it('on the hosted MCP: rejected on its held answer, the trail is approval_requested then rejected, and the chain verifies', async () => {
    const url = await listenForAgents(gateway);
    await withAgentMcp(`${url}/mcp`, agent, async (client) => {
      const held = await callTool(client, 'query', { sql: 'update orders set total = 0 where id = 2' });
      const id = (held._meta as Record<string, { approval_id: string }>)['pgward/approval']!.approval_id;
      expect((await reject(id)).statusCode).toBe(200);
      expect((await entriesOf(id, 2)).map((e) => [e.event, e.source])).toEqual([
        ['approval_requested', 'mcp'],
        ['rejected', 'rest'],
      ]);
      await chainVerifies();
    });
    const upstream = new pg.Client({ connectionString: gateway.upstream.url });
    await upstream.connect();
    try {
      expect((await upstream.query<{ total: string }>('select total::text from orders where id in (1, 2) order by id')).rows).toEqual([{ total: '1.5' }, { total: '3.0' }]);
    } finally {
      await upstream.end();
    }
  });
});
