import { CidrError, contains, parseAddress, parseCidrList, type Cidr } from '../net/cidr.js';

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
const SPECIAL_V6 = ['::/128', '::1/128', '64:ff9b::/96', '64:ff9b:1::/48', '100::/64', '2001::/23', '2001:db8::/32', '2002::/16', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8'];

export class NetworksError extends Error {
  override readonly name = 'NetworksError';
}

function rangesOf(cidrs: readonly string[]): Cidr[] {
  if (cidrs.length === 0) return [];
  try {
    return parseCidrList(cidrs.join(','));
  } catch (error) {
    throw error instanceof CidrError ? new NetworksError(error.message) : error;
  }
}

// IPv4-mapped addresses are parsed as their IPv4 (src/net/cidr.ts), so they meet the IPv4 ranges.
const special = rangesOf([...SPECIAL_V4, ...SPECIAL_V6]);

export function parseAllowedNetworks(spec: string): AllowedNetworks {
  const entries = spec.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length === 0) throw new NetworksError('lists no range');
  const publicAllowed = entries.includes('public');
  const listed = rangesOf(entries.filter((entry) => entry !== 'public'));
  return {
    spec,
    allows(given) {
      const address = parseAddress(given);
      if (!address) return false;
      if (listed.some((range) => contains(range, address))) return true;
      return publicAllowed && !special.some((range) => contains(range, address));
    },
  };
}
