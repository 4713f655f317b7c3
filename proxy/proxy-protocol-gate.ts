import type { Logger } from 'pino';
import { logEvent } from '../src/log-events.js';
import { contains, normalAddress, parseAddress, type Cidr } from '../src/net/cidr.js';
import { DISCARD, type Inlet } from './inlet.js';
import { encodeErrorResponse } from './protocol/backend.js';
import { mayBeProxyV2, parseProxyV2, PROXY_V2_SIGNATURE } from './protocol/proxy-v2.js';

/** Where PROXY protocol v2 headers are accepted from (PGWARD_PROXY_PROTOCOL_TRUSTED). */
export interface ProxyProtocolOptions {
  readonly trusted: readonly Cidr[];
}

export interface GateContext {
  readonly proxyProtocol: ProxyProtocolOptions;
  readonly loginTimeoutMs: number;
  readonly logger: Logger;
  readonly metrics: { readonly refused: { inc(): void } };
}

/** Larger than any header a balancer sends (16 bytes and the addresses, plus its TLVs); beyond, the connection is refused. */
const MAX_HEADER_BYTES = 16 + 65_535;

const REFUSED = encodeErrorResponse({ severity: 'FATAL', code: '08P01', message: 'invalid connection preamble' });

function isTrusted(options: ProxyProtocolOptions, peer: string): boolean {
  const address = parseAddress(peer);
  return address !== undefined && options.trusted.some((range) => contains(range, address));
}

/**
 * Before a connection's session starts, when PROXY protocol is configured: a peer among the
 * trusted proxies must open with a v2 header, whose source address then is the client's (LOCAL,
 * a balancer's own health check, keeps the peer's); any other peer must not send one. A missing,
 * malformed or untrusted header closes the connection with 08P01 before any login, logged as
 * connection_refused. `start` gets the inlet with what followed the header kept for its session.
 */
export function throughProxyProtocol(inlet: Inlet, context: GateContext, start: (inlet: Inlet, clientAddress: string) => void): void {
  const peer = normalAddress(inlet.socket.remoteAddress ?? '');
  const trusted = isTrusted(context.proxyProtocol, peer);
  let buffered: Buffer = Buffer.alloc(0);
  const timer = setTimeout(() => refuse('no PROXY protocol header before the login timeout'), context.loginTimeoutMs).unref();

  function refuse(reason: string): void {
    clearTimeout(timer);
    context.metrics.refused.inc();
    logEvent(context.logger, 'connection_refused', { source: 'wire', peer, reason }, 'connection refused before login');
    inlet.receive(DISCARD);
    inlet.socket.end(REFUSED);
  }

  function hand(clientAddress: string, rest: Buffer): void {
    clearTimeout(timer);
    inlet.unshift(rest);
    start(inlet, clientAddress);
  }

  inlet.receive({
    ended: () => clearTimeout(timer),
    bytes: (chunk) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      if (!trusted) {
        // A PostgreSQL client's first byte is never the signature's: most connections are handed on at their first chunk.
        if (!mayBeProxyV2(buffered)) return hand(peer, buffered);
        if (buffered.length >= PROXY_V2_SIGNATURE.length) refuse('a PROXY protocol header from a peer not in PGWARD_PROXY_PROTOCOL_TRUSTED');
        return;
      }
      const header = parseProxyV2(buffered);
      if (header.kind === 'incomplete') {
        if (buffered.length > MAX_HEADER_BYTES) refuse('an over-long PROXY protocol header');
        return;
      }
      if (header.kind === 'invalid') return refuse(`from a trusted proxy: ${header.reason}`);
      hand(header.kind === 'proxy' ? header.source.address : peer, buffered.subarray(header.length));
    },
  });
}
