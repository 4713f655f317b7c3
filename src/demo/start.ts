/**
 * `pgward serve`'s demo (spec §4.8): provisions it on the state database's server unless it is,
 * then vends one credential through the API and prints how to try it. A demo that cannot be set
 * up is logged and leaves the rest of pgward serving.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ORG_KEY_PREFIX } from '../../commands/organizations/create-organization.js';
import type { Config } from '../config.js';
import { loadKeyring } from '../control-plane.js';
import { newSecret } from '../crypto/tokens.js';
import type { Logger } from '../logger.js';
import { openEventStore } from '../main.js';
import { openStateDatabase } from '../state.js';
import { provisionDemo } from './provision.js';
import { demoSettings } from './settings.js';

export const DEMO_DATABASE = 'pgward_demo';
/** The demo organization's owner API key, for its operator (kill-switch, pause, audit): beside master.key, 0600. */
export const DEMO_OWNER_KEY_FILE = 'demo-owner.key';

async function ownerKey(file: string): Promise<string> {
  const existing = await readFile(file, 'utf8').catch(() => undefined);
  if (existing?.trim()) return existing.trim();
  const key = newSecret(ORG_KEY_PREFIX);
  await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

async function provision(config: Config, logger: Logger): Promise<void> {
  const state = await openStateDatabase(config, { reuseRunning: true });
  const store = await openEventStore(config, state.url);
  try {
    const keyFile = join(resolve(config.PGWARD_DATA_DIR), DEMO_OWNER_KEY_FILE);
    const { demo, created } = await provisionDemo({ store, keyring: await loadKeyring(config, state) }, { adminUrl: state.url, database: DEMO_DATABASE }, () => ownerKey(keyFile));
    logger.info({ project_id: demo.project_id, org_id: demo.org_id, owner_key_file: keyFile }, created ? 'demo provisioned' : 'demo already provisioned');
  } finally {
    await store.close();
    await state.close();
  }
}

interface Vended {
  connection_string: string;
  mcp_url: string;
  mcp_token: string;
  expires_at: string;
}

/** What the start-up prints: a psql command and an MCP client configuration with a fresh demo credential. */
export function demoBanner(httpUrl: string, vended: Vended | undefined): string {
  const more = `another credential: curl -X POST ${httpUrl}/v1/demo/credentials; what the demo offers: curl ${httpUrl}/v1/demo`;
  const lines = ['pgward demo: a read-only shop database (customers with masked e-mails, orders capped at 50 rows, a secrets table no credential may read).'];
  if (vended) {
    const mcp = { mcpServers: { 'pgward-demo': { type: 'http', url: vended.mcp_url, headers: { Authorization: `Bearer ${vended.mcp_token}` } } } };
    lines.push(
      `  psql: psql "${vended.connection_string}" -c "select id, name, email from customers order by id limit 5"`,
      `  MCP client configuration: ${JSON.stringify(mcp)}`,
      `  this credential expires at ${vended.expires_at}; ${more}`,
    );
  } else {
    lines.push(`  ${more}`);
  }
  lines.push('  PGWARD_DEMO=off turns the demo off.');
  return lines.join('\n');
}

/** Provisions the demo when PGWARD_DEMO allows, and prints how to try it; `httpUrl` serves the API. */
export async function announceDemo(config: Config, logger: Logger, httpUrl: string): Promise<void> {
  if (!demoSettings(config)) return;
  try {
    await provision(config, logger);
  } catch (error) {
    logger.error({ err: error }, 'the demo could not be set up; pgward serves without it');
    return;
  }
  const response = await fetch(`${httpUrl}/v1/demo/credentials`, { method: 'POST' }).catch((error: unknown) => error as Error);
  const vended = response instanceof Response && response.status === 201 ? ((await response.json()) as Vended) : undefined;
  if (!vended) logger.warn({ status: response instanceof Response ? response.status : (response as Error).message }, 'no demo credential could be issued at start-up');
  console.log(demoBanner(httpUrl, vended));
}
