import { timingSafeEqual } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';

/** The TXT record a domain's owner publishes to prove it: `_pgward.<domain>`. */
export function verificationRecordName(domain: string): string {
  return `_pgward.${domain}`;
}

/** PGWARD_DNS_SERVERS: comma-separated `address` or `address:port` (`[v6]:port`); throws on anything else. */
export function parseDnsServers(spec: string): string[] {
  const servers = spec.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (servers.length === 0) throw new Error('expected at least one server');
  for (const server of servers) {
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+))(?::(\d{1,5}))?$/.exec(server) ?? (isIP(server) === 6 ? [server, server] : null);
    const address = match?.[1] ?? match?.[2];
    const port = match?.[3] === undefined ? 53 : Number(match[3]);
    if (!match || !address || isIP(address) === 0 || port < 1 || port > 65_535) throw new Error(`${JSON.stringify(server)} is not an IP address with an optional port`);
  }
  return servers;
}

export type TxtLookup =
  | { readonly found: true; readonly recordName: string }
  | { readonly found: false; readonly recordName: string; readonly why: string };

const sameText = (a: string, b: string): boolean => {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * Looks up `_pgward.<domain>` TXT and says whether one of its records is exactly `token` (a record
 * split in several strings counts joined). Asks `servers` when given, else the system's resolvers.
 */
export async function findVerificationRecord(domain: string, token: string, servers: readonly string[] | undefined, timeoutMs = 3_000): Promise<TxtLookup> {
  const recordName = verificationRecordName(domain);
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  if (servers && servers.length > 0) resolver.setServers(servers);
  let records: string[][];
  try {
    records = await resolver.resolveTxt(recordName);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOTFOUND' || code === 'ENODATA'
        ? `no TXT record ${recordName} was found`
        : `the DNS lookup of ${recordName} failed (${code ?? (error as Error).message})`;
    return { found: false, recordName, why };
  }
  const values = records.map((chunks) => chunks.join(''));
  if (values.some((value) => sameText(value, token))) return { found: true, recordName };
  return { found: false, recordName, why: `${recordName} has ${values.length} TXT record${values.length === 1 ? '' : 's'}, none of them the domain's dns_verification_token` };
}
