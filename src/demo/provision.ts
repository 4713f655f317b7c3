/**
 * Sets the demo up through the ordinary commands: the shop database and a SELECT-only login role
 * on the given PostgreSQL server, then an organization, a project on that database, the read-only
 * policy, and last `DemoProvisioned`. Ids are fixed and the role's password is derived from the
 * master key, so a start that died half-way is completed by the next one and nothing is doubled.
 */
import { createHmac } from 'node:crypto';
import pg from 'pg';
import { demo, DEMO_STREAM, type DemoState } from '../../commands/demo/demo.js';
import { DomainError } from '../../commands/domain-error.js';
import { handle, type CommandContext } from '../../commands/handle.js';
import { organization } from '../../commands/organizations/organization.js';
import { policy } from '../../commands/policies/policy.js';
import { project } from '../../commands/projects/project.js';
import { displayPrefix, sha256Hex } from '../crypto/tokens.js';
import { sealSecret, type Keyring } from '../crypto/seal.js';
import { decodeEvent } from '../events/catalog.js';
import { defaultCacheConfig } from '../events/databases.js';
import type { DemoProvisioned } from '../events/demo.js';
import { plans } from '../plans.js';
import { defaultPoolConfig } from '../http/routes/projects.js';
import type { EventStore } from '../store/port.js';
import { DEMO_POLICY, DEMO_PRO_POLICY, SHOP_SQL } from './shop.js';

/** An id of the demo's, the same on every deployment: `prefix`, `demo` and 22 hex digits. */
function demoId<P extends `${string}_`>(prefix: P, what: string): string {
  return `${prefix}demo${sha256Hex(`pgward-demo:${what}`).slice(0, 22)}`;
}

export const DEMO_IDS = {
  org: demoId('org_', 'organization'),
  ownerKey: demoId('key_', 'owner-key'),
  project: demoId('prj_', 'project'),
  database: demoId('db_', 'shop-database'),
  freePolicy: demoId('pol_', 'free-tier-policy'),
  proPolicy: demoId('pol_', 'pro-tier-policy'),
} as const;

export interface DemoUpstream {
  /** A superuser's URL on the server that gets the shop database (the embedded PostgreSQL by default). */
  readonly adminUrl: string;
  /** The shop database's name; its login role is `<name>_reader`. */
  readonly database: string;
}

export async function readDemo(store: Pick<EventStore, 'readStream'>): Promise<DemoState> {
  return (await store.readStream(DEMO_STREAM)).map(decodeEvent).reduce(demo.evolve, demo.initial);
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

async function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'pgward-demo' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** The shop database with its rows, and a login role that may read its three tables and nothing else. */
async function prepareShop(upstream: DemoUpstream, role: string, password: string): Promise<void> {
  const db = pg.escapeIdentifier(upstream.database);
  const reader = pg.escapeIdentifier(role);
  await onServer(upstream.adminUrl, async (client) => {
    const exists = await client.query('select 1 from pg_database where datname = $1', [upstream.database]);
    if (exists.rowCount === 0) await client.query(`create database ${db}`);
    const roleExists = await client.query('select 1 from pg_roles where rolname = $1', [role]);
    await client.query(`${roleExists.rowCount === 0 ? 'create' : 'alter'} role ${reader} login password ${pg.escapeLiteral(password)}`);
    await client.query(`alter role ${reader} set default_transaction_read_only = on`);
    await client.query(`grant connect on database ${db} to ${reader}`);
  });
  await onServer(withDatabase(upstream.adminUrl, upstream.database), async (client) => {
    await client.query('begin');
    await client.query(SHOP_SQL);
    await client.query(`grant usage on schema public to ${reader}`);
    await client.query(`grant select on customers, orders, secrets to ${reader}`);
    await client.query('commit');
  });
}

/** Runs a create; one that a previous start already made is left as it is. */
async function created(work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (!(error instanceof DomainError && error.code === 'RESOURCE_EXISTS')) throw error;
  }
}

export interface ProvisionDeps {
  readonly store: Pick<EventStore, 'readStream' | 'append'>;
  readonly keyring: Keyring;
}

/**
 * Provisions the demo unless it is; `ownerKey` gives the demo organization's owner API key when
 * the organization is created now. Returns the demo and whether this call created it.
 */
export async function provisionDemo(deps: ProvisionDeps, upstream: DemoUpstream, ownerKey: () => Promise<string>): Promise<{ demo: DemoProvisioned; created: boolean }> {
  const state = await readDemo(deps.store);
  if (state.provisioned) return { demo: state.provisioned, created: false };

  const role = `${upstream.database}_reader`;
  const password = createHmac('sha256', deps.keyring.keys.get(deps.keyring.current)!).update(`pgward-demo-upstream:${role}`).digest('base64url');
  await prepareShop(upstream, role, password);

  const context: CommandContext = { correlationId: 'demo-provisioning', actor: 'system:demo' };
  const { org: orgId, project: projectId, database: databaseId, freePolicy: policyId } = DEMO_IDS;
  const server = new URL(upstream.adminUrl);
  const key = await ownerKey();
  await created(() =>
    handle(deps.store, `org-${orgId}`, organization, {
      kind: 'create',
      orgId,
      name: 'pgward demo',
      plan: 'free',
      features: [...plans.free.defaultFeatures],
      owner: { key: { keyId: DEMO_IDS.ownerKey, name: 'demo owner', role: 'owner', prefix: displayPrefix(key), tokenHash: sha256Hex(key) } },
    }, context),
  );
  await created(() =>
    handle(deps.store, `project-${projectId}`, project, {
      kind: 'create',
      project: { project_id: projectId, org_id: orgId, name: 'demo shop', description: 'The demo: a small shop database behind a read-only policy', cloud: 'aws', self_hosted: false, tags: ['demo'] },
      database: {
        database_id: databaseId,
        project_id: projectId,
        host: server.hostname,
        port: Number(server.port || 5432),
        name: upstream.database,
        username: role,
        password: sealSecret(password, deps.keyring, databaseId),
        ssl_mode: 'prefer',
        role: 'primary',
        pool_config: defaultPoolConfig,
        cache_config: defaultCacheConfig,
        pool_region: '',
        auto_read_routing: false,
        query_timeout_ms: 0,
      },
    }, context),
  );
  await created(() => handle(deps.store, `policy-${policyId}`, policy, { kind: 'create', policy: { policy_id: policyId, project_id: projectId, ...DEMO_POLICY } }, context));
  // The paid tier's policy; its credentials are vended only where PGWARD_PRICES prices them.
  await created(() => handle(deps.store, `policy-${DEMO_IDS.proPolicy}`, policy, { kind: 'create', policy: { policy_id: DEMO_IDS.proPolicy, project_id: projectId, ...DEMO_PRO_POLICY } }, context));
  const provisioned = {
    org_id: orgId,
    project_id: projectId,
    database_id: databaseId,
    tiers: [
      { tier: 'free' as const, policy_id: policyId },
      { tier: 'pro' as const, policy_id: DEMO_IDS.proPolicy },
    ],
  };
  await created(() => handle(deps.store, DEMO_STREAM, demo, { kind: 'provision', demo: provisioned }, context));
  return { demo: (await readDemo(deps.store)).provisioned!, created: true };
}
