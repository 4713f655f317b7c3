import { BlockList, isIP } from 'node:net';

/**
 * Which addresses a webhook may be delivered to (PGWARD_WEBHOOK_ALLOWED_NETWORKS): a comma-separated
 * list of CIDR ranges and the word `public`, every address that no special-purpose range holds
 * (private, loopback, link-local, shared, documentation, multicast, reserved). Loopback and private
 * ranges are allowed only when listed.
 */
export interface AllowedNetworks {
  readonly spec: string;
  /** Whether `address` (IPv4 or IPv6; IPv4-mapped IPv6 counts as its IPv4) may be connected to. */
  allows(address: string): boolean;
}

/** The IANA special-purpose ranges `public` leaves out (RFC 6890 and its updates). */
const SPECIAL_V4 = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4'];
// IPv4-mapped addresses (::ffff:0:0/96) are checked as their IPv4 (unmapped): BlockList would match every IPv4 address against that range.
const SPECIAL_V6 = ['::/128', '::1/128', '64:ff9b::/96', '64:ff9b:1::/48', '100::/64', '2001::/23', '2001:db8::/32', '2002::/16', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8'];

export class NetworksError extends Error {
  override readonly name = 'NetworksError';
}

function addRange(list: BlockList, cidr: string): void {
  const slash = cidr.lastIndexOf('/');
  const address = slash < 0 ? cidr : cidr.slice(0, slash);
  const family = isIP(address);
  if (family === 0) throw new NetworksError(`${cidr} is not an address or CIDR range`);
  const max = family === 4 ? 32 : 128;
  const prefix = slash < 0 ? max : Number(cidr.slice(slash + 1));
  if (!/^\d{1,3}$/.test(slash < 0 ? String(max) : cidr.slice(slash + 1)) || prefix > max) throw new NetworksError(`${cidr} has a prefix length outside 0-${max}`);
  list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
}

function rangesOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) addRange(list, cidr);
  return list;
}

const special = rangesOf([...SPECIAL_V4, ...SPECIAL_V6]);

/** The IPv4 address an IPv4-mapped IPv6 address stands for, else the address as given. */
export function unmapped(address: string): string {
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (dotted) return dotted[1]!;
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return address;
  const [high, low] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

function familyOf(address: string): 'ipv4' | 'ipv6' | undefined {
  const family = isIP(address);
  return family === 4 ? 'ipv4' : family === 6 ? 'ipv6' : undefined;
}

export function parseAllowedNetworks(spec: string): AllowedNetworks {
  const entries = spec.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length === 0) throw new NetworksError('lists no range');
  const publicAllowed = entries.includes('public');
  const listed = rangesOf(entries.filter((entry) => entry !== 'public'));
  return {
    spec,
    allows(given) {
      const address = unmapped(given);
      const family = familyOf(address);
      if (!family) return false;
      if (listed.check(address, family)) return true;
      return publicAllowed && !special.check(address, family);
    },
  };
}
