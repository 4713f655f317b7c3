import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { createPublicKey } from 'node:crypto';
import type { AuditEntry } from '../../src/audit/entry.js';
import { verifyChain } from '../../src/audit/verify.js';
import type { AuditCheckpointSigned } from '../../src/events/audit.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusRecord, Decision } from '../../proxy/decisions.js';
import { canonicalBytes } from '../../src/crypto/canonical-json.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { pino } from 'pino';
import { spentSince } from '../../queries/budget-usage.js';
import { auditVerify } from '../../src/audit/cli.js';
import { loadConfig } from '../../src/config.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { runOnce } from '../support/wire.js';
import { placed } from '../support/decisions.js';

let gateway: TestGateway;
let agent: AgentSecrets;
let ingest: RunningIngest;

interface Entry {
  seq: number;
  event: string;
  sql: string;
  rows_returned: number;
  gap: { from_seq: number; to_seq: number; count: number | null } | null;
}

async function entries(): Promise<Entry[]> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100` });
  return (response.json() as { entries: Entry[] }).entries;
}

async function verify(): Promise<Record<string, unknown>> {
  return (await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit/verify` })).json() as Record<string, unknown>;
}

async function until<T>(probe: () => Promise<T>, accept: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await probe();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: last value ${JSON.stringify(value).slice(0, 500)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function syntheticDecision(seq: number): BusRecord {
  const decision: Decision & { proxy_id: string; boot_epoch: number; seq: string } = placed({
    event: 'query', project_id: gateway.projectId, credential_id: null, session_id: 'synthetic.1', source: 'wire', region: 'local', client_ip: '', ts: new Date().toISOString(),
    sql: `select ${seq}`, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'bypass', rows_returned: '1', bytes_out: '1',
    latency_us: 1, tables_read: [], tables_written: [], tables_blocked: [], parsed: false, approval_id: null, proxy_id: 'synthetic-proxy', boot_epoch: 1, seq: String(seq),
  });
  return { kind: 'decision', decision };
}

beforeAll(async () => {
  gateway = await startGateway('audit_trail');
  agent = await gateway.register('audited');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

describe('the audit trail', () => {
  it('chains every decision of proxy traffic, verifies, and pinpoints an edited row', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    for (let i = 1; i <= 5; i++) await client.query(`select id from orders where id <= ${i}`);
    await client.end();
    const wrong = new URL(agent.connection_string);
    wrong.password = 'wrong';
    await new pg.Client({ connectionString: wrong.toString() }).connect().catch(() => undefined);

    const trail = await until(entries, (list) => list.length >= 6, 'six entries');
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => trail.length - i));
    expect(trail.filter((e) => e.event === 'query').map((e) => e.rows_returned).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(trail.some((e) => e.event === 'auth_failed')).toBe(true);

    expect(await verify()).toMatchObject({ ok: true, verified_count: trail.length, unchained_count: 0, chain_start_seq: 1, chain_end_seq: trail.length, first_broken_seq: null, failure_reason: null });

    const signed = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/audit/checkpoints` });
    expect(signed.statusCode).toBe(201);
    expect(signed.json()).toMatchObject({ project_id: gateway.projectId, size: String(trail.length), chain_start_seq: '1' });
    const again = await gateway.api.call(gateway.owner.apiKey, { method: 'POST', url: `/v1/projects/${gateway.projectId}/audit/checkpoints` });
    expect(again.json()).toEqual(signed.json());
    expect(await verify()).toMatchObject({ ok: true, verified_count: trail.length });

    const original = (await gateway.api.pool.query<{ sql: string }>(`select sql from rm.audit_entries where project_id = $1 and seq = 3`, [gateway.projectId])).rows[0]!.sql;
    await gateway.api.pool.query(`update rm.audit_entries set sql = 'select 1 -- edited' where project_id = $1 and seq = 3`, [gateway.projectId]);
    expect(await verify()).toMatchObject({ ok: false, failure_reason: 'hash_mismatch', first_broken_seq: 3 });

    const dataDir = await mkdtemp(join(tmpdir(), 'pgward-audit-cli-'));
    try {
      await writeFile(join(dataDir, 'anchor.pem'), gateway.api.anchorPem, { mode: 0o600 });
      const cli = spawnSync(process.execPath, [resolve('bin/pgward.js'), 'audit', 'verify', '--project', gateway.projectId, '--from-events'], {
        env: { ...process.env, PGWARD_STATE_URL: gateway.api.database.url, PGWARD_DATA_DIR: dataDir, PGWARD_AUDIT_ANCHOR_KEY: join(dataDir, 'anchor.pem') },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(cli.status).toBe(1);
      const report = JSON.parse(cli.stdout) as { failure_reason: string; first_broken_seq: number; from_events: { verification: { ok: boolean; verified_count: number }; first_diverging_row_seq: number } };
      expect(report).toMatchObject({ failure_reason: 'hash_mismatch', first_broken_seq: 3 });
      expect(report.from_events).toMatchObject({ verification: { ok: true, verified_count: trail.length }, first_diverging_row_seq: 3 });

      // A page of two entries at a time: the same findings across the pages' edges, and a row the events do not give found after them.
      const config = loadConfig({ PGWARD_STATE_URL: gateway.api.database.url, PGWARD_DATA_DIR: dataDir, PGWARD_AUDIT_ANCHOR_KEY: join(dataDir, 'anchor.pem') });
      const state = { store: gateway.api.store, pool: gateway.api.pool };
      const args = ['--project', gateway.projectId, '--from-events'];
      const paged = await auditVerify(config, args, state, 2);
      expect(paged.ok).toBe(false);
      expect(paged.report).toEqual({ ...report, verified_at: paged.report.verified_at, from_events: { ...report.from_events, verification: { ...report.from_events.verification, verified_at: paged.report.from_events!.verification.verified_at } } });
      await gateway.api.pool.query(`update rm.audit_entries set sql = $2 where project_id = $1 and seq = 3`, [gateway.projectId, original]);
      expect((await auditVerify(config, args, state, 2)).ok).toBe(true);
      // A row past the last entry (a copy of it one seq on): the events give no entry for it.
      const columns = (await gateway.api.pool.query<{ name: string }>(`select column_name as name from information_schema.columns where table_schema = 'rm' and table_name = 'audit_entries'`)).rows.map(({ name }) => name);
      const copied = columns.map((name) => (name === 'seq' ? 'seq + 1' : name === 'id' ? `id || '-extra'` : name));
      await gateway.api.pool.query(`insert into rm.audit_entries (${columns.join(', ')}) select ${copied.join(', ')} from rm.audit_entries where project_id = $1 and seq = $2`, [gateway.projectId, trail.length]);
      const extra = await auditVerify(config, args, state, 2);
      expect(extra.ok).toBe(false);
      expect(extra.report.from_events).toMatchObject({ verification: { ok: true, verified_count: trail.length }, first_diverging_row_seq: trail.length + 1, entries: trail.length });
      await gateway.api.pool.query(`delete from rm.audit_entries where project_id = $1 and seq = $2`, [gateway.projectId, trail.length + 1]);
      await gateway.api.pool.query(`update rm.audit_entries set sql = 'select 1 -- edited' where project_id = $1 and seq = 3`, [gateway.projectId]);

      const exported = spawnSync(process.execPath, [resolve('bin/pgward.js'), 'audit', 'export', '--project', gateway.projectId], {
        env: { ...process.env, PGWARD_STATE_URL: gateway.api.database.url, PGWARD_DATA_DIR: dataDir, PGWARD_AUDIT_ANCHOR_KEY: join(dataDir, 'anchor.pem') },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(exported.status).toBe(0);
      const lines = exported.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string } & Record<string, unknown>);
      expect(lines.map((line) => line.type)).toEqual(['anchor', ...trail.map(() => 'entry'), 'checkpoint']);
      const { type: _type, ...exportedEntry } = lines[3]!;
      const offline = verifyChain({
        projectId: gateway.projectId,
        entries: lines.filter((l) => l.type === 'entry').map(({ type: _t, ...entry }) => entry as unknown as AuditEntry),
        checkpoints: lines.filter((l) => l.type === 'checkpoint').map(({ type: _t, ...c }) => c as unknown as AuditCheckpointSigned),
        hmacKeys: new Map(),
        anchorPublicKey: createPublicKey(String(lines[0]!.public_key)),
        verifiedAt: new Date().toISOString(),
      });
      expect(offline).toMatchObject({ ok: false, failure_reason: 'hash_mismatch', first_broken_seq: 3 });
      expect(exportedEntry.seq).toBe(3);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('appends a redelivered decision once, and records a hole no gap marker explains', async () => {
    const before = (await entries()).length;
    await gateway.bus.publish({ id: 'synthetic-1', data: canonicalBytes(syntheticDecision(1)) });
    await gateway.bus.publish({ id: 'synthetic-1-again', data: canonicalBytes(syntheticDecision(1)) });
    await gateway.bus.publish({ id: 'synthetic-5', data: canonicalBytes(syntheticDecision(5)) });
    const withHole = await until(
      async () => {
        await ingest.sweepHoles();
        return entries();
      },
      (list) => list.some((e) => e.event === 'gap_marker'),
      'gap marker',
    );
    expect(withHole.filter((e) => e.sql === 'select 1')).toHaveLength(1);
    expect(withHole.find((e) => e.event === 'gap_marker')?.gap).toEqual({ from_seq: 2, to_seq: 4, count: 3 });
    expect(withHole.length).toBe(before + 3);
  });

  it('keeps counting a daily statement budget across a proxy restart, from the audit trail', async () => {
    const policy = await gateway.api.call(gateway.owner.apiKey, {
      method: 'POST',
      url: `/v1/projects/${gateway.projectId}/policies`,
      payload: { name: 'three a day', read_only: true, allowed_tables: ['public.orders'], queries_per_day: 3 },
    });
    const registered = await gateway.api.call(gateway.owner.apiKey, {
      method: 'POST',
      url: `/v1/projects/${gateway.projectId}/agents`,
      payload: { name: 'budgeted', policy_profile_id: (policy.json() as { id: string }).id },
    });
    const budgeted = registered.json() as AgentSecrets;
    expect((await runOnce(budgeted.connection_string, 'select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    expect((await runOnce(budgeted.connection_string, 'select 2 as n')).rows).toEqual([{ n: 2 }]);
    const now = Date.now();
    const day = new Date(now - (now % 86_400_000));
    const month = new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), 1));
    await until(() => spentSince(gateway.api.pool, { kind: 'credential', id: budgeted.credential.id }, day, month), (spent) => spent.queries === 2, 'the trail to count two statements');

    await gateway.restartProxy();
    const client = new pg.Client({ connectionString: budgeted.connection_string });
    await client.connect();
    try {
      expect((await client.query('select 3 as n')).rows).toEqual([{ n: 3 }]);
      const refused = await client.query('select 4 as n').then(
        () => undefined,
        (error: { code?: string; message: string }) => error,
      );
      expect(refused?.code).toBe('53400');
      expect(refused?.message).toContain('daily budget of 3 statements');
      expect(refused?.message).toContain(`resets at ${new Date(day.getTime() + 86_400_000).toISOString()}`);
    } finally {
      await client.end();
    }
    const refusals = await until(entries, (list) => list.some((e) => e.event === 'budget_exhausted'), 'the refusal in the trail');
    expect(refusals.filter((e) => e.event === 'budget_exhausted')).toEqual([expect.objectContaining({ sql: 'select 4 as n' })]);
  });
});
