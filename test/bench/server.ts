import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/pg/embedded.js';
import { freePort } from '../support/free-port.js';
import { processes } from '../support/pgward-process.js';

export interface BenchServer {
  /** Which server this is, for the report. */
  readonly label: string;
  /** URL of a throwaway database on it. */
  readonly url: string;
  /** The server's processes whose CPU time serves this database: the embedded cluster's every process, or the shared server's backends of the database. */
  readonly pids: () => Promise<number[]>;
}

async function admin(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The backends connected to `database`, asked through a connection of their server. */
async function backendsOf(serverUrl: string, database: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return (await client.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [database])).rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}

/**
 * The embedded postmaster this process started on `port`, and every process it forked: found once by
 * a scan of /proc, then its children from the kernel's list of them, so that sampling them often
 * costs this process (whose CPU time the bench reports) next to nothing.
 */
function clusterOn(port: number): () => Promise<number[]> {
  let postmaster: number | undefined;
  return async () => {
    postmaster ??= processes().find((p) => p.ppid === process.pid && p.cmdline.includes(` -p ${port} `))?.pid;
    if (postmaster === undefined) return [];
    const children = await readFile(`/proc/${postmaster}/task/${postmaster}/children`, 'utf8').catch(() => '');
    return [postmaster, ...children.split(' ').filter(Boolean).map(Number)];
  };
}

async function withThrowawayDatabase<T>(
  serverUrl: string,
  label: string,
  pids: ((database: string) => () => Promise<number[]>) | undefined,
  work: (server: BenchServer) => Promise<T>,
): Promise<T> {
  const name = `pgward_bench_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, `create database ${name}`);
  try {
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    return await work({ label: `${label}, database ${name}`, url: url.toString(), pids: pids?.(name) ?? (() => backendsOf(serverUrl, name)) });
  } finally {
    await admin(serverUrl, `drop database if exists ${name} with (force)`);
  }
}

/**
 * Runs `work` against a throwaway database on the server of PGWARD_BENCH_PG_URL or PGWARD_TEST_PG_URL,
 * else on an embedded PostgreSQL in a temp dir; drops the database and stops the server afterwards, also on error.
 */
export async function withBenchServer<T>(work: (server: BenchServer) => Promise<T>): Promise<T> {
  const variable = ['PGWARD_BENCH_PG_URL', 'PGWARD_TEST_PG_URL'].find((name) => process.env[name]);
  if (variable) {
    const given = process.env[variable]!;
    return withThrowawayDatabase(given, `${variable} (${new URL(given).host})`, undefined, work);
  }
  const dir = await mkdtemp(join(tmpdir(), 'pgward-bench-'));
  try {
    const embedded = await startEmbeddedPostgres({ dir, port: await freePort() });
    try {
      return await withThrowawayDatabase(embedded.url, `embedded PostgreSQL in ${dir} (127.0.0.1:${embedded.port})`, () => clusterOn(embedded.port), work);
    } finally {
      await embedded.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
