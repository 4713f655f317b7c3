/**
 * What pinning costs (`npm run bench:pinning`): a statement that changes session state
 * (`set_config(…, false)`) keeps its upstream connection for the session's life and has it reset
 * (DISCARD ALL) when the session ends; the same statement with `is_local` true does neither.
 * The bench's cluster and gateway (proxy-servers.ts, proxy-gateway.ts: transaction pooling,
 * max_connections 10, so a credential's share is 5) serve pgbench runs of both scripts at
 * several client counts, and a loop of whole sessions (log in, one statement, log out) of both.
 * A measurement, not a test.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startGateway } from './proxy-gateway.js';
import { initialize, select, type Endpoint, type Outcome } from './proxy-pgbench.js';
import { findBinaries, serverUser, startCluster, Teardown } from './proxy-servers.js';

const SCALE = 1;
// Longer than the pool's acquire_timeout_ms (5 s): a pinned client beyond its credential's share then fails visibly instead of waiting out the run.
const SECONDS = Number(process.env.PGWARD_BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.PGWARD_BENCH_ROUNDS ?? 2);
const SESSIONS = 200;
const script = (local: boolean): string =>
  `\\set aid random(1, ${SCALE * 100_000})\nSELECT set_config('application_name', 'bench', ${local}), abalance FROM pgbench_accounts WHERE aid = :aid;\n`;

function log(line: string): void {
  console.log(`[bench:pinning] ${line}`);
}

const describe = (outcome: Outcome): string => (outcome.ok ? `${outcome.tps.toFixed(0)} tps` : `failed (${outcome.reason})`);

/** Whole sessions, one after another: log in, run the statement, log out; sessions per second. */
async function sessions(endpoint: Endpoint, local: boolean): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < SESSIONS; i++) {
    const client = new pg.Client({ host: '127.0.0.1', port: endpoint.port, user: endpoint.user, password: endpoint.password, database: endpoint.database });
    await client.connect();
    await client.query(`SELECT set_config('application_name', 'bench', ${local}), abalance FROM pgbench_accounts WHERE aid = 1`);
    await client.end();
  }
  return SESSIONS / ((performance.now() - started) / 1000);
}

async function bench(teardown: Teardown, signal: AbortSignal): Promise<void> {
  const binaries = await findBinaries();
  const runAs = serverUser();
  const dir = await mkdtemp(join(tmpdir(), 'pgward-bench-pinning-'));
  teardown.add(() => rm(dir, { recursive: true, force: true }));
  if (runAs) await chmod(dir, 0o711);
  const cluster = await startCluster(dir, binaries, runAs, teardown);
  const admin = new pg.Client({ connectionString: cluster.url('postgres') });
  await admin.connect();
  await admin.query('create database pgbench');
  await admin.query('create database pgward_state');
  await admin.end();
  const direct: Endpoint = { port: cluster.port, user: cluster.user, password: cluster.password, database: 'pgbench' };
  await initialize(binaries.pgbench, direct, SCALE, signal);
  const gateway = await startGateway(cluster.url('pgward_state'), { port: cluster.port, database: 'pgbench', user: cluster.user, password: cluster.password }, teardown);
  const agent: Endpoint = { port: gateway.port, ...gateway.agent };
  const scripts = { unpinned: join(dir, 'unpinned.sql'), pinned: join(dir, 'pinned.sql') };
  await writeFile(scripts.unpinned, script(true));
  await writeFile(scripts.pinned, script(false));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const clients of [1, 5, 10]) {
      for (const kind of ['unpinned', 'pinned'] as const) {
        const outcome = await select(binaries.pgbench, agent, { mode: 'policy', clients, seconds: SECONDS, script: scripts[kind] }, signal);
        log(`round ${round} c=${clients} ${kind}: ${describe(outcome)}`);
      }
    }
    for (const kind of ['unpinned', 'pinned'] as const) log(`round ${round} ${SESSIONS} sessions one after another, ${kind}: ${(await sessions(agent, kind === 'unpinned')).toFixed(0)} sessions/s`);
  }
}

async function main(): Promise<void> {
  const teardown = new Teardown();
  const abort = new AbortController();
  process.on('SIGINT', () => abort.abort(new Error('interrupted')));
  try {
    await bench(teardown, abort.signal);
  } finally {
    await teardown.run((error) => console.error('[bench:pinning] cleanup step failed:', error));
  }
}

main().catch((error: unknown) => {
  console.error('[bench:pinning] failed:', error);
  process.exitCode = 1;
});
