/**
 * The PROXY protocol version 2 header (HAProxy's proxy-protocol.txt, section 2.2) a load balancer
 * sends before the client's own bytes: a 12-byte signature, version and command, address family
 * and transport, the length of the rest, then the addresses (and TLVs, which are skipped). Pure:
 * bytes in, the client's address out. Written here rather than taken from a library because the
 * format is a fixed 16-byte prefix and two address layouts, and the proxy needs exactly one
 * answer from it (where the client is), with every malformed case refused.
 */
import { formatAddress } from '../../src/net/cidr.js';

export const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

const FIXED_BYTES = 16;
const INET_BYTES = 12;
const INET6_BYTES = 36;

export type ProxyHeader =
  /** More bytes are needed to tell. */
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'invalid'; readonly reason: string }
  /**
   * A whole header of `length` bytes. LOCAL (a health check of the balancer itself) names no
   * client: the connection's own peer is the client.
   */
  | { readonly kind: 'local'; readonly length: number }
  | { readonly kind: 'proxy'; readonly length: number; readonly source: { readonly address: string; readonly port: number } };

/** Whether `bytes` so far agree with the signature: true for a prefix of it, and for anything that starts with all of it. */
export function mayBeProxyV2(bytes: Buffer): boolean {
  const n = Math.min(bytes.length, PROXY_V2_SIGNATURE.length);
  return bytes.subarray(0, n).equals(PROXY_V2_SIGNATURE.subarray(0, n));
}

export function parseProxyV2(bytes: Buffer): ProxyHeader {
  if (!mayBeProxyV2(bytes)) return { kind: 'invalid', reason: 'the connection does not start with a PROXY protocol v2 signature' };
  if (bytes.length < FIXED_BYTES) return { kind: 'incomplete' };
  const version = bytes[12]! >> 4;
  const command = bytes[12]! & 0x0f;
  if (version !== 2) return { kind: 'invalid', reason: `PROXY protocol version ${version} is not 2` };
  if (command > 1) return { kind: 'invalid', reason: `PROXY protocol command ${command} is neither LOCAL (0) nor PROXY (1)` };
  const length = FIXED_BYTES + bytes.readUInt16BE(14);
  if (bytes.length < length) return { kind: 'incomplete' };
  if (command === 0) return { kind: 'local', length };
  const family = bytes[13]! >> 4;
  const transport = bytes[13]! & 0x0f;
  if (transport !== 1) return { kind: 'invalid', reason: `PROXY protocol transport ${transport} is not STREAM (1)` };
  const block = bytes.subarray(FIXED_BYTES, length);
  if (family === 1) {
    if (block.length < INET_BYTES) return { kind: 'invalid', reason: `a PROXY protocol TCP/IPv4 header needs ${INET_BYTES} address bytes, not ${block.length}` };
    return { kind: 'proxy', length, source: { address: formatAddress({ family: 4, bytes: block.subarray(0, 4) }), port: block.readUInt16BE(8) } };
  }
  if (family === 2) {
    if (block.length < INET6_BYTES) return { kind: 'invalid', reason: `a PROXY protocol TCP/IPv6 header needs ${INET6_BYTES} address bytes, not ${block.length}` };
    const source = block.subarray(0, 16);
    // An IPv4-mapped source is the IPv4 client it maps.
    const mapped = source.subarray(0, 10).every((b) => b === 0) && source[10] === 0xff && source[11] === 0xff;
    const address = mapped ? formatAddress({ family: 4, bytes: source.subarray(12) }) : formatAddress({ family: 6, bytes: source });
    return { kind: 'proxy', length, source: { address, port: block.readUInt16BE(32) } };
  }
  return { kind: 'invalid', reason: `PROXY protocol address family ${family} is not IPv4 (1) or IPv6 (2)` };
}
