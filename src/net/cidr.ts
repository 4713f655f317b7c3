import { isIP } from 'node:net';

/**
 * IPv4 and IPv6 addresses and CIDR ranges as bytes: parsed, normalised and matched without a
 * library. An IPv4-mapped IPv6 address (`::ffff:10.1.2.3`) is its IPv4 address, and a mapped range
 * of prefix 96 or more is the IPv4 range it maps, so a dual-stack listener's clients match the
 * IPv4 entries written for them.
 */
export interface IpAddress {
  readonly family: 4 | 6;
  readonly bytes: Uint8Array;
}

export interface Cidr extends IpAddress {
  readonly prefix: number;
  /** Canonical text: the network address (host bits cleared, IPv6 compressed as RFC 5952) and the prefix. */
  readonly text: string;
}

export class CidrError extends Error {
  override readonly name = 'CidrError';
}

function v4Bytes(text: string): Uint8Array {
  return Uint8Array.from(text.split('.').map(Number));
}

function v6Bytes(text: string): Uint8Array {
  // An embedded dotted quad (`::ffff:1.2.3.4`) becomes its two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let hex = text;
  if (dotted) {
    const quad = v4Bytes(dotted[1]!);
    hex = `${text.slice(0, -dotted[1]!.length)}${((quad[0]! << 8) | quad[1]!).toString(16)}:${((quad[2]! << 8) | quad[3]!).toString(16)}`;
  }
  const [left, right] = hex.split('::') as [string, string | undefined];
  const head = left === '' ? [] : left.split(':');
  const tail = right === undefined || right === '' ? [] : right.split(':');
  const groups = right === undefined ? head : [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail];
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 255;
  });
  return bytes;
}

function isMapped(bytes: Uint8Array): boolean {
  return bytes.length === 16 && bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
}

/** The address `text` names (an IPv4-mapped IPv6 one as its IPv4), or undefined when it names none. Zone ids (`%eth0`) are not addresses here. */
export function parseAddress(text: string): IpAddress | undefined {
  if (text.includes('%')) return undefined;
  const family = isIP(text);
  if (family === 4) return { family: 4, bytes: v4Bytes(text) };
  if (family !== 6) return undefined;
  const bytes = v6Bytes(text);
  return isMapped(bytes) ? { family: 4, bytes: bytes.slice(12) } : { family: 6, bytes };
}

export function formatAddress(address: IpAddress): string {
  if (address.family === 4) return address.bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((address.bytes[i]! << 8) | address.bytes[i + 1]!).toString(16));
  // The WHATWG URL serializer writes IPv6 hosts in RFC 5952's canonical form.
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}

/** The canonical text of an address (IPv4-mapped as IPv4), or `text` unchanged when it is no address. */
export function normalAddress(text: string): string {
  const address = parseAddress(text);
  return address ? formatAddress(address) : text;
}

function masked(bytes: Uint8Array, prefix: number): Uint8Array {
  return bytes.map((byte, i) => {
    const bits = Math.min(8, Math.max(0, prefix - 8 * i));
    return bits === 0 ? 0 : byte & (0xff << (8 - bits));
  });
}

/**
 * A CIDR range from `a.b.c.d[/n]` or `x:y::z[/n]`: a bare address is /32 or /128, host bits are
 * cleared (`10.1.2.3/8` is `10.0.0.0/8`), and an IPv4-mapped range of prefix 96 or more is its
 * IPv4 range. Throws CidrError saying what is wrong.
 */
export function parseCidr(text: string): Cidr {
  const parts = text.split('/');
  const [addressText, prefixText] = parts as [string, string | undefined];
  const family = parts.length > 2 || addressText.includes('%') ? 0 : isIP(addressText);
  if (family === 0) throw new CidrError('is not an address or CIDR range');
  const max = family === 4 ? 32 : 128;
  let prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix <= max)) throw new CidrError(`has a prefix length outside 0-${max}`);
  let address: IpAddress = family === 4 ? { family: 4, bytes: v4Bytes(addressText) } : { family: 6, bytes: v6Bytes(addressText) };
  if (address.family === 6 && isMapped(address.bytes) && prefix >= 96) {
    address = { family: 4, bytes: address.bytes.slice(12) };
    prefix -= 96;
  }
  const network = { family: address.family, bytes: masked(address.bytes, prefix) };
  return { ...network, prefix, text: `${formatAddress(network)}/${prefix}` };
}

/** Whether `address` lies in `cidr` (families must agree: IPv4-mapped addresses are parsed as IPv4). */
export function contains(cidr: Cidr, address: IpAddress): boolean {
  if (cidr.family !== address.family) return false;
  const head = masked(address.bytes, cidr.prefix);
  return head.every((byte, i) => byte === cidr.bytes[i]);
}

/** The ranges of a comma-separated list (a configuration value): a CidrError names the first bad entry. */
export function parseCidrList(spec: string): Cidr[] {
  const entries = spec.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length === 0) throw new CidrError('lists no range');
  return entries.map((entry) => {
    try {
      return parseCidr(entry);
    } catch (error) {
      throw error instanceof CidrError ? new CidrError(`${entry} ${error.message}`) : error;
    }
  });
}
