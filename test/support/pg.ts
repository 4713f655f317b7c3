import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Runs `work` on a client connected to `serverUrl`, then ends it. */
/** The rows `sql` returns, read as the upstream's administrator. */
export function adminRows<T>(serverUrl: string, sql: string): Promise<T[]> {
  return admin(serverUrl, async (client) => (await client.query(sql)).rows as T[]);
}

export async function admin<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A new, empty database on the test server (or on `serverUrl`), so test files never see each other's rows; or a copy of `template`. */
export async function freshDatabase(label: string, serverUrl: string = inject('pgUrl'), template?: string): Promise<TestDatabase> {
  const name = `pgward_t_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  await admin(serverUrl, (client) => client.query(`create database ${pg.escapeIdentifier(name)}${template ? ` template ${pg.escapeIdentifier(template)}` : ''}`));
  return {
    name,
    url: withDatabase(serverUrl, name),
    drop: () => admin(serverUrl, (client) => client.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`)).then(() => undefined),
  };
}

/**
 * How pgward logs in to a test database as an upstream: its URL's host, port, database, user and
 * password (the embedded server's, when PGWARD_TEST_PG_URL is not set), or a placeholder password
 * under the machine's trust authentication.
 */
export function upstreamLogin(database: TestDatabase): { host: string; port: number; database: string; user: string; password: string } {
  const url = new URL(database.url);
  return { host: url.hostname, port: Number(url.port || 5432), database: database.name, user: decodeURIComponent(url.username) || 'postgres', password: decodeURIComponent(url.password) || 'unused-under-trust' };
}
