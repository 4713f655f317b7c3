/**
 * A branch copy whose process is killed mid-copy: `pgward serve --role api` as a child process
 * copies a branch (held up by a lock on the source, so pg_dump waits), is killed with SIGKILL, and
 * the other API process (in the test, over the same state database) finds the copy's lease free,
 * drops the partial database and records the branch failed. While the copier lives, it does not.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { INTERRUPTED } from '../../src/http/routes/branches.js';
import { startApi, type TestApi } from '../support/api.js';
import { freePort } from '../support/free-port.js';
import { adminRows, freshDatabase, type TestDatabase } from '../support/pg.js';
import { startPgward, type PgwardProcess } from '../support/pgward-process.js';
import { waitFor } from '../support/wire.js';

let api: TestApi;
let upstream: TestDatabase;
let copier: PgwardProcess | undefined;
let dir: string;
let holder: pg.Client;

const serverUrl = (): string => inject('pgUrl');

beforeAll(async () => {
  api = await startApi('branch_recovery');
  upstream = await freshDatabase('branch_recovery_src');
  holder = new pg.Client({ connectionString: upstream.url });
  await holder.connect();
  await holder.query('create table orders (id int primary key, total numeric not null); insert into orders select g, g from generate_series(1, 10) g');
  dir = await mkdtemp(join(tmpdir(), 'pgward-branch-recovery-'));
});
afterAll(async () => {
  await copier?.stop();
  await holder?.end().catch(() => undefined);
  await api?.stop();
  await upstream?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('a branch copy whose process dies', () => {
  it('is left copying while its copier lives, then failed with its partial database dropped once the copier is killed', async () => {
    const owner = await api.org('pro');
    const target = new URL(upstream.url);
    const created = await api.call(owner.apiKey, {
      method: 'POST',
      url: '/v1/projects',
      payload: { name: 'Shop', org_id: owner.orgId, database: { host: target.hostname, port: Number(target.port || 5432), name: upstream.name, username: decodeURIComponent(target.username), password: decodeURIComponent(target.password) || 'trust', ssl_mode: 'disable' } },
    });
    const { project, database } = created.json() as { project: { id: string }; database: { id: string } };

    // The copier: an API process of its own over the same state database.
    const anchor = join(dir, 'anchor.pem');
    await writeFile(anchor, api.anchorPem, { mode: 0o600 });
    const port = await freePort();
    const { NATS_URL: _nats, EVENTSTORE_URL: _esdb, ...rest } = process.env;
    copier = await startPgward(['serve', '--role', 'api'], { ...rest, PGWARD_STATE_URL: api.database.url, PGWARD_MASTER_KEY: api.masterKey, PGWARD_AUDIT_ANCHOR_KEY: anchor, PGWARD_DATA_DIR: dir, PGWARD_HTTP_PORT: String(port), PGWARD_LOG_LEVEL: 'warn' }, port);

    // The source is locked: the template copy finds a session on it, and pg_dump waits for the lock.
    await holder.query('begin; lock table orders in access exclusive mode');
    const response = await fetch(`${copier.httpUrl}/v1/projects/${project.id}/branches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ database_id: database.id, name: 'interrupted' }),
    });
    expect(response.status).toBe(202);
    const branch = (await response.json()) as { id: string; database_name: string; status: string };
    expect(branch.status).toBe('copying');
    const dumping = async () =>
      (await adminRows(serverUrl(), `select 1 from pg_stat_activity where datname = '${upstream.name}' and application_name = 'pgward-branch' and wait_event_type = 'Lock'`)).length > 0;
    await waitFor(dumping, 20_000, 'pg_dump waiting on the locked source');
    const exists = async () => (await adminRows(serverUrl(), `select 1 from pg_database where datname = '${branch.database_name}'`)).length > 0;
    expect(await exists()).toBe(true);

    const get = async () => (await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${project.id}/branches/${branch.id}` })).json() as { status: string; failure_reason: string | null };
    // A recovery run (every 5 s in each API process) leaves a live copier's branch alone.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect((await get()).status).toBe('copying');

    process.kill(copier.child.pid!, 'SIGKILL');
    await copier.exited;
    await waitFor(async () => (await get()).status === 'failed', 20_000, 'the interrupted branch recorded failed');
    expect(await get()).toMatchObject({ status: 'failed', failure_reason: INTERRUPTED });
    expect(await exists()).toBe(false);
    const events = await api.store.readStream(`branch-${branch.id}`);
    expect(events.map((event) => event.type)).toEqual(['BranchCreated.v1', 'BranchFailed.v1']);
    await holder.query('rollback');
  }, 90_000);
});
