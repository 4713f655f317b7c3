/**
 * pgward's lifetime as real processes: `pgward serve` (and `npm start`) on a fresh data directory
 * with random ports, its worker processes and embedded PostgreSQL found in /proc. SIGTERM drains
 * (statements under way finish within PGWARD_DRAIN_TIMEOUT_MS, their decisions reach the trail) and
 * leaves nothing running; a start after `kill -9` stops the orphaned PostgreSQL and serves; SIGHUP
 * to the process group and SIGTERM to npm's pid stop everything; a port in use and a missing key
 * end the start with one line and exit 1 or 2, leaving nothing behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateAnchorKey } from '../../src/crypto/checkpoint.js';
import { freePort } from '../support/free-port.js';
import { admin, freshDatabase, upstreamLogin, type TestDatabase } from '../support/pg.js';
import { auditEntryCount, processes, provision, stateUrlOf, verifyAudit, waitFor, type Login } from '../support/pgward-process.js';

const BIN = resolve('bin/pgward.js');
const START_TIMEOUT_MS = 180_000;
/** The acceptance bound: from the signal to the last process gone. */
const STOP_WITHIN_MS = 15_000;

const scratch: string[] = [];
const launched: Launched[] = [];
let upstream: TestDatabase;

beforeAll(async () => {
  upstream = await freshDatabase('lifecycle');
  await admin(upstream.url, (client) =>
    client.query(`create table public.items (id int primary key); insert into public.items select generate_series(1, 100);
                  create table public.stuck (id int primary key); insert into public.stuck values (1)`),
  );
});

afterEach(async () => {
  // A test that failed midway leaves its processes: they go with it.
  for (const run of launched.splice(0)) for (const pid of run.pids()) signal(pid, 'SIGKILL');
});

afterAll(async () => {
  await upstream?.drop();
  for (const dir of scratch) await rm(dir, { recursive: true, force: true });
});

interface Setup {
  readonly dataDir: string;
  readonly httpPort: number;
  readonly proxyPort: number;
  readonly pgPort: number;
  readonly env: NodeJS.ProcessEnv;
}

/** A fresh data directory (enterable by the postgres user when run as root) and free ports. */
async function setup(extra: NodeJS.ProcessEnv = {}): Promise<Setup> {
  const dir = await mkdtemp(join(tmpdir(), 'pgward-lifecycle-'));
  await chmod(dir, 0o755);
  scratch.push(dir);
  const [httpPort, proxyPort, pgPort] = [await freePort(), await freePort(), await freePort()];
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_DRAIN_TIMEOUT_MS: _d, ...rest } = process.env;
  const dataDir = join(dir, '.pgward');
  const env = {
    ...rest,
    PGWARD_DATA_DIR: dataDir,
    PGWARD_HTTP_PORT: String(httpPort),
    PGWARD_PROXY_PORT: String(proxyPort),
    PGWARD_EMBEDDED_PG_PORT: String(pgPort),
    PGWARD_PUBLIC_HOST: '127.0.0.1',
    PGWARD_LOG_LEVEL: 'info',
    ...extra,
  };
  return { dataDir, httpPort, proxyPort, pgPort, env };
}

interface Launched {
  readonly child: ChildProcess;
  output(): string;
  stderr(): string;
  readonly exited: Promise<number | null>;
  /** The launched process and every process below it, as last seen running. */
  pids(): number[];
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone already.
  }
}

function descendants(root: number): number[] {
  const all = processes();
  const found = [root];
  for (let i = 0; i < found.length; i++) for (const p of all) if (p.ppid === found[i] && !found.includes(p.pid)) found.push(p.pid);
  return found;
}

function launch(command: string, args: readonly string[], env: NodeJS.ProcessEnv, options: { detached?: boolean } = {}): Launched {
  let output = '';
  let stderr = '';
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  let seen: number[] = [child.pid!];
  const run: Launched = {
    child,
    output: () => output,
    stderr: () => stderr,
    exited,
    pids: () => {
      const now = descendants(child.pid!);
      seen = [...new Set([...seen, ...now])];
      return seen;
    },
  };
  launched.push(run);
  return run;
}

const serve = (env: NodeJS.ProcessEnv, args: readonly string[] = ['serve'], options: { detached?: boolean } = {}): Launched => launch(process.execPath, [BIN, ...args], env, options);

/** Waits until /healthz answers 200; the processes running then are recorded. */
async function healthy(run: Launched, httpPort: number): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if ((await fetch(`http://127.0.0.1:${httpPort}/healthz`).then((r) => r.status, () => 0)) === 200) break;
    if (run.child.exitCode !== null || Date.now() > deadline) throw new Error(`pgward did not become healthy:\n${run.output()}`);
    await delay(200);
  }
  run.pids();
}

/** What the running processes among a launch's are: pgward, a worker, the embedded PostgreSQL (its own children left out). */
function kinds(run: Launched): string[] {
  const pids = run.pids();
  return processes()
    .filter((p) => pids.includes(p.pid) && p.pid !== run.child.pid)
    .flatMap((p) => /pgward\.js (serve|worker \w+)/.exec(p.cmdline)?.[1] ?? (/postgres -D /.test(p.cmdline) ? 'postgres' : []))
    .sort();
}

const workersOf = (run: Launched): number[] => processes().filter((p) => p.ppid === run.child.pid && p.cmdline.includes('pgward.js worker')).map((p) => p.pid);

/** A login at the proxy: 'accepted', or why it was not. */
async function tryLogin(port: number, login: Login): Promise<string> {
  const client = new pg.Client({ host: '127.0.0.1', port, ...login, ssl: false });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return 'accepted';
  } catch (error) {
    return (error as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const alive = (pids: readonly number[]): number[] => {
  const running = new Set(processes().map((p) => p.pid));
  return pids.filter((pid) => running.has(pid));
};

/**
 * A process that ends with its parent (tsx's esbuild service, when a cold cache started it) is
 * reaped a moment after the parent's exit: what is still alive after this long was left running.
 */
const EXIT_GRACE_MS = 2_000;

/** Those of `pids` still alive once they all went, or `graceMs` passed. */
async function aliveAfter(pids: readonly number[], graceMs: number): Promise<number[]> {
  const deadline = Date.now() + graceMs;
  while (alive(pids).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return alive(pids);
}

/** The embedded PostgreSQL of `dataDir`, if running. */
const postmasterOf = (dataDir: string): number | undefined => processes().find((p) => p.cmdline.includes(`-D ${join(dataDir, 'pg')} `))?.pid;

/** Waits for every one of `pids` to be gone; the milliseconds since `since`. */
async function allGone(pids: readonly number[], since: number): Promise<number> {
  await waitFor('every process to be gone', () => alive(pids), (left) => left.length === 0, STOP_WITHIN_MS * 2);
  return Date.now() - since;
}

/** What a failed start prints on stderr, Node's own process warnings aside. */
const errorLines = (stderr: string): string[] => stderr.split('\n').filter((line) => line !== '' && !/^\(node:\d+\) |^\(Use `node --trace-warnings/.test(line));

function portTaken(port: number): Promise<Server> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => done(server));
  });
}

const upstreamOf = () => upstreamLogin(upstream);

async function agentClient(port: number, login: Login, errors: Error[]): Promise<pg.Client> {
  const client = new pg.Client({ host: '127.0.0.1', port, ...login, ssl: false });
  client.on('error', (error) => errors.push(error));
  await client.connect();
  return client;
}

/** Resolves once a backend of the upstream waits for a lock with `text` in its query. */
const waitingOnLock = (text: string) =>
  waitFor(
    `a statement on ${text} waiting for its lock`,
    () => admin(upstream.url, (client) => client.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock' and query like $2`, [upstream.name, `%${text}%`])).then((r) => r.rows[0]!.n),
    (n) => n === 1,
  );

describe('pgward serve: stopping', () => {
  it('SIGTERM refuses new connections, lets a running statement finish, ends one past the drain deadline, keeps both in the audit trail, and leaves no process within 15 s', async () => {
    const s = await setup({ PGWARD_DRAIN_TIMEOUT_MS: '4000' });
    const run = serve(s.env);
    await healthy(run, s.httpPort);
    expect(kinds(run)).toEqual(['postgres', 'worker api', 'worker pipeline']);
    const { projectId, logins } = await provision({ httpUrl: `http://127.0.0.1:${s.httpPort}`, env: s.env }, upstreamOf(), { open: { allowed_tables: ['public.*'] } });

    const errors: Error[] = [];
    const finishing = await agentClient(s.proxyPort, logins.open!, errors);
    const overdue = await agentClient(s.proxyPort, logins.open!, errors);
    const idle = await agentClient(s.proxyPort, logins.open!, errors);
    for (const client of [finishing, overdue, idle]) expect((await client.query('select count(*)::int as n from public.items')).rows).toEqual([{ n: 100 }]);

    // The lock on items goes during the drain, the one on stuck only after pgward is gone: one statement finishes, one outlives the drain.
    const lockers = [new pg.Client({ connectionString: upstream.url }), new pg.Client({ connectionString: upstream.url })] as const;
    for (const [locker, table] of [[lockers[0], 'public.items'], [lockers[1], 'public.stuck']] as const) {
      await locker.connect();
      await locker.query(`begin; lock table ${table} in access exclusive mode`);
    }
    // The same text was read a moment ago: the hint keeps the result cache from answering it without the lock.
    const finished = finishing.query('/* pgward:no-cache */ select count(*)::int as n from public.items').then((r) => r.rows, (error: Error) => error);
    const ended = overdue.query('select count(*)::int as n from public.stuck').then((r) => r.rows, (error: Error) => error);
    await waitingOnLock('public.items');
    await waitingOnLock('public.stuck');

    const signalledAt = Date.now();
    run.child.kill('SIGTERM');
    await waitFor('the proxy to stop accepting', () => tryLogin(s.proxyPort, logins.open!), (outcome) => /ECONNREFUSED/.test(outcome), 5_000);
    expect(run.child.exitCode).toBeNull();
    await lockers[0].query('commit');

    expect(await finished).toEqual([{ n: 100 }]);
    expect(await run.exited).toBe(0);
    const stoppedIn = await allGone(run.pids(), signalledAt);
    await lockers[1].query('commit');
    for (const locker of lockers) await locker.end();
    expect(stoppedIn).toBeLessThan(STOP_WITHIN_MS);
    expect(((await ended) as { code?: string }).code ?? (await ended)).toBe('57P01');
    expect(errors.map((error) => (error as { code?: string }).code)).toEqual(expect.arrayContaining(['57P01']));
    expect(run.output()).toMatch(/"signal":"SIGTERM","drain_timeout_ms":4000,"msg":"stopping"/);
    expect(run.output()).toMatch(/"sessions":1,"msg":"ended sessions still running a statement at the drain deadline"/);
    for (const client of [finishing, overdue, idle]) await client.end().catch(() => undefined);

    // A count per client, the one that finished in the drain, the one ended at its deadline.
    const again = serve(s.env);
    await healthy(again, s.httpPort);
    const stateUrl = await stateUrlOf(s.env);
    await waitFor('every statement in the audit read model', () => auditEntryCount(stateUrl, projectId), (n) => n >= 5, 60_000);
    const tally = verifyAudit(projectId, s.env);
    expect({ entries: tally.entries, events: tally.events, ok: tally.ok }).toEqual({ entries: 5, events: 5, ok: true });
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 600_000);

  it('after kill -9 the next start stops the orphaned PostgreSQL, logs it, and serves; SIGHUP to its process group then stops everything', async () => {
    const s = await setup();
    const first = serve(s.env);
    await healthy(first, s.httpPort);
    const orphan = postmasterOf(s.dataDir);
    expect(orphan).toBeGreaterThan(0);
    const workers = workersOf(first);
    expect(workers).toHaveLength(2);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBeNull();
    // The workers follow their supervisor; the PostgreSQL it started does not.
    await allGone(workers, Date.now());
    expect(alive([orphan!])).toEqual([orphan]);

    const second = serve(s.env, ['serve'], { detached: true });
    await healthy(second, s.httpPort);
    expect(alive([orphan!])).toEqual([]);
    const recovered = second.output().split('\n').find((line) => line.includes('"event":"embedded_postgres_recovered"'));
    expect(JSON.parse(recovered!)).toMatchObject({ level: 40, postgres_pid: orphan, owner_pid: first.child.pid, data_dir: s.dataDir });
    const created = launch(process.execPath, [BIN, 'admin', 'create-org', '--name', 'After the crash'], s.env);
    expect(await created.exited).toBe(0);

    // A closing terminal, or the shell of a launcher that ends: SIGHUP to the whole group.
    const signalledAt = Date.now();
    process.kill(-second.child.pid!, 'SIGHUP');
    expect(await second.exited).toBe(0);
    expect(await allGone(second.pids(), signalledAt)).toBeLessThan(STOP_WITHIN_MS);
    expect(second.output()).toMatch(/"signal":"SIGHUP".*"msg":"stopping"/);
    expect(postmasterOf(s.dataDir)).toBeUndefined();
  }, 600_000);

  it('SIGTERM to the pid of `npm start` reaches pgward, which stops everything', async () => {
    const s = await setup();
    const npm = launch('npm', ['start'], s.env);
    await healthy(npm, s.httpPort);
    expect(kinds(npm)).toEqual(['postgres', 'serve', 'worker api', 'worker pipeline']);
    const signalledAt = Date.now();
    npm.child.kill('SIGTERM');
    expect(await allGone(npm.pids(), signalledAt)).toBeLessThan(STOP_WITHIN_MS);
    expect(npm.output()).toMatch(/"signal":"SIGTERM".*"msg":"stopping"/);
    expect(npm.output()).toMatch(/"msg":"stopped"/);
  }, 600_000);
});

/** What a start with one port taken left: its exit, what it said, and which of its processes outlived it. */
interface FailedStart {
  readonly port: number;
  readonly code: number | null;
  readonly output: string;
  readonly stderr: string;
  readonly left: readonly number[];
  readonly postmaster: number | undefined;
}

async function startWithPortTaken(port: (s: Setup) => number): Promise<FailedStart> {
  const s = await setup();
  const taken = await portTaken(port(s));
  try {
    const run = serve(s.env);
    const pids = new Set<number>();
    const watch = setInterval(() => run.pids().forEach((pid) => pids.add(pid)), 100);
    const code = await run.exited;
    clearInterval(watch);
    return { port: port(s), code, output: run.output(), stderr: run.stderr(), left: await aliveAfter([...pids], EXIT_GRACE_MS), postmaster: postmasterOf(s.dataDir) };
  } finally {
    taken.close();
  }
}

describe('pgward serve: a start that fails', () => {
  const variables = [
    ['PGWARD_PROXY_PORT', (s: Setup) => s.proxyPort],
    ['PGWARD_HTTP_PORT', (s: Setup) => s.httpPort],
    ['PGWARD_EMBEDDED_PG_PORT', (s: Setup) => s.pgPort],
  ] as const;
  // The three starts are independent (their own data directories and ports): they run side by side, each test reads its own.
  const outcomes = new Map<string, FailedStart>();
  beforeAll(async () => {
    const settled = await Promise.all(variables.map(([, port]) => startWithPortTaken(port)));
    variables.forEach(([variable], i) => outcomes.set(variable, settled[i]!));
  }, 300_000);

  for (const [variable] of variables) {
    it(`with ${variable} in use exits 1 with one line naming it and leaves nothing running`, () => {
      const outcome = outcomes.get(variable)!;
      // What the processes said, with every failed expectation: this test has failed in loaded CI runs only.
      expect(outcome.code, outcome.output).toBe(1);
      expect(errorLines(outcome.stderr), outcome.output).toEqual([`pgward: cannot listen on 127.0.0.1:${outcome.port} (${variable}): address already in use`]);
      expect(outcome.output).not.toMatch(/"level":50/);
      expect(outcome.left, JSON.stringify(processes().filter((p) => outcome.left.includes(p.pid)))).toEqual([]);
      expect(outcome.postmaster).toBeUndefined();
      // A taken listen port is found before the state database or a worker starts: their stop could otherwise stall the exit.
      if (variable !== 'PGWARD_EMBEDDED_PG_PORT') expect(outcome.output).not.toMatch(/state database ready|worker ready/);
    });
  }
});

describe('pgward serve: configuration that is missing', () => {
  let state: TestDatabase;
  beforeAll(async () => {
    state = await freshDatabase('lifecycle_state');
  });
  afterAll(async () => {
    await state?.drop();
  });

  const tablesIn = (url: string) => admin(url, (client) => client.query<{ n: number }>(`select count(*)::int as n from pg_tables where schemaname not in ('pg_catalog', 'information_schema')`)).then((r) => r.rows[0]!.n);

  it('PGWARD_STATE_URL without PGWARD_AUDIT_ANCHOR_KEY, or without PGWARD_MASTER_KEY, or a relay peer’s CA that cannot be read, exits 2 naming the variable before writing anything', async () => {
    const s = await setup({ PGWARD_STATE_URL: state.url, PGWARD_MASTER_KEY: Buffer.alloc(32, 7).toString('base64') });
    const anchor = join(s.dataDir, '..', 'anchor.pem');
    await writeFile(anchor, generateAnchorKey(), { mode: 0o600 });
    const absentCa = join(s.dataDir, 'peer-ca.pem');
    // The api role relays its hosted MCP's statements too: it reads the peers as the proxy does.
    const relaying = { ...s.env, PGWARD_AUDIT_ANCHOR_KEY: anchor, PGWARD_RELAY_SECRET: Buffer.alloc(32, 9).toString('base64url'), PGWARD_REGION_PEERS: JSON.stringify({ b: { host: 'relay.b.internal', port: 7432, ca: absentCa } }) };
    const cases: [NodeJS.ProcessEnv, string[], string][] = [
      [s.env, ['serve'], 'pgward: invalid configuration: PGWARD_AUDIT_ANCHOR_KEY is required when PGWARD_STATE_URL is set (an Ed25519 private key, PKCS#8 PEM: openssl genpkey -algorithm ed25519 -out anchor.pem)'],
      [s.env, ['serve', '--role', 'ingest'], 'pgward: invalid configuration: PGWARD_AUDIT_ANCHOR_KEY is required when PGWARD_STATE_URL is set (an Ed25519 private key, PKCS#8 PEM: openssl genpkey -algorithm ed25519 -out anchor.pem)'],
      [{ ...s.env, PGWARD_AUDIT_ANCHOR_KEY: join(s.dataDir, 'absent.pem') }, ['serve', '--role', 'api'], `pgward: invalid configuration: PGWARD_AUDIT_ANCHOR_KEY names a file that cannot be read: ${join(s.dataDir, 'absent.pem')} (ENOENT)`],
      [{ ...s.env, PGWARD_MASTER_KEY: '' }, ['serve', '--role', 'proxy'], 'pgward: invalid configuration: PGWARD_MASTER_KEY is required when PGWARD_STATE_URL is set (a base64 32-byte key: openssl rand -base64 32)'],
      [{ ...s.env, PGWARD_TLS_CERT: join(s.dataDir, 'cert.pem'), PGWARD_TLS_KEY: join(s.dataDir, 'key.pem') }, ['serve', '--role', 'proxy'], `pgward: invalid configuration: PGWARD_TLS_CERT names a file that cannot be read: ${join(s.dataDir, 'cert.pem')} (ENOENT)`],
      [relaying, ['serve', '--role', 'api'], `pgward: invalid configuration: PGWARD_REGION_PEERS names a file that cannot be read: ${absentCa} (ENOENT)`],
    ];
    // Each start is its own process and writes nothing: they run side by side.
    const runs = cases.map(([env, args]) => serve(env, args));
    const codes = await Promise.all(runs.map((run) => run.exited));
    cases.forEach(([, args, line], i) => {
      expect({ args, code: codes[i] }).toEqual({ args, code: 2 });
      expect(errorLines(runs[i]!.stderr())).toEqual([line]);
    });
    expect(await tablesIn(state.url)).toBe(0);
  }, 300_000);

  it('--role proxy without PGWARD_TLS_CERT generates a CA and a certificate it signs into a data directory not made yet, says so, and serves', async () => {
    const s = await setup({ PGWARD_STATE_URL: state.url, PGWARD_MASTER_KEY: Buffer.alloc(32, 7).toString('base64') });
    const run = serve(s.env, ['serve', '--role', 'proxy']);
    await healthy(run, s.httpPort);
    const said = (prefix: string) => JSON.parse(run.output().split('\n').find((line) => line.includes(prefix))!) as { level: number; msg: string };
    expect(said("generated the proxy's CA")).toMatchObject({ level: 30, msg: `generated the proxy's CA certificate ${join(s.dataDir, 'proxy-ca.pem')}: clients verify the proxy with it (GET /v1/proxy/ca.pem)` });
    expect(said("issued the proxy's certificate")).toMatchObject({ level: 30, msg: `issued the proxy's certificate ${join(s.dataDir, 'proxy-cert.pem')} for 127.0.0.1, localhost, ::1` });
    expect(existsSync(join(s.dataDir, 'proxy-key.pem'))).toBe(true);
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);

    // With the anchor key given, the other roles start on the same state database.
    const anchor = join(s.dataDir, 'anchor.pem');
    await writeFile(anchor, generateAnchorKey(), { mode: 0o600 });
    const api = serve({ ...s.env, PGWARD_AUDIT_ANCHOR_KEY: anchor }, ['serve', '--role', 'api']);
    await healthy(api, s.httpPort);
    api.child.kill('SIGTERM');
    expect(await api.exited).toBe(0);
  }, 300_000);
});
