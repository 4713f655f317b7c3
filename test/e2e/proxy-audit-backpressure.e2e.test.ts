/**
 * The audit's back-pressure (proxy/audit-backpressure.ts) through the real proxy and the real
 * in-process bus: a consumer that takes 100 ms a message stands in for an ingest that cannot keep
 * up (the proxy publishes a batch every 50 ms while it reads), and the proxy stops reading its
 * clients while the oldest decision that consumer has not taken is the high mark old, instead of
 * letting it fall further behind; a consumer that acknowledges nothing is not waited for. Held are
 * the clients of the credential that floods, not another agent's.
 */
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_DURABLE, type Consumer, type DecisionBus } from '../../src/bus/port.js';
import { callTool, listenForAgents, textOf, withAgentMcp } from '../support/agent-mcp.js';
import { floodSelects } from '../support/flood.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';

/** Ingest's own durable name: the hosted MCP of the gateway's API asks its backlog too. */
const SLOW = INGEST_DURABLE;
// A floor of 20 decisions a second: a flood on a machine busy with other tests still counts as heavy within its first second.
const LIMITS = { highMs: 300, lowMs: 150, stallMs: 1_500, allMs: 5_000, maxHoldMs: 10_000, lightPerSecond: 20 };
/** The hosted MCP's: it holds everyone once the oldest is 1.2 s old. */
const MCP_LIMITS = { ...LIMITS, allMs: 1_200 };
/** How long the slow consumer takes a message. */
let messageMs = 100;

let gateway: TestGateway;
let agent: AgentSecrets;
let steady: AgentSecrets;
const late: { bus?: DecisionBus } = {};
let slow: Consumer | undefined;
const statementsOf = (data: Uint8Array): number => {
  const record = JSON.parse(Buffer.from(data).toString('utf8')) as { kind: string; decisions?: unknown[] };
  return record.kind === 'batch' ? record.decisions!.length : record.kind === 'decision' ? 1 : 0;
};
/** Statements whose decisions the slow consumer took. */
let slowStatements = 0;

async function metric(name: string): Promise<number> {
  return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(await gateway.metrics.metrics())?.[1] ?? Number.NaN);
}

/** Runs `select 1` on `clients` connections for `ms`, sampling the slow consumer's backlog; the statements run and the oldest age of a decision it had not taken. */
async function flood(clients: number, ms: number): Promise<{ statements: number; maxBehindMs: number }> {
  let maxBehindMs = 0;
  const statements = await floodSelects(agent.connection_string, clients, ms, async (until) => {
    while (Date.now() < until) {
      maxBehindMs = Math.max(maxBehindMs, (await gateway.bus.backlog(SLOW))?.oldestAgeMs ?? 0);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });
  return { statements, maxBehindMs };
}

/**
 * How much `counter` moved over a window of `windowMs` during which the proxy held its clients
 * throughout (looked for over `attempts` tries 20 ms apart); undefined when no such window came.
 */
async function movedWhileHeld(counter: () => Promise<number>, windowMs: number, attempts: number): Promise<number | undefined> {
  const held = async (): Promise<boolean> => (await metric('pgward_proxy_audit_backpressure')) === 1;
  for (let attempt = 0; attempt < attempts; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (!(await held())) continue;
    const before = await counter();
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const after = await counter();
    if (await held()) return after - before;
  }
  return undefined;
}

async function startSlow(): Promise<void> {
  slow = await gateway.bus.consume({ durable: SLOW, maxInFlight: 1 }, async (delivery) => {
    await new Promise((resolve) => setTimeout(resolve, messageMs));
    slowStatements += statementsOf(delivery.data);
  });
}

beforeAll(async () => {
  gateway = await startGateway('audit_backpressure', undefined, 60_000, undefined, undefined, undefined, {
    proxy: { auditBacklog: async () => late.bus?.backlog(SLOW), auditBackPressureLimits: LIMITS },
    mcpBackPressureLimits: MCP_LIMITS,
  });
  late.bus = gateway.bus;
  agent = await gateway.register('flooder');
  steady = await gateway.register('steady');
  await startSlow();
}, 60_000);

afterAll(async () => {
  await slow?.stop();
  await gateway?.stop();
});

describe('audit back-pressure', () => {
  it('keeps a slow consumer within the high mark under a flood, and every statement reaches it', async () => {
    const before = await metric('pgward_proxy_audit_backpressure_engaged_total');
    const { statements, maxBehindMs } = await flood(8, 6_000);
    // Left alone, its oldest would be half the flood old at the flood's end (3 s), and older the longer it ran. Held,
    // the oldest ages while what was published before the hold drains, at half the pace it was published: the
    // high mark and a few times it at most, however long the flood (4.2 s without back-pressure).
    expect(statements).toBeGreaterThan(0);
    expect(maxBehindMs).toBeGreaterThanOrEqual(LIMITS.highMs);
    expect(maxBehindMs).toBeLessThanOrEqual(LIMITS.highMs * 8);
    expect(await metric('pgward_proxy_audit_backpressure_engaged_total')).toBeGreaterThan(before);
    // Nothing dropped: each statement's decision reaches the slow consumer, none becomes a gap.
    const ran = await metric('pgward_proxy_statements_total\\{event="query"\\}');
    await expect.poll(() => slowStatements, { timeout: 15_000, interval: 50 }).toBe(ran);
    expect(await metric('pgward_proxy_decisions_dropped')).toBe(0);
    await expect.poll(() => metric('pgward_proxy_audit_backpressure'), { timeout: 5_000, interval: 50 }).toBe(0);
  }, 60_000);

  it('does not wait for a consumer that acknowledges nothing: the proxy serves on and the bus holds the decisions', async () => {
    await slow!.stop();
    slow = undefined;
    const { statements, maxBehindMs } = await flood(4, 3_000 + LIMITS.stallMs);
    // Held at most for the stall time, then served while the consumer falls ever further behind.
    expect(maxBehindMs).toBeGreaterThan(LIMITS.highMs * 3);
    expect(statements).toBeGreaterThan(200);
    expect(await metric('pgward_proxy_audit_backpressure')).toBe(0);
    // A consumer that comes back takes every message the bus held.
    const ran = await metric('pgward_proxy_statements_total\\{event="query"\\}');
    await startSlow();
    await expect.poll(() => slowStatements, { timeout: 30_000, interval: 100 }).toBe(ran);
    expect(await metric('pgward_proxy_decisions_dropped')).toBe(0);
  }, 60_000);

  it('lets a client log in while clients wait, and holds its statements until the consumer caught up', async () => {
    // 400 ms a message: what a second's flood published takes several seconds to drain.
    messageMs = 400;
    try {
      await flood(4, 1_000);
      await expect.poll(() => metric('pgward_proxy_audit_backpressure'), { timeout: 5_000, interval: 20 }).toBe(1);
      const late = new pg.Client({ connectionString: agent.connection_string });
      const connecting = Date.now();
      await late.connect();
      expect(Date.now() - connecting).toBeLessThan(2_000);
      try {
        let answered = false;
        const query = late.query('select 1').then(() => (answered = true));
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(await metric('pgward_proxy_audit_backpressure')).toBe(1);
        expect(answered).toBe(false);
        await query;
        expect(await metric('pgward_proxy_audit_backpressure')).toBe(0);
      } finally {
        await late.end();
      }
    } finally {
      messageMs = 100;
    }
  }, 60_000);

  it('holds only the credential that floods: another agent’s statements run on meanwhile', async () => {
    const before = await metric('pgward_proxy_audit_backpressure_engaged_total');
    const client = new pg.Client({ connectionString: steady.connection_string });
    await client.connect();
    const latencies: number[] = [];
    let flooding = true;
    // Four statements a second: what the consumer takes of them alone drains faster than they come.
    const paced = (async () => {
      while (flooding) {
        const started = performance.now();
        await client.query('select 1');
        latencies.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    const { maxBehindMs } = await flood(8, 4_000);
    flooding = false;
    await paced;
    await client.end();
    expect(maxBehindMs).toBeGreaterThanOrEqual(LIMITS.highMs);
    expect(await metric('pgward_proxy_audit_backpressure_engaged_total')).toBeGreaterThan(before);
    // Held with the flooder, a statement would wait until the oldest is back under the low mark: most of a second here.
    expect(latencies.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...latencies)).toBeLessThan(LIMITS.highMs);
    const ran = await metric('pgward_proxy_statements_total\\{event="query"\\}');
    await expect.poll(() => slowStatements, { timeout: 15_000, interval: 50 }).toBe(ran);
  }, 60_000);

  it('holds a client that pipelines: none of its statements run while it is held', async () => {
    // postgres.js sends the statements of one connection without waiting for their answers (3,232 ran in the tenth of a
    // second below when neither the socket nor the proxy's framer was held).
    const sql = postgres(agent.connection_string, { max: 1, ssl: false, onnotice: () => undefined });
    try {
      await sql`select 1`;
      const running = Promise.all(Array.from({ length: 20_000 }, () => sql`select 1`));
      running.catch(() => undefined);
      const heldRan = await movedWhileHeld(() => metric('pgward_proxy_statements_total\\{event="query"\\}'), 100, 100);
      // Held for a tenth of a second: at most what was forwarded before the hold ends (thousands run, unheld).
      expect(heldRan).toBeDefined();
      expect(heldRan!).toBeLessThanOrEqual(50);
      expect(await running).toHaveLength(20_000);
    } finally {
      await sql.end();
    }
    const ran = await metric('pgward_proxy_statements_total\\{event="query"\\}');
    await expect.poll(() => slowStatements, { timeout: 30_000, interval: 50 }).toBe(ran);
  }, 90_000);

  it('holds a hosted MCP request once every client is held, until ingest caught up', async () => {
    const url = await listenForAgents(gateway);
    // A second a message: what the flood published takes seconds to drain, and its oldest ages past the MCP's mark for
    // everyone (this agent flooded on the wire, and sent the MCP nothing: it is held only once everyone is).
    messageMs = 1_000;
    try {
      await flood(4, 1_000);
      await expect.poll(async () => (await gateway.bus.backlog(SLOW))!.oldestAgeMs, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(MCP_LIMITS.allMs);
      let drainedAt = 0;
      const watching = (async () => {
        while ((await gateway.bus.backlog(SLOW))!.pending > 0) await new Promise((resolve) => setTimeout(resolve, 20));
        drainedAt = Date.now();
      })();
      const calledAt = Date.now();
      const answer = await withAgentMcp(`${url}/mcp`, agent, (client) => callTool(client, 'query', { sql: 'select 41 + 1 as answer' }));
      const answeredAt = Date.now();
      await watching;
      expect(textOf(answer)).toContain('42');
      expect(answeredAt - calledAt).toBeGreaterThan(500);
      // Its requests waited for the drain (the sampler sees it within 50 ms).
      expect(answeredAt).toBeGreaterThanOrEqual(drainedAt);
    } finally {
      messageMs = 100;
    }
  }, 60_000);

  it('holds the logins of an address whose refused logins flood, until ingest caught up', async () => {
    // A credential's name with a wrong password: each refused login is a decision of the credential's project, counted
    // against the address, not the credential (whose agent would otherwise be held by whoever knows its name).
    const wrong = new URL(agent.connection_string);
    wrong.password = 'not-the-password';
    const refused = (): Promise<number> => metric('pgward_proxy_logins_total\\{outcome="auth_failed"\\}');
    let flooding = true;
    const attempts = Array.from({ length: 4 }, async () => {
      while (flooding) {
        const client = new pg.Client({ connectionString: wrong.toString() });
        client.on('error', () => undefined);
        await client.connect().catch(() => undefined);
        await client.end().catch(() => undefined);
      }
    });
    try {
      const heldRefused = await movedWhileHeld(refused, 200, 300);
      // Held for a fifth of a second: at most the four logins under way end (left alone, some hundreds would).
      expect(heldRefused).toBeDefined();
      expect(heldRefused!).toBeLessThanOrEqual(4);
    } finally {
      flooding = false;
      await Promise.all(attempts);
    }
    await expect.poll(() => metric('pgward_proxy_audit_backpressure'), { timeout: 15_000, interval: 50 }).toBe(0);
  }, 60_000);
});
