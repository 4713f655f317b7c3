import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rebuildAndVerify, resetProjection, projectionStatus } from '../../projections/maintenance.js';
import { organizationsProjection } from '../../projections/organizations.js';
import type { Projection } from '../../projections/projection.js';
import { projectsProjection } from '../../projections/projects.js';
import { applyBatch, ensureReadModel, readCheckpoint, runProjection } from '../../projections/runner.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { OrganizationCreated, OrganizationPlanChanged } from '../../src/events/organizations.js';
import { ProjectCreated, ProjectDeleted, ProjectUpdated } from '../../src/events/projects.js';
import { newId } from '../../src/ids.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase;
let store: PostgresEventStore;
let pool: pg.Pool;
let clock = Date.parse('2026-01-01T00:00:00.000Z');

function meta() {
  clock += 1000;
  return { event_id: randomUUID(), correlation_id: 'test', actor: 'test', at: new Date(clock).toISOString() };
}

async function waitFor<T>(probe: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`condition not met in ${timeoutMs} ms; last value ${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function createOrgWithProjects(projects: number): Promise<{ orgId: string; projectIds: string[] }> {
  const orgId = newId('org_');
  await store.append(`org-${orgId}`, [encodeEvent(OrganizationCreated, { org_id: orgId, name: 'Acme', plan: 'free', features: [] }, meta())], 'no_stream');
  const projectIds: string[] = [];
  for (let i = 0; i < projects; i++) {
    const projectId = newId('prj_');
    projectIds.push(projectId);
    await store.append(
      `project-${projectId}`,
      [encodeEvent(ProjectCreated, { project_id: projectId, org_id: orgId, name: `p${i}`, description: '', tags: ['t'], cloud: 'aws', self_hosted: false }, meta())],
      'no_stream',
    );
  }
  return { orgId, projectIds };
}

beforeAll(async () => {
  database = await freshDatabase('projections');
  store = await createPostgresEventStore(database.url);
  pool = createPool(database.url);
});

afterAll(async () => {
  await store.close();
  await pool.end();
  await database.drop();
});

describe('projection runner', () => {
  it('projects organizations and projects with the events’ own time, then follows live appends', async () => {
    const { orgId, projectIds } = await createOrgWithProjects(3);
    const orgs = runProjection({ store, pool, projection: organizationsProjection });
    const projects = runProjection({ store, pool, projection: projectsProjection });
    try {
      await Promise.all([orgs.active, projects.active]);
      await waitFor(() => pool.query('select count(*)::int as n from rm.projects'), (r) => r.rows[0].n === 3);
      const org = await waitFor(
        () => pool.query(`select org_id, name, plan, features, to_char(created_at at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS') as created from rm.organizations`),
        (r) => r.rowCount === 1,
      );
      expect(org.rows).toEqual([{ org_id: orgId, name: 'Acme', plan: 'free', features: [], created: '2026-01-01T00:00:01' }]);

      await store.append(`org-${orgId}`, [encodeEvent(OrganizationPlanChanged, { org_id: orgId, plan: 'scale', features: ['agent-gateway'] }, meta())], 0);
      await store.append(`project-${projectIds[0]}`, [encodeEvent(ProjectUpdated, { project_id: projectIds[0]!, changes: { name: 'renamed', tags: [] } }, meta())], 0);
      await store.append(`project-${projectIds[1]}`, [encodeEvent(ProjectDeleted, { project_id: projectIds[1]! }, meta())], 0);

      const rows = await waitFor(
        () => pool.query('select project_id, name, tags, status from rm.projects order by name'),
        (r) => r.rows.some((row) => row.status === 'deleted') && r.rows.some((row) => row.name === 'renamed'),
      );
      expect(rows.rows).toEqual([
        { project_id: projectIds[1], name: 'p1', tags: ['t'], status: 'deleted' },
        { project_id: projectIds[2], name: 'p2', tags: ['t'], status: 'active' },
        { project_id: projectIds[0], name: 'renamed', tags: [], status: 'active' },
      ]);
      const plan = await waitFor(() => pool.query('select plan, features from rm.organizations where org_id = $1', [orgId]), (r) => r.rows[0]?.plan === 'scale');
      expect(plan.rows[0]).toEqual({ plan: 'scale', features: ['agent-gateway'] });
      expect(await readCheckpoint(pool, 'projects')).toBe((await store.readAll(-1n, { streamPrefixes: ['project-'], limit: 100_000 })).at(-1)!.position);
    } finally {
      await orgs.stop();
      await projects.stop();
    }
  });

  it('lets one runner per projection be active; a second one waits for the lock and takes over', async () => {
    const first = runProjection({ store, pool, projection: projectsProjection });
    await first.active;
    const second = runProjection({ store, pool, projection: projectsProjection });
    const secondActive = await Promise.race([second.active.then(() => 'active'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
    expect(secondActive).toBe('waiting');
    await first.stop();
    await second.active;
    const { projectIds } = await createOrgWithProjects(1);
    await waitFor(() => pool.query('select 1 from rm.projects where project_id = $1', [projectIds[0]]), (r) => r.rowCount === 1);
    await second.stop();
  });

  it('stops at once while its read-model migration waits for the migration lock, and leaves the lock to its holder', async () => {
    const holder = await pool.connect();
    try {
      await holder.query('select pg_advisory_lock(7294061000)');
      const holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      const runner = runProjection({ store, pool, projection: organizationsProjection });
      const activeSoon = await Promise.race([runner.active.then(() => 'active'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 500))]);
      expect(activeSoon).toBe('waiting');
      const stopped = await Promise.race([runner.stop().then(() => 'stopped'), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 5_000))]);
      expect(stopped).toBe('stopped');
      expect((await pool.query(`select count(*)::int as n from pg_locks where locktype = 'advisory' and pid <> $1 and database = (select oid from pg_database where datname = current_database())`, [holderPid])).rows).toEqual([{ n: 0 }]);
      expect((await holder.query(`select count(*)::int as n from pg_locks where locktype = 'advisory' and granted and pid = pg_backend_pid()`)).rows).toEqual([{ n: 1 }]);
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  });

  it('prepares the next batch while one is written, writes one batch at a time in order, and resumes from the checkpoint after a failed write', async () => {
    const stream = `pipe-${randomUUID()}`;
    const events = Array.from({ length: 12 }, (_, i) => encodeEvent(ProjectCreated, { project_id: newId('prj_'), org_id: newId('org_'), name: `p${i}`, description: '', tags: [], cloud: 'aws', self_hosted: false }, meta()));
    await store.append(stream, events, 'no_stream');
    const log: string[] = [];
    let writing = 0;
    let mostWriting = 0;
    let failures = 1;
    const pipelined: Projection = {
      name: 'pipelined',
      streamPrefixes: ['pipe-'],
      tables: [{ name: 'pipelined', columns: 'revision integer primary key', orderBy: 'revision' }],
      apply: async (tx, batch) => (await pipelined.prepare!(batch))(tx),
      async prepare(batch) {
        log.push('prepare');
        return async (tx) => {
          mostWriting = Math.max(mostWriting, (writing += 1));
          try {
            await tx.query('select pg_sleep(0.02)');
            await tx.query(`insert into ${tx.table('pipelined')} select unnest($1::int[])`, [batch.map((e) => e.revision)]);
            if (batch.some((e) => e.revision === 4) && failures-- > 0) throw new Error('boom');
          } finally {
            writing -= 1;
          }
        };
      },
    };
    const errors: unknown[] = [];
    const runner = runProjection({
      store,
      pool,
      projection: pipelined,
      schema: 'rm_pipelined',
      batchSize: 2,
      hooks: { onBatch: () => log.push('committed'), onError: (_name, error) => errors.push(error) },
    });
    try {
      await runner.active;
      const rows = await waitFor(() => pool.query<{ revision: number }>('select revision from rm_pipelined.pipelined order by revision'), (r) => r.rowCount === 12);
      expect(rows.rows.map((r) => r.revision)).toEqual(events.map((_, i) => i));
    } finally {
      await runner.stop();
    }
    expect(errors).toEqual([new Error('boom')]);
    expect(mostWriting).toBe(1);
    // The second batch was prepared before the first committed.
    expect(log.slice(0, 2)).toEqual(['prepare', 'prepare']);
  });

  it('writes nothing of a batch, checkpoint included, when applying it fails', async () => {
    const failing: Projection = {
      ...projectsProjection,
      name: 'projects_failing',
      async apply(tx, events) {
        await projectsProjection.apply(tx, events);
        throw new Error('boom after writing rows');
      },
    };
    await ensureReadModel(pool, failing, 'rm_failing');
    const events = await store.readAll(-1n, { streamPrefixes: ['project-'], limit: 5 });
    await expect(applyBatch(pool, failing, 'rm_failing', events, -1n, events.at(-1)!.position)).rejects.toThrow('boom');
    expect((await pool.query('select count(*)::int as n from rm_failing.projects')).rows[0].n).toBe(0);
    expect(await readCheckpoint(pool, 'projects_failing')).toBe(-1n);
  });

  it('refuses a batch whose checkpoint moved underneath it (fencing)', async () => {
    const events = await store.readAll(-1n, { streamPrefixes: ['project-'], limit: 2 });
    const fenced: Projection = { ...projectsProjection, name: 'projects_fenced' };
    await ensureReadModel(pool, fenced, 'rm_fenced');
    await applyBatch(pool, fenced, 'rm_fenced', events.slice(0, 1), -1n, events[0]!.position);
    await expect(applyBatch(pool, fenced, 'rm_fenced', events.slice(0, 1), -1n, events[0]!.position)).rejects.toThrow('checkpoint moved');
    await expect(applyBatch(pool, fenced, 'rm_fenced', events.slice(1), 12345n, events[1]!.position)).rejects.toThrow('checkpoint moved');
    expect(await readCheckpoint(pool, 'projects_fenced')).toBe(events[0]!.position);
  });
});

describe('rebuild --verify', () => {
  it('reproduces the live read models byte for byte while the runner keeps going, and names a tampered table', async () => {
    const runners = [organizationsProjection, projectsProjection].map((projection) => runProjection({ store, pool, projection }));
    try {
      await Promise.all(runners.map((r) => r.active));
      await createOrgWithProjects(20);
      const head = await store.headPosition();
      await waitFor(() => projectionStatus(store, pool, [organizationsProjection, projectsProjection]), (s) => s.every((p) => p.caught_up));
      const concurrent = createOrgWithProjects(10);
      const results = await Promise.all([rebuildAndVerify(store, pool, organizationsProjection), rebuildAndVerify(store, pool, projectsProjection)]);
      await concurrent;
      for (const result of results) {
        expect(result.identical).toBe(true);
        expect(BigInt(result.position) >= 0n).toBe(true);
      }
      expect(head >= 0n).toBe(true);
      expect(results[1]!.live.projects!.rows).toBeGreaterThanOrEqual(24);

      await waitFor(() => projectionStatus(store, pool, [projectsProjection]), (s) => s[0]!.caught_up);
      await pool.query(`update rm.projects set name = 'tampered' where project_id = (select min(project_id) from rm.projects)`);
      const tampered = await rebuildAndVerify(store, pool, projectsProjection);
      expect(tampered.identical).toBe(false);
      expect(tampered.live.projects!.rows).toBe(tampered.rebuilt.projects!.rows);
      expect(tampered.live.projects!.md5).not.toBe(tampered.rebuilt.projects!.md5);
    } finally {
      await Promise.all(runners.map((r) => r.stop()));
    }
  });

  it('reset empties the live model and the running projector replays it from position 0', async () => {
    const runner = runProjection({ store, pool, projection: projectsProjection });
    try {
      await runner.active;
      const before = (await pool.query('select count(*)::int as n from rm.projects')).rows[0].n as number;
      await pool.query(`update rm.projects set name = 'tampered' where name <> 'tampered'`);
      await resetProjection(pool, projectsProjection);
      await waitFor(() => pool.query(`select count(*)::int as n, count(*) filter (where name = 'tampered')::int as t from rm.projects`), (r) => r.rows[0].n === before && r.rows[0].t === 0);
      expect((await rebuildAndVerify(store, pool, projectsProjection)).identical).toBe(true);
    } finally {
      await runner.stop();
    }
  });
});
