/**
 * The split deployment as docs/operations.md lays it out: state in PostgreSQL (PGWARD_STATE_URL),
 * decisions on NATS JetStream, and three processes, `pgward serve --role proxy`, `--role ingest
 * --role projector` (the audit pipeline) and `--role api`. The pipeline's audit projection takes
 * the entries its ingest prepared (counted in /metrics); killing the pipeline mid-load leaves the
 * proxy serving, and once it is started again the audit trail ends with exactly one entry per
 * statement, its chain verified from the read model and from the events.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAnchorKey } from '../../src/crypto/checkpoint.js';
import { startAgentLoad } from '../support/agent-load.js';
import { freePort } from '../support/free-port.js';
import { freshDatabase, upstreamLogin, type TestDatabase } from '../support/pg.js';
import { auditEntryCount, metricValue, provision, startPgward, verifyAudit, waitFor, type PgwardProcess } from '../support/pgward-process.js';

const natsUrl = process.env.NATS_URL ?? '';
const CLIENTS = 4;
const PAUSE_MS = 10;
const PIPELINE = ['serve', '--role', 'ingest', '--role', 'projector'];

let dir: string;
let upstream: TestDatabase;
let state: TestDatabase;
let stream: string;
let env: NodeJS.ProcessEnv;
const running: PgwardProcess[] = [];

async function start(args: readonly string[]): Promise<PgwardProcess> {
  const port = await freePort();
  const started = await startPgward(args, { ...env, PGWARD_HTTP_PORT: String(port) }, port);
  running.push(started);
  return started;
}

const handedOn = async (pipeline: PgwardProcess): Promise<number> =>
  metricValue(await fetch(`${pipeline.httpUrl}/metrics`).then((r) => r.text(), () => ''), 'pgward_audit_entries_handed_on_total', { role: 'ingest+projector' }) ?? -1;

beforeAll(async () => {
  if (natsUrl === '') return;
  dir = await mkdtemp(join(tmpdir(), 'pgward-split-'));
  await chmod(dir, 0o755);
  upstream = await freshDatabase('split_upstream');
  state = await freshDatabase('split_state');
  const client = new pg.Client({ connectionString: upstream.url });
  await client.connect();
  await client.query("create table public.items (id int primary key, label text not null); insert into public.items select i, 'item-' || i from generate_series(1, 100) i");
  await client.end();
  const anchorKey = join(dir, 'anchor.pem');
  await writeFile(anchorKey, generateAnchorKey(), { mode: 0o600 });
  const tag = randomBytes(4).toString('hex');
  stream = `PGWARD_SPLIT_E2E_${tag}`;
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_MASTER_KEY: _k, ...rest } = process.env;
  env = {
    ...rest,
    PGWARD_DATA_DIR: dir,
    PGWARD_STATE_URL: state.url,
    PGWARD_MASTER_KEY: randomBytes(32).toString('base64'),
    PGWARD_AUDIT_ANCHOR_KEY: anchorKey,
    NATS_URL: natsUrl,
    PGWARD_NATS_STREAM: stream,
    PGWARD_NATS_SUBJECT: `pgward.split.${tag}`,
    PGWARD_PROXY_PORT: String(await freePort()),
    PGWARD_PUBLIC_HOST: '127.0.0.1',
    PGWARD_LOG_LEVEL: 'warn',
  };
});

afterAll(async () => {
  if (natsUrl === '') return;
  await Promise.all(running.map((p) => p.stop()));
  const nc = await connect({ servers: natsUrl });
  try {
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
  await upstream?.drop();
  await state?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(natsUrl === '')('the split deployment: proxy, audit pipeline and API as processes, on NATS and PostgreSQL', () => {
  it('hands ingest’s prepared entries to the projection in the pipeline process; a pipeline killed mid-load and started again loses and doubles no entry, and the chain verifies', async () => {
    let pipeline = await start(PIPELINE);
    const api = await start(['serve', '--role', 'api']);
    await start(['serve', '--role', 'proxy']);
    const { projectId, logins } = await provision(
      { httpUrl: api.httpUrl, env },
      upstreamLogin(upstream),
      { open: { allowed_tables: ['public.*'] } },
    );

    const load = await startAgentLoad(Number(env.PGWARD_PROXY_PORT), logins.open!, CLIENTS, PAUSE_MS);
    await waitFor('statements flowing', () => load.done.length, (n) => n >= 200);
    await waitFor('entries handed on in the pipeline', () => handedOn(pipeline), (n) => n > 0);

    process.kill(pipeline.child.pid!, 'SIGKILL');
    const killedAt = Date.now();
    await pipeline.exited;
    running.splice(running.indexOf(pipeline), 1);
    await waitFor('statements while the pipeline is down', () => load.done.filter((at) => at > killedAt).length, (n) => n >= 50);
    pipeline = await start(PIPELINE);
    const atRestart = load.done.length;
    await waitFor('statements after the restart', () => load.done.length, (n) => n >= atRestart + 200);
    // The restarted pipeline catches up from the store first; appends made once it has are handed on.
    await waitFor('entries handed on after the restart', () => handedOn(pipeline), (n) => n > 0, 60_000);
    await load.stop();
    const statements = load.done.length;

    expect(load.failures).toEqual([]);
    await waitFor('every statement in the audit read model', () => auditEntryCount(state.url, projectId), (n) => n >= statements, 180_000);
    const tally = verifyAudit(projectId, env);
    expect({ entries: tally.entries, events: tally.events, ok: tally.ok }).toEqual({ entries: statements, events: statements, ok: true });
  }, 600_000);
});
