import { spawn } from 'node:child_process';
import pg from 'pg';
import type { BranchCopyMethod } from '../events/branches.js';

/** Where a branch is made: the source database's server, as its registered user, and the two database names. */
export interface BranchTarget {
  /** The source database's connection settings (its name is the source). */
  readonly source: pg.ClientConfig & { readonly database: string; readonly host: string; readonly port: number; readonly user: string };
  readonly sslMode: string;
  readonly branch: string;
}

/** SQLSTATE 55006: the template database has other sessions, so a file-level copy cannot be taken. */
const OBJECT_IN_USE = '55006';

/** A connection to the server for CREATE/DROP DATABASE: not to the source, which a TEMPLATE copy needs free of sessions. */
async function maintenanceClient(target: BranchTarget): Promise<pg.Client> {
  let lastError: unknown;
  for (const database of ['postgres', 'template1']) {
    const client = new pg.Client({ ...target.source, database, application_name: 'pgward-branch' });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return client;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`could not connect to the upstream server's postgres or template1 database: ${(lastError as Error).message}`);
}

/**
 * Makes the branch database: CREATE DATABASE … TEMPLATE source, a fast file-level copy, when the
 * source has no other sessions; else (55006) an empty database filled by pg_dump | psql, which
 * reads the source in one snapshot while its sessions go on. Either way the registered user must
 * be allowed CREATEDB. Returns the method used; throws with the reason otherwise.
 */
export async function copyBranch(target: BranchTarget): Promise<BranchCopyMethod> {
  const client = await maintenanceClient(target);
  const branch = client.escapeIdentifier(target.branch);
  try {
    try {
      await client.query(`create database ${branch} template ${client.escapeIdentifier(target.source.database)}`);
      return 'template';
    } catch (error) {
      if ((error as { code?: string }).code !== OBJECT_IN_USE) throw error;
    }
    await client.query(`create database ${branch}`);
    try {
      await dumpInto(target);
    } catch (error) {
      await client.query(`drop database if exists ${branch} with (force)`).catch(() => undefined);
      throw error;
    }
    return 'logical';
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drops the branch database, ending its sessions (DROP DATABASE … WITH (FORCE), PostgreSQL 13+). Absent is fine. */
export async function dropBranch(target: BranchTarget): Promise<void> {
  const client = await maintenanceClient(target);
  try {
    await client.query(`drop database if exists ${client.escapeIdentifier(target.branch)} with (force)`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A database name as a libpq connection string: a bare name holding `=` would be read as one (its other keywords included). */
function dbnameConninfo(name: string): string {
  return `dbname='${name.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** pg_dump of the source piped into psql on the branch; fails on the first error of either. */
function dumpInto(target: BranchTarget): Promise<void> {
  const { source } = target;
  const env = {
    ...process.env,
    PGHOST: source.host,
    PGPORT: String(source.port),
    PGUSER: source.user,
    PGPASSWORD: typeof source.password === 'string' ? source.password : '',
    PGSSLMODE: target.sslMode,
    PGAPPNAME: 'pgward-branch',
  };
  const dump = spawn('pg_dump', ['--no-owner', '--no-privileges', '--dbname', dbnameConninfo(source.database)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const load = spawn('psql', ['--quiet', '--no-psqlrc', '--set', 'ON_ERROR_STOP=1', '--dbname', dbnameConninfo(target.branch)], { env, stdio: ['pipe', 'ignore', 'pipe'] });
  dump.stdout.pipe(load.stdin);
  // A dump that fails must not leave psql loading half of it as if it were whole.
  dump.on('error', () => load.kill());
  dump.on('close', (code) => code === 0 || load.kill());
  load.stdin.on('error', () => undefined);
  const finished = (child: ReturnType<typeof spawn>, name: string): Promise<void> =>
    new Promise((resolve, reject) => {
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-500)));
      child.on('error', (error) => reject(new Error(`${name} could not run (${error.message}); the logical copy needs the PostgreSQL client programs on PATH`)));
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${name} exited with ${code}: ${stderr.trim()}`))));
    });
  return Promise.all([finished(dump, 'pg_dump'), finished(load, 'psql')]).then(() => undefined);
}
