import { createSecureContext, type SecureContext } from 'node:tls';
import { ConfigError, readConfiguredFile, type Config } from '../../src/config.js';
import { parseRegionPeers, parseRelaySecret } from '../../src/net/relay-config.js';
import type { RelayOptions } from '../server.js';
import { loadPeers } from './link.js';

/** The proxy's relay options from its configuration (docs/regions.md); undefined when no relay variable is set. */
export async function relayOptions(config: Config, proxyTls: SecureContext): Promise<RelayOptions | undefined> {
  if (!config.PGWARD_RELAY_SECRET) return undefined;
  const secrets = [config.PGWARD_RELAY_SECRET, config.PGWARD_RELAY_SECRET_PREVIOUS].filter((secret) => secret !== undefined).map(parseRelaySecret);
  const peers = await loadPeers(config.PGWARD_REGION_PEERS ? parseRegionPeers(config.PGWARD_REGION_PEERS) : new Map());
  if (config.PGWARD_RELAY_PORT === undefined) return { peers, secrets };
  return { peers, secrets, listen: { host: config.PGWARD_LISTEN_HOST, port: config.PGWARD_RELAY_PORT, tls: await relayTls(config, proxyTls) } };
}

async function relayTls(config: Config, proxyTls: SecureContext): Promise<SecureContext> {
  if (!config.PGWARD_RELAY_CERT || !config.PGWARD_RELAY_KEY) return proxyTls;
  const [cert, key] = [await readConfiguredFile('PGWARD_RELAY_CERT', config.PGWARD_RELAY_CERT), await readConfiguredFile('PGWARD_RELAY_KEY', config.PGWARD_RELAY_KEY)];
  try {
    return createSecureContext({ cert, key, minVersion: 'TLSv1.3' });
  } catch (error) {
    throw new ConfigError('PGWARD_RELAY_CERT', `and PGWARD_RELAY_KEY do not make a usable certificate and key (${(error as Error).message})`);
  }
}
