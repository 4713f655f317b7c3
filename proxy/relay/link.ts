/**
 * The origin's end of a relay link (docs/regions.md#the-link): TLS 1.3 to the peer of the
 * database's region, the peer's certificate checked against its pinned fingerprint or CA before a
 * byte is sent, the hello with the link secret's proof bound to the session, and, once the peer
 * answers ready, an upstream connection like any other whose bytes travel over the link.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { readConfiguredFile } from '../../src/config.js';
import type { RegionPeer } from '../../src/net/relay-config.js';
import { DISCARD, Inlet } from '../inlet.js';
import { bounded, closeGracefully, first, KEEPALIVE_DELAY_MS, nextConnectionId, UpstreamError, type Guard, type UpstreamConnection, type UpstreamEndpoint } from '../upstream/connection.js';
import { readFrame } from './frame-reader.js';
import { decodeAnswer, encodeFrame, exporterOf, FRAME, makeHello, type HelloFields, type RelayCancel, type RelayTarget } from './handshake.js';
import { RelayError } from './relay-error.js';

/** A peer as the origin dials it: a CA file is read once, at start. */
export interface LinkPeer {
  readonly region: string;
  readonly host: string;
  readonly port: number;
  readonly trust: { readonly fingerprint: Buffer } | { readonly ca: Buffer };
}

/** What this proxy needs to open links: who it is, its peers by region, the secret it signs with. */
export interface RelayOrigin {
  readonly region: string;
  readonly proxyId: string;
  readonly peers: ReadonlyMap<string, LinkPeer>;
  readonly secret: Buffer | undefined;
}

/** The peers of PGWARD_REGION_PEERS with their CA files read (a file that cannot be read stops the start). */
export async function loadPeers(peers: ReadonlyMap<string, RegionPeer>): Promise<Map<string, LinkPeer>> {
  const loaded = new Map<string, LinkPeer>();
  for (const [region, peer] of peers) {
    const trust = 'fingerprint' in peer.trust ? peer.trust : { ca: await readConfiguredFile('PGWARD_REGION_PEERS', peer.trust.caFile) };
    loaded.set(region, { region, host: peer.host, port: peer.port, trust });
  }
  return loaded;
}

/** The SHA-256 of a certificate's DER, as PGWARD_REGION_PEERS pins it. */
export const certificateFingerprint = (der: Buffer): Buffer => createHash('sha256').update(der).digest();

/** Why the peer's certificate is not the one configured; undefined when it is. */
function untrusted(socket: tls.TLSSocket, peer: LinkPeer): string | undefined {
  const certificate = socket.getPeerCertificate();
  if (!certificate.raw) return 'the peer presented no certificate';
  if ('fingerprint' in peer.trust) {
    const actual = certificateFingerprint(certificate.raw);
    return timingSafeEqual(actual, peer.trust.fingerprint) ? undefined : `the peer's certificate has fingerprint sha256:${actual.toString('hex')}, not the pinned one`;
  }
  if (!socket.authorized) return `the peer's certificate does not chain to the configured CA (${String(socket.authorizationError)})`;
  return tls.checkServerIdentity(peer.host, certificate)?.message;
}

/** TCP and TLS 1.3 to the peer, its certificate checked; the peer speaks nothing else, so TLS starts at once. */
async function secureLink(peer: LinkPeer, label: string, guard: Guard): Promise<tls.TLSSocket> {
  const raw = guard(net.connect({ host: peer.host, port: peer.port }));
  raw.setNoDelay(true);
  raw.setKeepAlive(true, KEEPALIVE_DELAY_MS);
  await first(raw, 'connect', label);
  const secure = guard(
    tls.connect({
      socket: raw,
      host: peer.host,
      ...(net.isIP(peer.host) === 0 ? { servername: peer.host } : {}),
      minVersion: 'TLSv1.3',
      maxVersion: 'TLSv1.3',
      // Checked below, before anything is sent: the pin alone, or the CA and the host name.
      rejectUnauthorized: false,
      ...('ca' in peer.trust ? { ca: peer.trust.ca } : {}),
    }),
  );
  await first(secure, 'secureConnect', label);
  const why = untrusted(secure, peer);
  if (why) {
    // Ended here, before the raw socket under it: nothing is sent, and nothing read after.
    secure.destroy();
    throw new RelayError('peer_untrusted', peer.region, `${label}: ${why}`);
  }
  return secure;
}

/** Connect, TLS handshake, timeout, the stream breaking before the answer: the peer could not be reached (an UpstreamError carries the cause). */
function unreachable(error: unknown, region: string, label: string): RelayError {
  const message = error instanceof UpstreamError ? error.message : `${label}: ${error instanceof Error ? error.message : String(error)}`;
  return new RelayError('peer_unreachable', region, message, { cause: error });
}

function peerOf(origin: RelayOrigin, region: string): LinkPeer {
  const peer = origin.peers.get(region);
  if (!peer || !origin.secret) throw new RelayError('no_peer', region, `no relay peer is configured for region ${region} (PGWARD_REGION_PEERS, PGWARD_RELAY_SECRET)`);
  return peer;
}

/** Opens a link to `peer` and sends the hello for `wanted` (a target or a cancel); resolves with the link and its inlet. */
function hello(origin: RelayOrigin, peer: LinkPeer, wanted: Pick<HelloFields, 'target' | 'cancel'>, label: string, guard: Guard): Promise<{ socket: tls.TLSSocket; inlet: Inlet }> {
  return secureLink(peer, label, guard).then((socket) => {
    const inlet = Inlet.over(socket);
    const exporter = exporterOf(socket);
    const fields: HelloFields = { origin_region: origin.region, origin_proxy_id: origin.proxyId, region: peer.region, ...wanted };
    socket.write(encodeFrame(FRAME.hello, makeHello(fields, origin.secret!, exporter)));
    return { socket, inlet };
  });
}

/**
 * A relayed upstream connection of `target` in `region`, within `timeoutMs` (and until `signal`
 * aborts). Rejects with a RelayError: no_peer, peer_unreachable, peer_untrusted, peer_refused,
 * peer_no_upstream.
 */
export async function openRelayLink(
  origin: RelayOrigin,
  region: string,
  target: RelayTarget,
  endpoint: UpstreamEndpoint,
  options: { readonly timeoutMs: number; readonly signal?: AbortSignal },
): Promise<UpstreamConnection> {
  const peer = peerOf(origin, region);
  const label = `relay to region ${region} (${peer.host}:${peer.port})`;
  try {
    return await bounded(label, options.timeoutMs, options.signal, async (guard) => {
      const { socket, inlet } = await hello(origin, peer, { target }, label, guard);
      const answer = decodeAnswer(await readFrame(inlet));
      if (!answer) throw new RelayError('peer_refused', region, `${label}: the peer answered the hello with something else than ready or refused`);
      if ('refused' in answer) {
        const { reason } = answer.refused;
        throw new RelayError(reason === 'no_upstream' ? 'peer_no_upstream' : 'peer_refused', region, `${label}: the peer refused the link (${reason})`);
      }
      const { ready } = answer;
      if (ready.region !== region) throw new RelayError('peer_refused', region, `${label}: the peer is of region ${ready.region}`);
      return {
        socket,
        inlet,
        parameters: new Map(Object.entries(ready.parameters)),
        backendKey: { processId: ready.process_id, secretKey: Buffer.from(ready.secret_key, 'base64') },
        ...(ready.replica_id === undefined ? {} : { peerReplicaId: ready.replica_id }),
        target: endpoint,
        id: nextConnectionId(),
        createdAt: Date.now(),
        close: () => closeGracefully(inlet),
      };
    });
  } catch (error) {
    // The pool's close aborts what it opens: that reason stands.
    if (error instanceof RelayError || options.signal?.aborted) throw error;
    throw unreachable(error, region, label);
  }
}

/**
 * Asks the peer of `region` to cancel what the link of `key` runs, over a new link (a hello with
 * `cancel`). Best effort, as any cancel: true when the peer took the request and closed.
 */
export async function sendRelayCancel(origin: RelayOrigin, region: string, key: RelayCancel, timeoutMs: number): Promise<boolean> {
  try {
    const peer = peerOf(origin, region);
    const label = `relay to region ${region} (${peer.host}:${peer.port}, cancel)`;
    return await bounded(label, timeoutMs, undefined, async (guard) => {
      const { socket, inlet } = await hello(origin, peer, { cancel: key }, label, guard);
      const closed = new Promise<boolean>((resolve) => socket.once('close', (hadError: boolean) => resolve(!hadError)));
      inlet.receive(DISCARD);
      return await closed;
    });
  } catch {
    return false;
  }
}
