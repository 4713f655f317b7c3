/**
 * The README's quickstart as a new user runs it: `npm start` on a fresh data directory, then the
 * psql command it prints, then the MCP configuration it prints with the official SDK client; and
 * a second start that finds the demo and provisions nothing more.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { stateUrlOf } from '../support/pgward-process.js';
import { missingTool } from '../support/tools.js';

const noPsql = missingTool('psql');
/** A start of `npm start` (embedded PostgreSQL, two workers) took up to 40 s on a loaded 2-core CI machine; the test makes two. */
const BANNER_TIMEOUT_MS = 60_000;

let dataDir: string;
let env: NodeJS.ProcessEnv;

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<unknown>;
}

/** `npm start` in its own process group, once it printed the demo's lines. */
async function npmStart(): Promise<Started> {
  let output = '';
  const child = spawn('npm', ['start'], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const deadline = Date.now() + BANNER_TIMEOUT_MS;
  while (!output.includes('PGWARD_DEMO=off turns the demo off.')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop({ child, output: () => output, exited });
      throw new Error(`npm start printed no demo:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { child, output: () => output, exited };
}

/** Ctrl-C to the whole process group, as a terminal sends it. */
async function stop(started: Started): Promise<void> {
  if (started.child.exitCode !== null || started.child.signalCode !== null) return;
  process.kill(-started.child.pid!, 'SIGINT');
  const timer = setTimeout(() => process.kill(-started.child.pid!, 'SIGKILL'), 20_000);
  await started.exited;
  clearTimeout(timer);
}

function printed(output: string, label: string): string {
  const line = output.split('\n').find((l) => l.startsWith(`  ${label}: `));
  if (!line) throw new Error(`no "${label}" line in:\n${output}`);
  return line.slice(label.length + 4);
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'pgward-quickstart-'));
  await chmod(dataDir, 0o755);
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_DEMO: _d, ...rest } = process.env;
  env = {
    ...rest,
    PGWARD_DATA_DIR: join(dataDir, '.pgward'),
    PGWARD_HTTP_PORT: String(await freePort()),
    PGWARD_PROXY_PORT: String(await freePort()),
    PGWARD_EMBEDDED_PG_PORT: String(await freePort()),
  };
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe('the quickstart: npm start on a fresh data directory', () => {
  it.skipIf(noPsql)(`prints a psql command that returns masked rows and an MCP configuration the SDK client queries with; a restart provisions nothing more${noPsql ? ` (skipped: ${noPsql})` : ''}`, async () => {
    const first = await npmStart();
    try {
      const output = first.output();
      // The credential is shown on stdout for the user to copy; the structured log never carries it.
      expect(output.split('\n').filter((line) => line.startsWith('{') && line.includes('pgw_agt_'))).toEqual([]);

      const psql = printed(output, 'psql');
      const ran = spawnSync('sh', ['-c', psql.replace(/^psql /, 'psql -A -F "|" ')], { encoding: 'utf8', timeout: 20_000 });
      expect(ran.stderr).toBe('');
      expect(ran.stdout).toBe(
        ['id|name|email', '1|Alan McCarthy|a***', '2|Grace Lamarr|g***', '3|Edsger Turing|e***', '4|Barbara Hamilton|b***', '5|Donald Torvalds|d***', '(5 rows)', ''].join('\n'),
      );

      const config = JSON.parse(printed(output, 'MCP client configuration')) as { mcpServers: Record<string, { type: string; url: string; headers: Record<string, string> }> };
      const server = config.mcpServers['pgward-demo']!;
      expect(server.type).toBe('http');
      const client = new Client({ name: 'quickstart', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } }));
      try {
        const result = (await client.callTool({ name: 'query', arguments: { sql: 'select id, email from customers order by id limit 2' } })) as CallToolResult;
        expect(result.isError ?? false).toBe(false);
        const text = result.content.map((item) => (item.type === 'text' ? item.text : '')).join('\n');
        expect(text).toContain('a***');
        expect(text).toContain('g***');
        expect(text).not.toContain('@example.com');
      } finally {
        await client.close();
      }
    } finally {
      await stop(first);
    }

    const second = await npmStart();
    try {
      expect(second.output()).toContain('"msg":"demo already provisioned"');
      const state = new pg.Client({ connectionString: await stateUrlOf(env) });
      await state.connect();
      try {
        const { rows } = await state.query<{ orgs: number; projects: number; provisioned: number }>(
          `select (select count(*)::int from rm.organizations) as orgs, (select count(*)::int from rm.projects) as projects,
                  (select count(*)::int from pgward.events where type = 'DemoProvisioned.v1') as provisioned`,
        );
        expect(rows[0]).toEqual({ orgs: 1, projects: 1, provisioned: 1 });
      } finally {
        await state.end();
      }
    } finally {
      await stop(second);
    }
  }, 2 * BANNER_TIMEOUT_MS + 60_000);
});
