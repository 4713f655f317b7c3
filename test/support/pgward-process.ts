/**
 * pgward as its users run it: `node bin/pgward.js serve` (or one --role of the split deployment) as
 * a child process, provisioned through its CLI and its HTTP API, its processes found in /proc, its
 * audit trail counted and verified with `pgward audit verify --from-events`. Shared by the e2e
 * tests and `npm run bench:e2e`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { openStateDatabase } from '../../src/state.js';

const BIN = resolve('bin/pgward.js');
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 30_000;

export interface PgwardProcess {
  readonly child: ChildProcess;
  readonly httpUrl: string;
  output(): string;
  readonly exited: Promise<number | null>;
  /** SIGINT, as a Ctrl-C; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Node options for the processes a benchmark starts (workers inherit them), e.g.
 * `PGWARD_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"`: NODE_OPTIONS refuses --cpu-prof.
 */
const nodeArgs = (process.env.PGWARD_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);

/** Starts `pgward <args>` (with `nodeOptions` on node's command line) and resolves once its /healthz answers 200; without the demo unless `env` asks for it. */
export async function startPgward(args: readonly string[], env: NodeJS.ProcessEnv, httpPort: number, nodeOptions: readonly string[] = []): Promise<PgwardProcess> {
  let output = '';
  const child = spawn(process.execPath, [...nodeArgs, ...nodeOptions, BIN, ...args], { env: { PGWARD_DEMO: 'off', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000)));
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000)));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  const stopOnExit = (): void => void child.kill('SIGKILL');
  process.on('exit', stopOnExit);
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const stop = async (): Promise<number | null> => {
    process.off('exit', stopOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const status = await fetch(`${httpUrl}/healthz`).then((r) => r.status, () => 0);
    if (status === 200) return { child, httpUrl, output: () => output, exited, stop };
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`pgward ${args.join(' ')} did not become healthy:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Runs a pgward CLI command to completion. */
export function pgwardCli(args: readonly string[], env: NodeJS.ProcessEnv): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export interface Login {
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

export interface Upstream {
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
  readonly password: string;
}

export interface Provisioned {
  readonly orgId: string;
  readonly apiKey: string;
  readonly projectId: string;
  /** One login per policy asked for, by name. */
  readonly logins: Record<string, Login>;
}

/**
 * Transaction pooling over 10 connections, as PgBouncer's pool in the benchmarks; one credential
 * may use all 10 (the default share is half the pool), since each run drives a single agent.
 */
export const TRANSACTION_POOL = { mode: 'transaction', max_connections: 10, max_connections_per_credential: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 } as const;

/**
 * An organization (the CLI), a project on `upstream` (the API), and for each of `policies` a policy
 * and an agent under it.
 */
export async function provision(pgward: { httpUrl: string; env: NodeJS.ProcessEnv }, upstream: Upstream, policies: Record<string, Record<string, unknown>>, databaseSettings: Record<string, unknown> = {}): Promise<Provisioned> {
  const created = pgwardCli(['admin', 'create-org', '--name', 'E2E org', '--plan', 'pro'], pgward.env);
  if (created.status !== 0) throw new Error(`admin create-org failed: ${created.stderr}`);
  const { org_id: orgId, api_key: apiKey } = JSON.parse(created.stdout) as { org_id: string; api_key: string };
  const call = async (path: string, payload: object): Promise<Record<string, unknown>> => {
    const response = await fetch(`${pgward.httpUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    const body = await response.text();
    if (response.status !== 201) throw new Error(`POST ${path}: ${response.status} ${body}`);
    return JSON.parse(body) as Record<string, unknown>;
  };
  const database = { host: upstream.host, port: upstream.port, name: upstream.database, username: upstream.user, password: upstream.password, ssl_mode: 'disable', pool_config: TRANSACTION_POOL, ...databaseSettings };
  const { project } = (await call('/v1/projects', { name: 'e2e', org_id: orgId, database })) as { project: { id: string } };
  const logins: Record<string, Login> = {};
  for (const [name, policy] of Object.entries(policies)) {
    const profile = (await call(`/v1/projects/${project.id}/policies`, { name, ...policy })) as { id: string };
    const agent = (await call(`/v1/projects/${project.id}/agents`, { name, policy_profile_id: profile.id })) as { connection_string: string };
    const url = new URL(agent.connection_string);
    logins[name] = { user: decodeURIComponent(url.username), password: decodeURIComponent(url.password), database: decodeURIComponent(url.pathname.slice(1)) };
  }
  return { orgId, apiKey, projectId: project.id, logins };
}

export interface AuditTally {
  /** Entries in the read model, as verified. */
  readonly entries: number;
  /** Entries recomputed from the event store's audit stream. */
  readonly events: number;
  readonly ok: boolean;
  readonly report: unknown;
}

/** `pgward audit verify --project ID --from-events`: the chain verified both from the read model and from the events. */
export function verifyAudit(projectId: string, env: NodeJS.ProcessEnv): AuditTally {
  const result = pgwardCli(['audit', 'verify', '--project', projectId, '--from-events'], env);
  // Exit 1 is also any error of the command (e.g. the state database refusing connections): then stdout is empty.
  if (result.status === null || result.status > 1 || result.stdout.trim() === '') throw new Error(`audit verify failed (${result.status}): ${result.stderr}`);
  const report = JSON.parse(result.stdout) as { ok: boolean; verified_count: number; from_events: { entries: number; verification: { ok: boolean } } };
  return { entries: report.verified_count, events: report.from_events.entries, ok: result.status === 0 && report.ok && report.from_events.verification.ok, report };
}

/** The state database of a running pgward with this environment (its PGWARD_STATE_URL, or the embedded one it started). */
export async function stateUrlOf(env: NodeJS.ProcessEnv): Promise<string> {
  return (await openStateDatabase(loadConfig(env), { reuseRunning: true })).url;
}

/** The project's entries in the audit read model (only its gap markers: `gapMarkers`), counted straight from the state database: cheap enough to poll. */
export async function auditEntryCount(stateUrl: string, projectId: string, gapMarkers = false): Promise<number> {
  const client = new pg.Client({ connectionString: stateUrl });
  await client.connect();
  try {
    const where = gapMarkers ? "project_id = $1 and event = 'gap_marker'" : 'project_id = $1';
    return Number((await client.query<{ n: string }>(`select count(*) as n from rm.audit_entries where ${where}`, [projectId])).rows[0]!.n);
  } finally {
    await client.end();
  }
}

export interface ProcessInfo {
  readonly pid: number;
  readonly ppid: number;
  readonly cmdline: string;
}

/** Every process on the machine whose /proc entry is readable. */
export function processes(): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      found.push({ pid: Number(name), ppid, cmdline });
    } catch {
      continue;
    }
  }
  return found;
}

/** The worker process `name` (`pgward worker NAME`) of the serve process `serverPid`. */
export function workerPid(serverPid: number, name: string): number | undefined {
  return processes().find((p) => p.ppid === serverPid && p.cmdline.includes(`pgward.js worker ${name} `))?.pid;
}

/** Polls `read` until `done` holds of its value; returns that value, or throws naming `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** One sample of a metric from a Prometheus text exposition, by name and labels. */
export function metricValue(exposition: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const [series, value] = [line.slice(0, line.lastIndexOf(' ')), line.slice(line.lastIndexOf(' ') + 1)];
    if (Object.entries(labels).every(([key, v]) => series.includes(`${key}="${v}"`))) return Number(value);
  }
  return undefined;
}
