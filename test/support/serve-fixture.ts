/**
 * `pgward serve` as the e2e tests start it: in a temporary data directory, on free ports, with the
 * embedded state database unless an external one is given, provisioned through its CLI and API.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import type { TestDatabase } from './pg.js';
import { pgwardCli, startPgward, type PgwardProcess } from './pgward-process.js';

export interface ServeOptions {
  /** Names the temporary data directory. */
  readonly label: string;
  /** An external state database (PGWARD_STATE_URL); without it serve runs the embedded one, on a free port. */
  readonly stateUrl?: string;
  /** More environment (keys, log level: 'warn' unless given), made once the data directory exists. */
  readonly env?: (dataDir: string) => NodeJS.ProcessEnv | Promise<NodeJS.ProcessEnv>;
}

export interface ServedPgward {
  readonly server: PgwardProcess;
  /** The environment serve runs with: what its CLI commands need too. */
  readonly env: NodeJS.ProcessEnv;
  readonly proxyPort: number;
  /** An organization made with `pgward admin create-org`, and its API key's calls. */
  createOrg(name: string): ServeOrg;
  /** Stops serve and removes its data directory. */
  stop(): Promise<void>;
}

export interface ServeOrg {
  readonly orgId: string;
  readonly apiKey: string;
  /** An API call as the org's key; a body that is not empty is JSON. */
  call(method: string, path: string, payload?: object): Promise<{ status: number; body: Record<string, unknown> }>;
}

/** Starts `pgward serve` and resolves once its /healthz answers 200. */
export async function startServe(options: ServeOptions): Promise<ServedPgward> {
  const dataDir = await mkdtemp(join(tmpdir(), `pgward-${options.label}-`));
  // The embedded PostgreSQL runs as its own user, which must reach the data directory.
  await chmod(dataDir, 0o755);
  const httpPort = await freePort();
  const proxyPort = await freePort();
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, ...rest } = process.env;
  const env: NodeJS.ProcessEnv = {
    ...rest,
    ...(options.stateUrl ? { PGWARD_STATE_URL: options.stateUrl } : { PGWARD_EMBEDDED_PG_PORT: String(await freePort()) }),
    PGWARD_DATA_DIR: join(dataDir, '.pgward'),
    PGWARD_HTTP_PORT: String(httpPort),
    PGWARD_PROXY_PORT: String(proxyPort),
    PGWARD_PUBLIC_HOST: '127.0.0.1',
    PGWARD_LOG_LEVEL: 'warn',
    ...(await options.env?.(dataDir)),
  };
  const server = await startPgward(['serve'], env, httpPort).catch(async (error: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  return {
    server,
    env,
    proxyPort,
    createOrg(name) {
      const created = pgwardCli(['admin', 'create-org', '--name', name, '--plan', 'pro'], env);
      if (created.status !== 0) throw new Error(`admin create-org failed: ${created.stderr}`);
      const { org_id: orgId, api_key: apiKey } = JSON.parse(created.stdout) as { org_id: string; api_key: string };
      const call = async (method: string, path: string, payload?: object): Promise<{ status: number; body: Record<string, unknown> }> => {
        const response = await fetch(`${server.httpUrl}${path}`, {
          method,
          headers: { authorization: `Bearer ${apiKey}`, ...(payload ? { 'content-type': 'application/json' } : {}) },
          ...(payload ? { body: JSON.stringify(payload) } : {}),
        });
        const text = await response.text();
        return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
      };
      return { orgId, apiKey, call };
    },
    async stop() {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A test database as a project's `database` on the wire: plain TCP, trust auth when it has no password. */
export function projectDatabase(upstream: TestDatabase): Record<string, unknown> {
  const target = new URL(upstream.url);
  return { host: target.hostname, port: Number(target.port || 5432), name: upstream.name, username: decodeURIComponent(target.username), password: decodeURIComponent(target.password) || 'trust', ssl_mode: 'disable' };
}
