import { createSecureContext, type SecureContext } from 'node:tls';
import { ConfigError, readConfiguredFile, type Config } from '../../src/config.js';
import { parseRegionPeers, parseRelaySecret } from '../../src/net/relay-config.js';
import type { RelayOptions } from '../server.js';
import { loadPeers, type RelayOrigin } from './link.js';

/** What an origin dials its peers with: PGWARD_REGION_PEERS (CA files read) and the link secrets, the one it signs with first. */
export type RelayLinks = Pick<RelayOptions, 'peers' | 'secrets'>;

/**
 * The origin's side of the relay (docs/regions.md) from the configuration, for every process that
 * opens links: the proxy's, and the hosted MCP's of the api role. Undefined when PGWARD_RELAY_SECRET
 * is unset (loadConfig then refused PGWARD_REGION_PEERS).
 */
export async function relayLinks(config: Config): Promise<RelayLinks | undefined> {
  if (!config.PGWARD_RELAY_SECRET) return undefined;
  const secrets = [config.PGWARD_RELAY_SECRET, config.PGWARD_RELAY_SECRET_PREVIOUS].filter((secret) => secret !== undefined).map(parseRelaySecret);
  return { peers: await loadPeers(config.PGWARD_REGION_PEERS ? parseRegionPeers(config.PGWARD_REGION_PEERS) : new Map()), secrets };
}

/** The proxy's relay options: its links, and the listener when PGWARD_RELAY_PORT is set. */
export async function relayOptions(config: Config, links: RelayLinks, proxyTls: SecureContext): Promise<RelayOptions> {
  if (config.PGWARD_RELAY_PORT === undefined) return links;
  return { ...links, listen: { host: config.PGWARD_LISTEN_HOST, port: config.PGWARD_RELAY_PORT, tls: await relayTls(config, proxyTls) } };
}

/** How a process of `region`, named `proxyId` in its hellos, opens links; without `links` every database of another region is refused (region.no_peer). */
export function relayOrigin(region: string, proxyId: string, links: RelayLinks | undefined): RelayOrigin {
  return { region, proxyId, peers: links?.peers ?? new Map(), secret: links?.secrets[0] };
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
