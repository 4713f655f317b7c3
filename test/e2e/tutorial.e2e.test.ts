/**
 * docs/tutorial.md as a script: every `sh` block, in order, in one bash, against `npm start` on a
 * fresh data directory and free ports; then what the blocks print is checked.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { missingTool } from '../support/tools.js';

const PYTHON = '/usr/bin/python3';
const missing = missingTool('psql') ?? missingTool('jq') ?? missingTool('curl') ?? missingTool(PYTHON, ['-c', 'import psycopg2']);

function shellBlocks(markdown: string): string {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]).join('\n');
}

function runBash(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('docs/tutorial.md', () => {
  it.skipIf(missing)(`runs as a script and prints what it documents${missing ? ` (skipped: ${missing})` : ''}`, async () => {
    const script = shellBlocks(readFileSync('docs/tutorial.md', 'utf8'));
    expect(script).toContain('npm start');
    const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_DEMO: _d, PGWARD_DATA_DIR: _dd, ...rest } = process.env;
    const env = {
      ...rest,
      PYTHON,
      PGWARD_HTTP_PORT: String(await freePort()),
      PGWARD_PROXY_PORT: String(await freePort()),
      PGWARD_EMBEDDED_PG_PORT: String(await freePort()),
    };
    const { code, stdout, stderr } = await runBash(script, env);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    const expected = [
      '{"table":"public.secrets","treatment":"hidden","columns":["id: hidden","customer_id: hidden","card_token: hidden","api_key: hidden"]}',
      '{"status":503,"code":"DEMO_TIER_NOT_PURCHASABLE"}',
      '  1 | Alan McCarthy | a***',
      '50',
      'refused, as the policy says',
      'refused: the policy is read-only',
      "[('BR', 5), ('DE', 5), ('FR', 5), ('GB', 5), ('IN', 5), ('JP', 5), ('NL', 5), ('US', 5)]",
      'customers whose real address starts with ada.: 0',
      'briefing query validate_sql list_tables describe_table schema_catalog explain my_permissions search_docs read_doc approval_status',
      '10',
      'live session sees 200 customers',
      '{"status":"paused","detail":"the demo is paused by its operator: tutorial"}',
      '{"status":503,"code":"DEMO_PAUSED"}',
      '{"status":"available"}',
    ];
    const lines = stdout.split('\n');
    for (const line of expected) expect(lines, `${line} in:\n${stdout}`).toContain(line);
    expect(stdout).toMatch(/^the session was closed: /m);
    expect(stdout).toMatch(/^\{"id":"agt_[a-z0-9]+","status":"disabled"\}$/m);
    expect(stdout).toMatch(/^psql: error: .*FATAL: {2}password authentication failed/m);
    expect(stdout).toMatch(/^[0-9a-f]{64}$/m);
    expect(stdout).toMatch(/^\{"ok":true,"verified_count":\d+,"from_events":true\}$/m);
    expect(stdout).not.toMatch(/@example\.com/);
  }, 180_000);
});
