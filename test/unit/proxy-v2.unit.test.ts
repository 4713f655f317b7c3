import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mayBeProxyV2, parseProxyV2, PROXY_V2_SIGNATURE } from '../../proxy/protocol/proxy-v2.js';
import { normalAddress } from '../../src/net/cidr.js';
import { proxyV2Header } from '../support/proxy-v2.js';

describe('PROXY protocol v2 header', () => {
  it('reads the source of a TCP/IPv4 and a TCP/IPv6 header, skipping TLVs, and says where the client bytes start', () => {
    const v4 = proxyV2Header({ source: '203.0.113.7', sourcePort: 51234, tlv: Buffer.from([0x04, 0x00, 0x02, 0xaa, 0xbb]) });
    expect(parseProxyV2(Buffer.concat([v4, Buffer.from('startup')]))).toEqual({ kind: 'proxy', length: 16 + 12 + 5, source: { address: '203.0.113.7', port: 51234 } });
    const v6 = proxyV2Header({ source: '2001:db8::42', sourcePort: 443 });
    expect(parseProxyV2(v6)).toEqual({ kind: 'proxy', length: 16 + 36, source: { address: '2001:db8::42', port: 443 } });
    // A dual-stack balancer's IPv4 client, as an IPv4-mapped IPv6 source.
    expect(parseProxyV2(proxyV2Header({ source: '::ffff:127.0.0.2' }))).toMatchObject({ kind: 'proxy', source: { address: '127.0.0.2' } });
    expect(parseProxyV2(proxyV2Header({ command: 'local' }))).toEqual({ kind: 'local', length: 28 });
  });

  it('refuses what is not a well-formed v2 PROXY-over-TCP header, naming the fault', () => {
    const reasons = [
      Buffer.from('PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n'),
      Buffer.concat([Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]), Buffer.alloc(8)]),
      proxyV2Header({ version: 1 }),
      proxyV2Header({ familyByte: 0x12 }),
      proxyV2Header({ familyByte: 0x31 }),
      proxyV2Header({ familyByte: 0x01 }),
      (() => {
        const header = proxyV2Header({});
        header[12] = 0x2f;
        return header;
      })(),
      (() => {
        const header = proxyV2Header({}).subarray(0, 16 + 8);
        header.writeUInt16BE(8, 14);
        return header;
      })(),
    ].map((bytes) => {
      const parsed = parseProxyV2(bytes);
      return parsed.kind === 'invalid' ? parsed.reason : parsed.kind;
    });
    expect(reasons).toEqual([
      'the connection does not start with a PROXY protocol v2 signature',
      'the connection does not start with a PROXY protocol v2 signature',
      'PROXY protocol version 1 is not 2',
      'PROXY protocol transport 2 is not STREAM (1)',
      'PROXY protocol address family 3 is not IPv4 (1) or IPv6 (2)',
      'PROXY protocol address family 0 is not IPv4 (1) or IPv6 (2)',
      'PROXY protocol command 15 is neither LOCAL (0) nor PROXY (1)',
      'a PROXY protocol TCP/IPv4 header needs 12 address bytes, not 8',
    ]);
  });

  it('any header cut short is incomplete, never misread; with all its bytes it is read whole (IPv4 and IPv6 sources, any TLVs)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), fc.integer({ min: 0, max: 65535 }), fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 32 }), (source, port, tlv, after) => {
        const header = proxyV2Header({ source, sourcePort: port, tlv: Buffer.from(tlv) });
        for (let cut = 0; cut < header.length; cut++) expect(parseProxyV2(header.subarray(0, cut))).toEqual({ kind: 'incomplete' });
        expect(parseProxyV2(Buffer.concat([header, Buffer.from(after)]))).toEqual({ kind: 'proxy', length: header.length, source: { address: normalAddress(source), port } });
      }),
    );
  });

  it('bytes that differ from the signature anywhere in its first 12 are never a header', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 12, maxLength: 40 }), (bytes) => {
        const buffer = Buffer.from(bytes);
        fc.pre(!buffer.subarray(0, 12).equals(PROXY_V2_SIGNATURE));
        expect(mayBeProxyV2(buffer)).toBe(false);
        expect(parseProxyV2(buffer).kind).toBe('invalid');
      }),
    );
  });
});
