import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectionsFor } from '../../projections/index.js';

const projections = projectionsFor({ auditKeys: { keys: new Map() } });
import { freePort } from '../support/free-port.js';
import { processes, workerPid } from '../support/pgward-process.js';

const bin = resolve('bin/pgward.js');
let dataDir: string;
let env: NodeJS.ProcessEnv;
let httpPort: number;
let pgPort: number;
let proxyPort: number;

function cli(args: string[], extraEnv: NodeJS.ProcessEnv = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], { env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface Server {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function startServer(): Promise<Server> {
  let output = '';
  const child = spawn(process.execPath, [bin, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  // A first start makes a cluster and compiles the sources in three processes (tsx): past 30 s on a loaded machine.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then((r) => r.status, () => 0);
    if (status === 200) return { child, output: () => output, exited };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGINT');
      await exited;
      throw new Error(`pgward serve did not become healthy:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What logging in to the proxy with a made-up user gives, over TLS verified against `ca` for the host name localhost. */
async function proxyLoginError(ca: string): Promise<string | undefined> {
  const client = new pg.Client({ host: 'localhost', port: proxyPort, user: 'nobody', password: 'wrong', database: 'none', ssl: { ca } });
  const error = await client.connect().then(() => undefined, (e: { code?: string; message: string }) => e);
  await client.end().catch(() => undefined);
  return error?.code ?? error?.message;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('connect', () => (socket.destroy(), done(true)));
    socket.on('error', () => done(false));
  });
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'pgward-serve-'));
  await chmod(dataDir, 0o755);
  httpPort = await freePort();
  pgPort = await freePort();
  proxyPort = await freePort();
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, ...rest } = process.env;
  env = { ...rest, PGWARD_DATA_DIR: join(dataDir, '.pgward'), PGWARD_HTTP_PORT: String(httpPort), PGWARD_PROXY_PORT: String(proxyPort), PGWARD_EMBEDDED_PG_PORT: String(pgPort), PGWARD_LOG_LEVEL: 'warn', PGWARD_DEMO: 'off' };
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe('pgward serve, the embedded default', () => {
  it('starts an embedded PostgreSQL, answers /healthz and /metrics, serves the CLI, stops cleanly and reuses its data on restart', async () => {
    const first = await startServer();
    const health = await (await fetch(`http://127.0.0.1:${httpPort}/healthz`)).json();
    expect(health).toEqual({
      status: 'ok',
      parts: {
        read_models: { ok: true, detail: 'embedded (started)' },
        event_store: { ok: true, detail: 'postgres' },
        bus: { ok: true, detail: 'memory' },
        proxy: { ok: true, detail: `listening on 127.0.0.1:${proxyPort}` },
        projector: { ok: true, detail: `${projections.length} projections running` },
      },
    });
    expect(first.output()).toContain(`pgward listening: HTTP http://127.0.0.1:${httpPort}`);
    expect(existsSync(join(dataDir, '.pgward', 'pg', 'PG_VERSION'))).toBe(true);

    const created = cli(['admin', 'create-org', '--name', 'Acme', '--plan', 'pro']);
    expect(created.status).toBe(0);
    const org = JSON.parse(created.stdout) as { org_id: string; api_key: string };
    expect(org.org_id).toMatch(/^org_[a-z0-9]{26}$/);
    expect(org.api_key).toMatch(/^pgw_org_[A-Za-z0-9_-]{43}$/);

    const metrics = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    expect(metrics).toMatch(/pgward_projection_lag_events\{projection="organizations",role="ingest\+projector"\} \d+/);
    for (const role of ['proxy', 'ingest+projector', 'api']) expect(metrics).toMatch(new RegExp(`process_cpu_seconds_total\\{role="${role.replace('+', '\\+')}"\\} [\\d.]+`));
    expect(metrics).toMatch(/pgward_worker_restarts_total\{worker="pipeline",role="supervisor"\} 0/);
    // The pipeline worker collects its garbage on its own thread; the proxy (this process) and the API worker as Node does by default.
    const commandOf = (pid: number | undefined) => processes().find((p) => p.pid === pid)?.cmdline.split(' ').filter((arg) => arg.startsWith('--single'));
    expect([commandOf(first.child.pid), commandOf(workerPid(first.child.pid!, 'pipeline')), commandOf(workerPid(first.child.pid!, 'api'))]).toEqual([[], ['--single-threaded-gc'], []]);

    // The API worker serves the CA of the certificate the proxy made: a verify-full handshake gets as far as the login.
    const ca = await (await fetch(`http://127.0.0.1:${httpPort}/v1/proxy/ca.pem`)).text();
    expect(await proxyLoginError(ca)).toBe('28P01');

    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    expect(await portOpen(pgPort)).toBe(false);
    expect(await portOpen(httpPort)).toBe(false);

    const second = await startServer();
    try {
      const verify = cli(['projections', 'rebuild', '--verify']);
      expect(verify.status).toBe(0);
      const results = JSON.parse(verify.stdout) as { name: string; identical: boolean; live: Record<string, { rows: number }> }[];
      expect(results.map((r) => [r.name, r.identical])).toEqual(projections.map((p) => [p.name, true]));
      expect(results[0]!.live.organizations!.rows).toBe(1);
      expect(await (await fetch(`http://127.0.0.1:${httpPort}/v1/proxy/ca.pem`)).text()).toBe(ca);
    } finally {
      second.child.kill('SIGINT');
      expect(await second.exited).toBe(0);
    }
  }, 300_000);

  it('refuses a bad variable with one line naming it and exit code 2', () => {
    const result = cli(['serve'], { PGWARD_HTTP_PORT: 'abc' });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual(['pgward: invalid configuration: PGWARD_HTTP_PORT expected a port number']);
  });
});
