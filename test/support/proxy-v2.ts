import net from 'node:net';
import { parseAddress } from '../../src/net/cidr.js';
import { PROXY_V2_SIGNATURE } from '../../proxy/protocol/proxy-v2.js';

/**
 * A PROXY protocol v2 header as a load balancer writes it (HAProxy's proxy-protocol.txt 2.2):
 * PROXY over TCP from `source` to `destination`, or LOCAL; `tlv` bytes are appended as the
 * balancer's TLVs would be. Written from the format, not from the parser under test.
 */
export function proxyV2Header(options: { command?: 'proxy' | 'local'; source?: string; sourcePort?: number; destination?: string; destinationPort?: number; tlv?: Buffer; version?: number; familyByte?: number }): Buffer {
  // An IPv6 spelling is sent as IPv6, an IPv4-mapped one too (as a dual-stack balancer does).
  const v6 = (options.source ?? '').includes(':');
  const bytesOf = (text: string | undefined, fallback: string): Buffer => {
    const parsed = parseAddress(text ?? fallback)!;
    if (!v6) return Buffer.from(parsed.bytes);
    if (parsed.family === 6) return Buffer.from(parsed.bytes);
    return Buffer.concat([Buffer.alloc(10), Buffer.from([0xff, 0xff]), Buffer.from(parsed.bytes)]);
  };
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(options.sourcePort ?? 40000, 0);
  ports.writeUInt16BE(options.destinationPort ?? 6432, 2);
  const addresses = Buffer.concat([bytesOf(options.source, '127.0.0.1'), bytesOf(options.destination, v6 ? '::1' : '127.0.0.1'), ports, options.tlv ?? Buffer.alloc(0)]);
  const head = Buffer.alloc(4);
  head[0] = ((options.version ?? 2) << 4) | (options.command === 'local' ? 0 : 1);
  head[1] = options.familyByte ?? (v6 ? 0x21 : 0x11);
  head.writeUInt16BE(addresses.length, 2);
  return Buffer.concat([PROXY_V2_SIGNATURE, head, addresses]);
}

/** A socket for node-postgres's `stream` option that opens with `header` (as a balancer would), optionally from `localAddress`. */
export function socketWriting(header: Buffer | undefined, localAddress?: string): () => net.Socket {
  return () => {
    const socket = new net.Socket();
    const connect = socket.connect.bind(socket) as (options: net.TcpNetConnectOpts) => net.Socket;
    // node-postgres calls connect(port, host); the header is written first, before the client's own bytes.
    (socket as unknown as { connect: (port: number, host: string) => net.Socket }).connect = (port, host) => {
      connect({ port, host, ...(localAddress ? { localAddress } : {}) });
      if (header) socket.write(header);
      return socket;
    };
    return socket;
  };
}
