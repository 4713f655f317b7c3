/**
 * Audit traffic costs the control plane nothing (issue 17, ARCHITECTURE.md §4 "Categories"): while
 * 10,000 decisions are appended to audit streams, a control-plane projection and the proxy's live
 * views, each on a store of their own (as in a process of their own), make no store request and
 * the projection writes no checkpoint. One control-plane event afterwards shows what they do pay:
 * the read that brings it, the read that finds them caught up, and one checkpoint.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { organizationsProjection } from '../../projections/organizations.js';
import { projectsProjection } from '../../projections/projects.js';
import { policiesProjection } from '../../projections/policies.js';
import { readCheckpoint, runProjection } from '../../projections/runner.js';
import { proxyViews } from '../../proxy/views/proxy-views.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { OrganizationCreated, OrganizationPlanChanged } from '../../src/events/organizations.js';
import { ProjectCreated, ProjectUpdated } from '../../src/events/projects.js';
import { newId } from '../../src/ids.js';
import { createPool } from '../../src/pg/pool.js';
import type { EventStore } from '../../src/store/port.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { countingStore } from '../support/counting-store.js';
import { decision } from '../support/decisions.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

const DECISIONS = 10_000;
const PER_APPEND = 50;
/** Long enough for the notifications of the last appends to reach a listener. */
const SETTLE_MS = 500;

let database: TestDatabase;
let writer: PostgresEventStore;
let pool: pg.Pool;
const readers: EventStore[] = [];
let clock = Date.parse('2026-01-01T00:00:00.000Z');
let orgId: string;
const projectIds = [newId('prj_'), newId('prj_'), newId('prj_'), newId('prj_')];

const meta = () => ({ event_id: randomUUID(), correlation_id: 'test', actor: 'test', at: new Date((clock += 1000)).toISOString() });
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

async function waitFor(probe: () => Promise<boolean> | boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function counted(): Promise<ReturnType<typeof countingStore>> {
  const store = await createPostgresEventStore(database.url);
  readers.push(store);
  return countingStore(store);
}

/** 10,000 decisions in appends of 50, four audit streams written at once, as ingest writes them under load. */
async function appendDecisions(): Promise<void> {
  const count = async () => (await pool.query<{ n: number }>(`select count(*)::int as n from pgward.events where stream like 'audit-%'`)).rows[0]!.n;
  const before = await count();
  const [sample] = fc.sample(decision, { numRuns: 1, seed: 17 });
  await Promise.all(
    projectIds.map(async (projectId) => {
      for (let appended = 0; appended < DECISIONS / projectIds.length; appended += PER_APPEND) {
        const events = Array.from({ length: PER_APPEND }, () => encodeEvent(StatementDecided, { ...sample!, project_id: projectId }, { ...meta(), actor: 'ingest' }));
        await writer.append(`audit-${projectId}`, events, 'any');
      }
    }),
  );
  expect((await count()) - before).toBe(DECISIONS);
}

beforeAll(async () => {
  database = await freshDatabase('category_wakeups');
  writer = await createPostgresEventStore(database.url, { poolSize: 4 });
  pool = createPool(database.url);
  orgId = newId('org_');
  await writer.append(`org-${orgId}`, [encodeEvent(OrganizationCreated, { org_id: orgId, name: 'Acme', plan: 'free', features: [] }, meta())], 'no_stream');
  for (const [i, projectId] of projectIds.entries()) {
    const created = { project_id: projectId, org_id: orgId, name: `p${i}`, description: '', tags: [], cloud: 'aws' as const, self_hosted: false };
    await writer.append(`project-${projectId}`, [encodeEvent(ProjectCreated, created, meta())], 'no_stream');
  }
});

afterAll(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  await writer?.close();
  await pool?.end();
  await database?.drop();
});

describe('categories: audit appends wake no control-plane reader', () => {
  it('a control-plane projection makes no store read and writes no checkpoint while 10,000 decisions are appended; rebuild --verify still matches', async () => {
    const reader = await counted();
    let checkpointWrites = 0;
    const runner = runProjection({ store: reader.store, pool, projection: projectsProjection, hooks: { onBatch: () => (checkpointWrites += 1) } });
    try {
      await runner.active;
      await waitFor(async () => (await pool.query('select 1 from rm.projects')).rowCount === projectIds.length, 'projects projected');
      await settle();
      const checkpoint = async () => (await pool.query<{ position: bigint; updated_at: Date }>(`select position, updated_at from pgward.projection_checkpoints where name = 'projects'`)).rows[0];
      const before = { reads: reader.reads(), checkpointWrites, checkpoint: await checkpoint() };

      await appendDecisions();
      await settle();
      expect({ reads: reader.reads(), checkpointWrites, checkpoint: await checkpoint() }).toEqual(before);

      const updated = await writer.append(`project-${projectIds[0]}`, [encodeEvent(ProjectUpdated, { project_id: projectIds[0]!, changes: { name: 'renamed' } }, meta())], 0);
      await waitFor(async () => (await readCheckpoint(pool, 'projects')) === updated.position, 'the control-plane event applied');
      await settle();
      expect({ reads: reader.reads() - before.reads, checkpointWrites: checkpointWrites - before.checkpointWrites }).toEqual({ reads: 2, checkpointWrites: 1 });
      // The checkpoint went from the projection's last event to its next one, over the decisions between.
      expect(updated.position - before.checkpoint!.position).toBe(BigInt(DECISIONS + 1));
    } finally {
      await runner.stop();
    }
    const verified = await rebuildAndVerify(writer, pool, projectsProjection);
    expect(verified).toMatchObject({ identical: true, position: String(await readCheckpoint(pool, 'projects')) });
  });

  it('the proxy’s live views read no audit event and make no store request while 10,000 decisions are appended', async () => {
    const reader = await counted();
    const views = proxyViews(reader.store);
    await Promise.all(views.all.map((view) => view.start()));
    try {
      expect(views.projects.get(projectIds[1]!)?.name).toBe('p1');
      await settle();
      const before = reader.reads();

      await appendDecisions();
      await settle();
      expect(reader.reads()).toBe(before);

      const changed = new Promise<string>((resolve) => views.organizations.onChange((key) => resolve(key)));
      await writer.append(`org-${orgId}`, [encodeEvent(OrganizationPlanChanged, { org_id: orgId, plan: 'scale', features: [] }, meta())], 0);
      expect(await changed).toBe(orgId);
      await settle();
      expect(reader.reads() - before).toBe(2);
      expect(views.organizations.get(orgId)?.plan).toBe('scale');
    } finally {
      await Promise.all(views.all.map((view) => view.stop()));
    }
  });

  it('a reader of other categories steps over the decisions appended between its events: its read visits none of them', async () => {
    await appendDecisions();
    const from = (await pool.query<{ position: string }>(`select max(position) as position from pgward.events where stream like 'audit-%'`)).rows[0]!.position;
    await appendDecisions();
    const renamed = await writer.append(`project-${projectIds[1]}`, [encodeEvent(ProjectUpdated, { project_id: projectIds[1]!, changes: { name: 'moved' } }, meta())], 'any');
    // Its sessions count their function calls, reported as they end.
    await pool.query(`alter database ${database.name} set track_functions = 'all'`);
    const calls = async () =>
      Object.fromEntries((await pool.query<{ funcname: string; calls: string }>(`select funcname, calls from pg_stat_user_functions where funcname like 'read_events%'`)).rows.map((row) => [row.funcname, Number(row.calls)]));
    const callsBefore = await calls();
    const reader = await createPostgresEventStore(database.url, { poolSize: 1 });
    expect((await reader.readAll(BigInt(from), { streamPrefixes: ['project-'] })).map((event) => event.position)).toEqual([renamed.position]);
    await reader.close();
    await waitFor(async () => ((await calls()).read_events_beside_audit ?? 0) > (callsBefore.read_events_beside_audit ?? 0), 'the reader’s calls reported');
    expect((await calls()).read_events ?? 0).toBe(callsBefore.read_events ?? 0);
    // The read the reader made, planned and run as it runs it, its plan told back as a notice.
    const plans: string[] = [];
    const client = await pool.connect();
    try {
      client.on('notice', (notice) => plans.push(notice.message ?? ''));
      await client.query(`load 'auto_explain'`);
      await client.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_nested_statements = on;
        set auto_explain.log_format = json; set auto_explain.log_level = notice; set client_min_messages = notice`);
      const { rows } = await client.query<{ position: string }>('select position from pgward.read_events_beside_audit($1, $2, 1000)', [from, ['project-%']]);
      expect(rows.map((row) => BigInt(row.position))).toEqual([renamed.position]);
    } finally {
      client.release(true);
    }
    const scan = plans.map((text) => JSON.parse(text.slice(text.indexOf('{'))) as { Plan: { Plans?: { 'Node Type': string; 'Index Name'?: string; 'Actual Rows': number; 'Rows Removed by Filter'?: number }[] } })
      .flatMap((plan) => plan.Plan.Plans ?? [])
      .find((node) => node['Node Type'] === 'Index Scan');
    // 20,000 decisions lie after `from`: the scan visits only the events of other categories there.
    const besideAudit = (await pool.query<{ n: number }>(`select count(*)::int as n from pgward.events where position > $1 and stream not like 'audit-%'`, [from])).rows[0]!.n;
    expect(scan).toMatchObject({ 'Index Name': 'events_beside_audit', 'Actual Rows': 1 });
    expect(scan!['Actual Rows'] + (scan!['Rows Removed by Filter'] ?? 0)).toBe(besideAudit);
  });

  it('the runners of one database share one LISTEN session for resets, since PostgreSQL wakes every listening session on each append', async () => {
    const reader = await counted();
    // Sessions of earlier tests' runners may linger in pg_stat_activity: only sessions these runners opened count.
    const since = (await pool.query<{ at: Date }>('select clock_timestamp() as at')).rows[0]!.at;
    const runners = [organizationsProjection, projectsProjection, policiesProjection].map((projection) => runProjection({ store: reader.store, pool, projection }));
    try {
      await Promise.all(runners.map((runner) => runner.active));
      const resetListeners = async () =>
        (await pool.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_start >= $1 and query ilike '%listen%pgward_projection_reset%'`, [since])).rows[0]!.n;
      // A session being replaced (a reconnect) may show for a moment next to its successor.
      await waitFor(async () => (await resetListeners()) === 1, 'one session listening for resets');
      await settle();
      await waitFor(async () => (await resetListeners()) === 1, 'still one session listening for resets');
    } finally {
      await Promise.all(runners.map((runner) => runner.stop()));
    }
  });
});
