/**
 * pgward_projection_lag_events is what a projection has still to apply: the events of its own
 * streams beyond its checkpoint (issue 18 item 6). It used to be the store's head minus the
 * checkpoint, so a control-plane projection that audit traffic never wakes (its categories did
 * not move) showed the whole audit backlog as lag. Read from the /metrics of a real projector
 * (`serve` with the projector role) and from `pgward projections list`, which must agree.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditStream } from '../../projections/audit.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { loadConfig } from '../../src/config.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { OrganizationCreated, OrganizationPlanChanged } from '../../src/events/organizations.js';
import { newId } from '../../src/ids.js';
import { serve, type Running } from '../../src/main.js';
import { createPool } from '../../src/pg/pool.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { decision } from '../support/decisions.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { metricValue, pgwardCli } from '../support/pgward-process.js';

const DECISIONS = 10_000;
const PER_APPEND = 100;
const PROJECTS = 4;

let database: TestDatabase;
let writer: PostgresEventStore;
let pool: pg.Pool;
let projector: Running;
const orgId = newId('org_');
const meta = () => ({ event_id: randomUUID(), correlation_id: 'test', actor: 'test', at: new Date().toISOString() });

const lag = async (projection: string): Promise<number | undefined> => metricValue(await projector.metrics.metrics(), 'pgward_projection_lag_events', { projection });

async function waitFor<T>(what: string, probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (last: ${JSON.stringify(value)})`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** `pgward projections list` against the same state database, by name. */
function projectionsList(): Record<string, { lag: number; caught_up: boolean; behind_head: string }> {
  const listed = pgwardCli(['projections', 'list'], { ...process.env, PGWARD_STATE_URL: database.url, PGWARD_LOG_LEVEL: 'silent', EVENTSTORE_URL: '' });
  expect(listed.stderr).toBe('');
  expect(listed.status).toBe(0);
  return Object.fromEntries((JSON.parse(listed.stdout) as { name: string; lag: number; caught_up: boolean; behind_head: string }[]).map(({ name, ...rest }) => [name, rest]));
}

/** Decisions as ingest appends them, to several projects' audit streams at once. */
async function appendDecisions(count: number): Promise<void> {
  const [sample] = fc.sample(decision, { numRuns: 1, seed: 18 });
  const projectIds = Array.from({ length: PROJECTS }, () => newId('prj_'));
  await Promise.all(
    projectIds.map(async (projectId) => {
      for (let appended = 0; appended < count / PROJECTS; appended += PER_APPEND) {
        const events = Array.from({ length: PER_APPEND }, () => encodeEvent(StatementDecided, { ...sample!, project_id: projectId, rows_returned: '3', bytes_out: '120' }, { ...meta(), actor: 'ingest' }));
        await writer.append(auditStream(projectId), events, 'any');
      }
    }),
  );
}

beforeAll(async () => {
  database = await freshDatabase('projection_lag');
  writer = await createPostgresEventStore(database.url, { poolSize: PROJECTS });
  pool = createPool(database.url);
  await writer.append(`org-${orgId}`, [encodeEvent(OrganizationCreated, { org_id: orgId, name: 'Acme', plan: 'free', features: [] }, meta())], 'no_stream');
  const config = loadConfig({ PGWARD_STATE_URL: database.url });
  projector = await serve(config, pino({ level: 'silent' }), new Set(['projector']), {
    state: { url: database.url, source: 'PGWARD_STATE_URL', close: async () => undefined },
    bus: createMemoryBus(),
    http: false,
  });
});

afterAll(async () => {
  await projector?.stop();
  await writer?.close();
  await pool?.end();
  await database?.drop();
});

describe('pgward_projection_lag_events', () => {
  it('is 0 for a caught-up control-plane projection after 10,000 audit appends, though its checkpoint is 10,000 positions behind the head', async () => {
    await waitFor('organizations caught up', () => lag('organizations'), (value) => value === 0);
    await appendDecisions(DECISIONS);
    await waitFor('the audit projection caught up', () => lag('audit_entries'), (value) => value === 0);

    expect(await lag('organizations')).toBe(0);
    const listed = projectionsList();
    expect(listed.organizations).toMatchObject({ lag: 0, caught_up: true });
    expect(Number(listed.organizations!.behind_head)).toBeGreaterThanOrEqual(DECISIONS);
    // Every projection: the metric and the list say the same.
    const scraped = await projector.metrics.metrics();
    expect(Object.keys(listed).sort()).toEqual(['anomalies', 'anomaly_windows', 'api_keys', 'approvals', 'audit_entries', 'branches', 'cache_controls', 'cancellation_feedback', 'consents', 'credentials', 'credit_balances', 'crm_activities', 'crm_contexts', 'crm_records', 'databases', 'domains', 'honeytokens', 'invitations', 'ip_rules', 'memberships', 'organizations', 'policies', 'projects', 'replicas', 'self_host_enrollments', 'support_cases', 'support_messages', 'webhooks', 'wire_connections']);
    for (const [name, status] of Object.entries(listed)) expect({ name, lag: metricValue(scraped, 'pgward_projection_lag_events', { projection: name }) }).toEqual({ name, lag: status.lag });
  }, 120_000);

  it('is N while N events of its streams wait, whatever other traffic lies between them, and 0 once they are applied', async () => {
    const PENDING = 7;
    // The projector's next write to the organizations read model waits for this lock: its checkpoint stays put.
    const blocker = await pool.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table rm.organizations in exclusive mode');
      for (let i = 0; i < PENDING; i++) {
        await writer.append(`org-${orgId}`, [encodeEvent(OrganizationPlanChanged, { org_id: orgId, plan: i % 2 ? 'free' : 'pro', features: [] }, meta())], 'any');
        await appendDecisions(PROJECTS * PER_APPEND);
      }
      expect(await lag('organizations')).toBe(PENDING);
      // api_keys reads the same streams and is not blocked; audit_entries takes the decisions.
      await waitFor('api_keys and audit_entries caught up', async () => [await lag('api_keys'), await lag('audit_entries')], ([keys, audit]) => keys === 0 && audit === 0);
      expect(await lag('organizations')).toBe(PENDING);
      expect(projectionsList().organizations).toMatchObject({ lag: PENDING, caught_up: false });
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }
    await waitFor('organizations caught up', () => lag('organizations'), (value) => value === 0);
    expect(projectionsList().organizations).toMatchObject({ lag: 0, caught_up: true });
  }, 120_000);

  it('counts the same on a store made before category heads were kept: they are filled from its events when it opens', async () => {
    const heads = async () => (await pool.query<{ category: string; position: string }>('select category, position::text from pgward.category_heads order by category')).rows;
    const kept = await heads();
    expect(kept.map((head) => head.category)).toEqual(['audit-', 'org-']);
    const checkpoint = (await pool.query<{ position: string }>(`select position::text from pgward.projection_checkpoints where name = 'organizations'`)).rows[0]!.position;
    await pool.query('drop table pgward.category_heads');
    const reopened = await createPostgresEventStore(database.url);
    try {
      expect(await heads()).toEqual(kept);
      expect(await reopened.countAfter(BigInt(checkpoint), { streamPrefixes: ['org-'] })).toBe(0);
      expect(await reopened.countAfter(-1n, { streamPrefixes: ['org-'] })).toBe(8);
    } finally {
      await reopened.close();
    }
  });
});
