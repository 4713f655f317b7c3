/**
 * The two deployments `npm run bench:e2e` measures, each started as its users start it:
 *
 * - `serve`: `node bin/pgward.js serve` in a fresh PGWARD_DATA_DIR (what `npm start` runs): the
 *   embedded PostgreSQL, the in-process bus, the proxy in that process and its two workers.
 * - `split`: state in a fresh database of the machine's PostgreSQL (PGWARD_STATE_URL), NATS
 *   JetStream on a stream of its own, and three processes as docs/operations.md lays them out:
 *   `pgward serve --role proxy`, `--role ingest --role projector` (the audit pipeline: its
 *   projection takes the entries ingest prepared) and `--role api`.
 *
 * Each is provisioned through its CLI and HTTP API, and names its processes for the CPU figures.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { generateAnchorKey } from '../../src/crypto/checkpoint.js';
import { freePort } from '../support/free-port.js';
import { PIPELINE_NODE_OPTIONS } from '../../src/workers/worker-process.js';
import { processes, provision, startPgward, stateUrlOf, type Login, type ProcessInfo, type PgwardProcess, type Provisioned, type Upstream } from '../support/pgward-process.js';
import { REALISTIC_POLICY } from './proxy-gateway.js';
import { initialize, type Endpoint } from './proxy-pgbench.js';
import type { Teardown } from './proxy-servers.js';

export const DEPLOYMENTS = ['serve', 'split'] as const;
export type DeploymentName = (typeof DEPLOYMENTS)[number];

/** The open credential's policy, and the realistic one: read-only, an allowlist, two masked columns, a row cap. */
/** PGWARD_BENCH_CACHE=off registers the database with its result cache off (the default cache_config has it on). */
/** PGWARD_BENCH_DATABASE_SETTINGS: more of the database's registration, as JSON (e.g. `{"pool_config": {...}}`). */
const BENCH_DATABASE_SETTINGS = {
  ...(process.env.PGWARD_BENCH_CACHE === 'off' ? { cache_config: { enabled: false, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 } } : {}),
  ...(JSON.parse(process.env.PGWARD_BENCH_DATABASE_SETTINGS ?? '{}') as Record<string, unknown>),
};

export const POLICIES = {
  open: { allowed_tables: ['public.*'] },
  realistic: REALISTIC_POLICY,
} as const;
export type Credential = keyof typeof POLICIES;

export interface Deployment {
  readonly name: DeploymentName;
  readonly proxyPort: number;
  readonly provisioned: Provisioned;
  readonly logins: Record<Credential, Login>;
  /** The environment its CLI runs with. */
  readonly env: NodeJS.ProcessEnv;
  /** The state database, for counting audit entries. */
  readonly stateUrl: string;
  /** The processes whose CPU time the bench reads, by what they are; read again at each sample (workers restart, backends come and go). */
  readonly processes: Record<string, () => Promise<number[]>>;
  /** A line for the report. */
  readonly description: string;
}

const MACHINE_PG = 'postgresql://postgres@127.0.0.1:5432/postgres';

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The upstream of a bench: a fresh database of the machine's PostgreSQL, filled by `pgbench -i -s <scale>`, dropped at teardown. */
export interface BenchUpstream {
  /** A connection to the machine's PostgreSQL (database postgres), closed at teardown. */
  readonly admin: pg.Client;
  /** pgbench's login to it, straight. */
  readonly direct: Endpoint;
  /** What pgward registers. */
  readonly upstream: Upstream;
  readonly version: string;
}

export async function benchUpstream(pgbenchBinary: string, scale: number, teardown: Teardown, signal: AbortSignal): Promise<BenchUpstream> {
  const machine = new URL(MACHINE_PG);
  const [port, user] = [Number(machine.port), machine.username];
  const admin = new pg.Client({ host: '127.0.0.1', port, user, database: 'postgres' });
  await admin.connect();
  teardown.add(() => admin.end());
  const database = `pgward_e2e_bench_${randomBytes(4).toString('hex')}`;
  await admin.query(`create database ${database}`);
  teardown.add(() => admin.query(`drop database if exists ${database} with (force)`));
  const version = (await admin.query<{ version: string }>('select version()')).rows[0]!.version;
  // The machine's PostgreSQL trusts local connections: the password is what PgBouncer and pgward are given, never checked upstream.
  const password = `bench-${process.pid}`;
  const direct: Endpoint = { port, user, password, database };
  await initialize(pgbenchBinary, direct, scale, signal);
  return { admin, direct, upstream: { host: '127.0.0.1', ...direct }, version };
}

/** The pids of the backends connected to `database` on the machine's PostgreSQL, through the bench's admin connection. */
export function backendsOf(admin: pg.Client, database: string): () => Promise<number[]> {
  return async () => (await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database])).rows.map((row) => row.pid);
}

/**
 * The processes `pid` forked, from /proc/<pid>/task/<tid>/children: the meter reads its groups every
 * 250 ms, and serve's groups found their pids in four scans of all of /proc, 23 ms of the bench's CPU
 * a sample (~9 % of a core, taken from pgward's runs only); reading the children takes 0.8 ms.
 */
function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter((word) => word !== '').map(Number));
  } catch {
    return [];
  }
}

/** The processes `pid` forked, with their command lines. */
function childrenOf(pid: number): ProcessInfo[] {
  return childPids(pid).flatMap((child) => {
    try {
      return [{ pid: child, ppid: pid, cmdline: readFileSync(`/proc/${child}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() }];
    } catch {
      return [];
    }
  });
}

/** A postmaster and every process it forked. */
function clusterOf(postmaster: number): number[] {
  return [postmaster, ...childPids(postmaster)];
}

/** PGWARD_BENCH_NODE_OPTIONS: node options for every pgward process (serve's workers inherit them), e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const EXTRA_NODE_OPTIONS = (process.env.PGWARD_BENCH_NODE_OPTIONS ?? '').split(/\s+/).filter((option) => option !== '');

function baseEnv(): NodeJS.ProcessEnv {
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_MASTER_KEY: _k, ...rest } = process.env;
  return { ...rest, PGWARD_PUBLIC_HOST: '127.0.0.1', PGWARD_LOG_LEVEL: 'warn' };
}

async function scratchDir(teardown: Teardown): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'pgward-bench-e2e-'));
  await chmod(dir, 0o755);
  teardown.add(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function provisioned(api: PgwardProcess, env: NodeJS.ProcessEnv, upstream: Upstream): Promise<{ provisioned: Provisioned; logins: Record<Credential, Login> }> {
  const result = await provision({ httpUrl: api.httpUrl, env }, upstream, POLICIES, BENCH_DATABASE_SETTINGS).catch((error: unknown) => {
    throw new Error(`provisioning failed: ${(error as Error).message}\nthe API's log:\n${api.output().slice(-4_000)}`);
  });
  return { provisioned: result, logins: { open: result.logins.open!, realistic: result.logins.realistic! } };
}

function stopOnTeardown(teardown: Teardown, running: PgwardProcess, what: string): void {
  teardown.add(async () => {
    const code = await running.stop();
    if (code !== 0) throw new Error(`${what} exited with ${code}:\n${running.output().slice(-4_000)}`);
  });
}

/** `node bin/pgward.js serve` in a fresh data directory. */
export async function startServe(upstream: Upstream, admin: pg.Client, teardown: Teardown): Promise<Deployment> {
  const dir = await scratchDir(teardown);
  const [httpPort, proxyPort, pgPort] = [await freePort(), await freePort(), await freePort()];
  const env = { ...baseEnv(), PGWARD_DATA_DIR: join(dir, '.pgward'), PGWARD_HTTP_PORT: String(httpPort), PGWARD_PROXY_PORT: String(proxyPort), PGWARD_EMBEDDED_PG_PORT: String(pgPort) };
  const running = await startPgward(['serve'], env, httpPort, EXTRA_NODE_OPTIONS);
  stopOnTeardown(teardown, running, 'pgward serve');
  const serverPid = running.child.pid!;
  const { provisioned: p, logins } = await provisioned(running, env, upstream);
  const postmaster = (): number | undefined => childrenOf(serverPid).find((q) => / -D \S+\/\.pgward\/pg /.test(q.cmdline))?.pid;
  const worker = (name: string) => async () => childrenOf(serverPid).filter((q) => q.cmdline.includes(`pgward.js worker ${name} `)).map((q) => q.pid);
  return {
    name: 'serve',
    proxyPort,
    provisioned: p,
    logins,
    env,
    stateUrl: await stateUrlOf(env),
    processes: {
      'proxy (serve)': async () => [serverPid],
      'ingest+projector': worker('pipeline'),
      api: worker('api'),
      'state PG': async () => {
        const pid = postmaster();
        return pid === undefined ? [] : clusterOf(pid);
      },
      'upstream PG': backendsOf(admin, upstream.database),
    },
    description: `node bin/pgward.js serve (pid ${serverPid}): embedded PostgreSQL on ${pgPort}, in-process bus, proxy on ${proxyPort}, workers pipeline and api`,
  };
}

/** The roles as separate processes on a fresh state database of the machine's PostgreSQL, and a NATS stream of their own. */
export async function startSplit(upstream: Upstream, admin: pg.Client, natsUrl: string, teardown: Teardown): Promise<Deployment> {
  const dir = await scratchDir(teardown);
  const tag = randomBytes(4).toString('hex');
  const stateDatabase = `pgward_e2e_state_${tag}`;
  await admin.query(`create database ${stateDatabase}`);
  teardown.add(() => admin.query(`drop database if exists ${stateDatabase} with (force)`));
  const stream = `PGWARD_E2E_${tag}`;
  teardown.add(async () => {
    const nc = await connect({ servers: natsUrl });
    try {
      await (await jetstreamManager(nc)).streams.delete(stream).catch(() => undefined);
    } finally {
      await nc.close();
    }
  });
  const stateUrl = withDatabase(MACHINE_PG, stateDatabase);
  const proxyPort = await freePort();
  const anchorKey = join(dir, 'anchor.pem');
  await writeFile(anchorKey, generateAnchorKey(), { mode: 0o600 });
  const env = {
    ...baseEnv(),
    PGWARD_DATA_DIR: dir,
    PGWARD_STATE_URL: stateUrl,
    PGWARD_MASTER_KEY: randomBytes(32).toString('base64'),
    PGWARD_AUDIT_ANCHOR_KEY: anchorKey,
    NATS_URL: natsUrl,
    PGWARD_NATS_STREAM: stream,
    PGWARD_NATS_SUBJECT: `pgward.e2e.${tag}`,
    PGWARD_PROXY_PORT: String(proxyPort),
  };
  const roles: Record<string, PgwardProcess> = {};
  // The pipeline process started as docs/operations.md says, with the options of `pgward serve`'s pipeline worker.
  for (const [group, nodeOptions] of [[['ingest', 'projector'], PIPELINE_NODE_OPTIONS], [['api'], []], [['proxy'], []]] as const) {
    const httpPort = await freePort();
    const running = await startPgward(['serve', ...group.flatMap((role) => ['--role', role])], { ...env, PGWARD_HTTP_PORT: String(httpPort) }, httpPort, [...nodeOptions, ...EXTRA_NODE_OPTIONS]);
    stopOnTeardown(teardown, running, `pgward serve --role ${group.join(' --role ')}`);
    roles[group.join('+')] = running;
  }
  const { provisioned: p, logins } = await provisioned(roles.api!, env, upstream);
  const pidOf = (role: string) => async () => [roles[role]!.child.pid!];
  // The bus's server, when it runs on this machine (shared with whatever else uses it meanwhile).
  const natsPids = processes().filter((q) => /(^|\/)nats-server( |$)/.test(q.cmdline)).map((q) => q.pid);
  const natsServer = async () => natsPids;
  return {
    name: 'split',
    proxyPort,
    provisioned: p,
    logins,
    env,
    stateUrl,
    processes: {
      proxy: pidOf('proxy'),
      'ingest+projector': pidOf('ingest+projector'),
      api: pidOf('api'),
      NATS: natsServer,
      'state PG': backendsOf(admin, stateDatabase),
      'upstream PG': backendsOf(admin, upstream.database),
    },
    description: `pgward serve --role proxy, --role ingest --role projector, --role api as three processes; state in database ${stateDatabase} of the machine's PostgreSQL; NATS stream ${stream}`,
  };
}
