/**
 * The relay link's deployment configuration (docs/regions.md#configuration-per-deployment): the
 * peers an origin relays to, by region, and the link secret both ends share.
 */
import { z } from 'zod';
import { REGION_PATTERN } from '../events/fields.js';

/** How the origin recognises a peer: the SHA-256 of its certificate (DER), or a CA file it must chain to with `host` among its names. */
export type PeerTrust = { readonly fingerprint: Buffer } | { readonly caFile: string };

export interface RegionPeer {
  readonly region: string;
  readonly host: string;
  readonly port: number;
  readonly trust: PeerTrust;
}

const SECRET_BYTES = 32;

const Peer = z.strictObject({
  host: z.string().regex(/^[^\s\0/]{1,255}$/, 'expected a host name or address'),
  port: z.int().min(1).max(65_535),
  fingerprint: z
    .string()
    .regex(/^sha256:[0-9a-fA-F]{64}$/, 'expected sha256: and 64 hex digits')
    .optional(),
  ca: z.string().min(1, 'expected the path of a PEM CA certificate').optional(),
});

/** PGWARD_REGION_PEERS: a JSON object of region → `{host, port, fingerprint}` or `{host, port, ca}`. Throws naming the first fault. */
export function parseRegionPeers(spec: string): ReadonlyMap<string, RegionPeer> {
  let json: unknown;
  try {
    json = JSON.parse(spec);
  } catch {
    throw new Error('not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error('not a JSON object of regions');
  const peers = new Map<string, RegionPeer>();
  for (const [region, value] of Object.entries(json)) {
    if (!REGION_PATTERN.test(region)) throw new Error(`${JSON.stringify(region)} is not a region name`);
    const parsed = Peer.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new Error(`region ${region}: ${[...issue.path, ''].join(' ')}${issue.message}`);
    }
    const { host, port, fingerprint, ca } = parsed.data;
    if ((fingerprint === undefined) === (ca === undefined)) throw new Error(`region ${region}: give either fingerprint or ca`);
    const trust: PeerTrust = fingerprint ? { fingerprint: Buffer.from(fingerprint.slice('sha256:'.length), 'hex') } : { caFile: ca! };
    peers.set(region, { region, host, port, trust });
  }
  return peers;
}

/** PGWARD_RELAY_SECRET: at least 32 bytes as base64url. */
export function parseRelaySecret(spec: string): Buffer {
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(spec)) throw new Error('not base64url');
  const secret = Buffer.from(spec, 'base64url');
  if (secret.length < SECRET_BYTES) throw new Error(`${secret.length} bytes, at least ${SECRET_BYTES} are needed`);
  return secret;
}
