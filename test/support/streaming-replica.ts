import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import pg from 'pg';
import { userInfo } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.js';

const run = promisify(execFile);

/** The machine's newest PostgreSQL binaries in Debian's layout (the server CI starts is that version's), or PGWARD_TEST_PG_BIN. */
function binaries(): string {
  if (process.env.PGWARD_TEST_PG_BIN) return process.env.PGWARD_TEST_PG_BIN;
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(a) - Number(b)) : [];
  return join('/usr/lib/postgresql', versions.at(-1) ?? '15', 'bin');
}

const BIN = binaries();

/** A real streaming replica of the test server: a base backup in a temporary directory, served by a second postmaster on a free port. */
export interface StreamingReplica {
  readonly port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/** Why no replica of `serverUrl` can be made here, or undefined when one can. */
export function replicaUnavailable(serverUrl: string | undefined): string | undefined {
  if (!serverUrl) return 'PGWARD_TEST_PG_URL is not set (the embedded PostgreSQL is not replicated)';
  if (!['127.0.0.1', 'localhost'].includes(new URL(serverUrl).hostname)) return 'PGWARD_TEST_PG_URL is not on this machine';
  if (!existsSync(join(BIN, 'pg_basebackup'))) return `no pg_basebackup in ${BIN} (set PGWARD_TEST_PG_BIN)`;
  return undefined;
}

/** A hot standby needs these at least as high as its primary has them. */
const MATCHED = ['max_connections', 'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction'];

async function primarySettings(serverUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; setting: string }>('select name, setting from pg_settings where name = any($1)', [MATCHED]);
    return rows.map((row) => `${row.name} = ${row.setting}\n`).join('');
  } finally {
    await client.end();
  }
}

/** PostgreSQL refuses to run as root: as root, its tools run as the postgres OS user. */
async function asPostgres(tool: string, args: readonly string[]): Promise<string> {
  const root = userInfo().uid === 0;
  const [file, argv] = root ? ['runuser', ['-u', 'postgres', '--', join(BIN, tool), ...args]] : [join(BIN, tool), [...args]];
  const { stdout } = await run(file, argv, { timeout: 300_000 });
  return stdout;
}

/**
 * pg_basebackup -R (streaming its WAL) of the server at `serverUrl` into a temporary directory,
 * and a postmaster on it at a free port, listening on 127.0.0.1 with trust authentication. The
 * server must allow replication connections from 127.0.0.1 (`host replication all 127.0.0.1/32 trust`).
 */
export async function startStreamingReplica(serverUrl: string): Promise<StreamingReplica> {
  const url = new URL(serverUrl);
  const dir = await mkdtemp(join(tmpdir(), 'pgward-replica-'));
  const data = join(dir, 'data');
  const root = userInfo().uid === 0;
  const owner = root ? (await run('id', ['-u', 'postgres'])).stdout.trim() : undefined;
  const group = root ? (await run('id', ['-g', 'postgres'])).stdout.trim() : undefined;
  if (owner && group) await chown(dir, Number(owner), Number(group));
  const port = await freePort();
  const ctl = (action: 'start' | 'stop'): Promise<string> =>
    action === 'start'
      ? asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, 'start'])
      : asPostgres('pg_ctl', ['-D', data, '-w', '-t', '60', '-m', 'fast', 'stop']);
  try {
    await asPostgres('pg_basebackup', ['-h', url.hostname, '-p', url.port || '5432', '-U', decodeURIComponent(url.username || 'postgres'), '-D', data, '-R', '-X', 'stream', '-c', 'fast']);
    // Debian keeps the server's configuration outside its data directory: the replica gets its own.
    await writeFile(join(data, 'postgresql.conf'), `hot_standby = on\nshared_buffers = 16MB\n${await primarySettings(serverUrl)}`);
    await writeFile(join(data, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n');
    if (owner && group) for (const file of ['postgresql.conf', 'pg_hba.conf']) await chown(join(data, file), Number(owner), Number(group));
    await chmod(data, 0o700);
    await ctl('start');
  } catch (error) {
    const log = await readFile(join(dir, 'log'), 'utf8').catch(() => '');
    await rm(dir, { recursive: true, force: true });
    throw new Error(`could not start a streaming replica: ${(error as Error).message}\n${log}`);
  }
  let running = true;
  return {
    port,
    async stop() {
      if (running) await ctl('stop');
      running = false;
    },
    async start() {
      if (!running) await ctl('start');
      running = true;
    },
    async destroy() {
      if (running) await ctl('stop').catch(() => undefined);
      running = false;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
