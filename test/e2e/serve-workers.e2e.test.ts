/**
 * `pgward serve` as `npm start` runs it (embedded state, the in-process bus): ingest and the
 * projections, and the API, run in worker processes. Killing one mid-load, or stopping its event
 * loop, leaves the proxy serving, the worker is started again, and the audit trail ends with exactly one entry per statement, its
 * chain verified from the read model and from the events.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentLoad } from '../support/agent-load.js';
import { freePort } from '../support/free-port.js';
import { freshDatabase, upstreamLogin, type TestDatabase } from '../support/pg.js';
import { auditEntryCount, metricValue, provision, startPgward, stateUrlOf, verifyAudit, waitFor, workerPid, type PgwardProcess } from '../support/pgward-process.js';

const CLIENTS = 4;
/** Each client pauses this long between statements: the test is about what is lost, not speed, and the backlog must drain on a busy machine. */
const PAUSE_MS = 10;

let dataDir: string;
let upstream: TestDatabase;
let env: NodeJS.ProcessEnv;
let httpPort: number;
let proxyPort: number;
let server: PgwardProcess | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'pgward-workers-'));
  await chmod(dataDir, 0o755);
  upstream = await freshDatabase('serve_workers');
  const client = new pg.Client({ connectionString: upstream.url });
  client.on('error', () => undefined);
  await client.connect();
  await client.query("create table public.items (id int primary key, label text not null); insert into public.items select i, 'item-' || i from generate_series(1, 100) i");
  await client.end();
  httpPort = await freePort();
  proxyPort = await freePort();
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, ...rest } = process.env;
  env = {
    ...rest,
    PGWARD_DATA_DIR: join(dataDir, '.pgward'),
    PGWARD_HTTP_PORT: String(httpPort),
    PGWARD_PROXY_PORT: String(proxyPort),
    PGWARD_EMBEDDED_PG_PORT: String(await freePort()),
    PGWARD_PUBLIC_HOST: '127.0.0.1',
    PGWARD_LOG_LEVEL: 'warn',
  };
});

afterAll(async () => {
  await server?.stop();
  await upstream?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

const metrics = (): Promise<string> => fetch(`http://127.0.0.1:${httpPort}/metrics`).then((r) => r.text(), () => '');

/** SIGKILL: the worker crashed; SIGSTOP: its event loop stalled (the supervisor kills it when its beats stop). */
async function killAndAwaitRestart(serverPid: number, name: string, restartsBefore: number, signal: 'SIGKILL' | 'SIGSTOP' = 'SIGKILL'): Promise<{ killedAt: number; readyAt: number; oldPid: number; newPid: number }> {
  const oldPid = workerPid(serverPid, name);
  expect(oldPid).toBeGreaterThan(0);
  process.kill(oldPid!, signal);
  const killedAt = Date.now();
  const newPid = await waitFor(`worker ${name} to start again`, () => workerPid(serverPid, name), (pid) => pid !== undefined && pid !== oldPid);
  await waitFor(
    `worker ${name} ready again, its restart counted`,
    metrics,
    (text) => metricValue(text, 'pgward_worker_up', { worker: name }) === 1 && metricValue(text, 'pgward_worker_restarts_total', { worker: name }) === restartsBefore + 1,
    120_000,
  );
  return { killedAt, readyAt: Date.now(), oldPid: oldPid!, newPid: newPid! };
}

describe('pgward serve: the proxy apart from its workers', () => {
  it('keeps serving while the ingest+projection worker is killed, the API worker is killed, and the ingest+projection worker stalls, mid-load; each is restarted; every statement is audited once and the chain verifies', async () => {
    server = await startPgward(['serve'], env, httpPort);
    const serverPid = server.child.pid!;
    const { projectId, logins } = await provision({ httpUrl: server.httpUrl, env }, upstreamLogin(upstream), { open: { allowed_tables: ['public.*'] } });

    const load = await startAgentLoad(proxyPort, logins.open!, CLIENTS, PAUSE_MS);
    await waitFor('statements flowing', () => load.done.length, (n) => n >= 200);

    const pipeline = await killAndAwaitRestart(serverPid, 'pipeline', 0);
    const duringPipelineOutage = load.done.filter((at) => at > pipeline.killedAt && at < pipeline.readyAt).length;
    const atRestart = load.done.length;
    await waitFor('statements after the restart', () => load.done.length, (n) => n >= atRestart + 100);

    const api = await killAndAwaitRestart(serverPid, 'api', 0);
    const duringApiOutage = load.done.filter((at) => at > api.killedAt && at < api.readyAt).length;
    const afterApi = load.done.length;
    await waitFor('statements after the API restart', () => load.done.length, (n) => n >= afterApi + 100);

    const stalled = await killAndAwaitRestart(serverPid, 'pipeline', 1, 'SIGSTOP');
    const duringStall = load.done.filter((at) => at > stalled.killedAt && at < stalled.readyAt).length;
    await load.stop();
    const statements = load.done.length;

    expect(load.failures).toEqual([]);
    expect(duringPipelineOutage).toBeGreaterThan(0);
    expect(duringApiOutage).toBeGreaterThan(0);
    // The stall is noticed after 15 s without a beat: the proxy served all along.
    expect(stalled.readyAt - stalled.killedAt).toBeGreaterThan(15_000);
    expect(duringStall).toBeGreaterThan(0);
    expect(stalled.newPid).not.toBe(stalled.oldPid);
    expect(pipeline.newPid).not.toBe(pipeline.oldPid);
    expect(api.newPid).not.toBe(api.oldPid);

    const stateUrl = await stateUrlOf(env);
    await waitFor('every statement in the audit read model', () => auditEntryCount(stateUrl, projectId), (n) => n >= statements, 180_000);
    const tally = verifyAudit(projectId, env);
    expect({ entries: tally.entries, events: tally.events, ok: tally.ok }).toEqual({ entries: statements, events: statements, ok: true });

    expect(await server.stop()).toBe(0);
    server = undefined;
  }, 600_000);
});
