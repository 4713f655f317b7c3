/**
 * The audit's back-pressure on an enrolled (self-hosted) data plane, as `serveEnrolled` wires it
 * (docs/self-host.md): its proxy asks the control plane over the real channel how far behind the
 * control plane's ingest is (GET /v1/data-plane/audit-backlog) and holds the agent that floods, as
 * the control plane's own proxies do, with the default limits. A consumer under ingest's durable
 * name that takes 100 ms a message stands in for an ingest that cannot keep up; the enrolled
 * proxy publishes a message every 50 ms while it reads, twice what that consumer takes, so left
 * alone the oldest decision it had not taken grows older all through the flood.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '../../src/bus/memory.js';
import { INGEST_DURABLE, type Consumer, type DecisionBus } from '../../src/bus/port.js';
import { loadConfig } from '../../src/config.js';
import { serveEnrolled } from '../../src/enroll/serve-enrolled.js';
import type { Running } from '../../src/main.js';
import { startApi, type TestApi } from '../support/api.js';
import { floodSelects } from '../support/flood.js';
import { freePort } from '../support/free-port.js';
import { freshDatabase, upstreamLogin, type TestDatabase } from '../support/pg.js';

/** Where the enrolled proxy's engaging a hold is logged, with whom it holds. */
const logged: { msg: string; credentials?: string[] }[] = [];
let api: TestApi;
let bus: DecisionBus;
let dataPlane: Running;
let dir: string;
let upstream: TestDatabase;
let slow: Consumer;
let agent: { credential: { id: string }; connection_string: string };
/** Statements whose decisions the slow consumer took. */
let slowStatements = 0;
/** How long the slow consumer takes a message. */
let messageMs = 100;

const statementsOf = (data: Uint8Array): number => {
  const record = JSON.parse(Buffer.from(data).toString('utf8')) as { kind: string; decisions?: unknown[] };
  return record.kind === 'batch' ? record.decisions!.length : record.kind === 'decision' ? 1 : 0;
};

/** A metric of the data plane's registry, whose every series carries its role. */
async function metric(name: string, labels = ''): Promise<number> {
  return Number(new RegExp(`^${name}\\{${labels}role="proxy"\\} (\\d+)$`, 'm').exec(await dataPlane.metrics.metrics())?.[1] ?? Number.NaN);
}

const held = async (): Promise<boolean> => (await metric('pgward_proxy_audit_backpressure')) === 1;

beforeAll(async () => {
  bus = createMemoryBus();
  slow = await bus.consume({ durable: INGEST_DURABLE, maxInFlight: 1 }, async (delivery) => {
    await new Promise((resolve) => setTimeout(resolve, messageMs));
    slowStatements += statementsOf(delivery.data);
  });
  api = await startApi('enrolled_hold', {}, { bus });
  await api.app.listen({ host: '127.0.0.1', port: 0 });
  const controlPlane = new URL(`http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`);
  const owner = await api.org('scale');
  const call = async (path: string, payload: object): Promise<Record<string, unknown>> => {
    const response = await api.call(owner.apiKey, { method: 'POST', url: path, payload });
    expect(response.statusCode, response.body).toBeLessThan(300);
    return response.json();
  };
  upstream = await freshDatabase('enrolled_hold_up');
  const login = upstreamLogin(upstream);
  const database = { host: login.host, port: login.port, name: login.database, username: login.user, password: login.password, ssl_mode: 'disable' };
  const { project } = (await call('/v1/projects', { name: 'on-prem', org_id: owner.orgId, self_hosted: true, database })) as { project: { id: string } };
  const policy = (await call(`/v1/projects/${project.id}/policies`, { name: 'reader', read_only: true, allowed_tables: ['public.*'] })) as { id: string };
  agent = (await call(`/v1/projects/${project.id}/agents`, { name: 'flooder', policy_profile_id: policy.id })) as typeof agent;
  const enrollment = (await call(`/v1/projects/${project.id}/self-host-enrollments`, { description: 'rack 4' })) as { token: string };
  dir = await mkdtemp(join(tmpdir(), 'pgward-enrolled-hold-'));
  const config = loadConfig({ PGWARD_DATA_DIR: dir, PGWARD_PROXY_PORT: String(await freePort()), PGWARD_HTTP_PORT: String(await freePort()), PGWARD_LISTEN_HOST: '127.0.0.1' });
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as (typeof logged)[number]) });
  dataPlane = await serveEnrolled(config, logger, { token: enrollment.token, controlPlane });
}, 60_000);

afterAll(async () => {
  await dataPlane?.stop();
  // What is left of the backlog is taken at once: stopping waits for the message under way.
  messageMs = 0;
  await slow?.stop();
  await api?.stop();
  await bus?.close();
  await upstream?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('an enrolled data plane under the audit’s back-pressure', () => {
  it('holds the agent that floods while the control plane’s ingest is behind, releases it after, and every decision reaches ingest', async () => {
    const login = new URL(agent.connection_string);
    login.host = `127.0.0.1:${dataPlane.proxyPort}`;
    login.searchParams.set('sslmode', 'disable');
    const connections = 8;
    let maxBehindMs = 0;
    let heldWindow: number | undefined;
    const statements = await floodSelects(login.toString(), connections, 12_000, async (until, ran) => {
      while (Date.now() < until) {
        maxBehindMs = Math.max(maxBehindMs, (await bus.backlog(INGEST_DURABLE))?.oldestAgeMs ?? 0);
        // A window of 300 ms held throughout: the flooder's statements stand still in it (one in flight a connection at most).
        if (heldWindow === undefined && (await held())) {
          const before = ran();
          await new Promise((resolve) => setTimeout(resolve, 300));
          if (await held()) heldWindow = ran() - before;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });

    expect(statements).toBeGreaterThan(0);
    expect(await metric('pgward_proxy_audit_backpressure_engaged_total')).toBeGreaterThan(0);
    expect(heldWindow).toBeDefined();
    expect(heldWindow).toBeLessThanOrEqual(connections);
    // Left alone the oldest was 3.4 s old at the flood's end (measured without the proxy's asking); held, it stays near
    // the high mark (1 s) with what the enrolled proxy's five asks a second, the answer's 100 ms rounding and the messages
    // under way add to it (1.2–1.7 s measured).
    expect(maxBehindMs).toBeGreaterThanOrEqual(1_000);
    expect(maxBehindMs).toBeLessThan(2_500);
    // The proxy logs whom it holds: the flooder's credential, not everyone.
    expect(logged.find((line) => line.msg.startsWith('ingest is behind'))?.credentials).toEqual([agent.credential.id]);
    // Nothing dropped: each statement's decision reaches ingest's consumer through the control plane.
    const ran = await metric('pgward_proxy_statements_total', 'event="query",');
    expect(ran).toBe(statements);
    await expect.poll(() => slowStatements, { timeout: 20_000, interval: 100 }).toBe(ran);
    await expect.poll(() => metric('pgward_proxy_audit_backpressure'), { timeout: 5_000, interval: 50 }).toBe(0);
  }, 60_000);
});
