import type { StoredCidrEntry } from '../events/ip-rules.js';
import { contains, formatAddress, parseAddress, parseCidr, type Cidr } from './cidr.js';

/** A project's allow and deny lists, as stored. */
export interface IpRuleLists {
  readonly allow: readonly StoredCidrEntry[];
  readonly deny: readonly StoredCidrEntry[];
}

export type IpVerdict = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

const ALLOWED: IpVerdict = { allowed: true };

type Compiled = { readonly entries: readonly { readonly range: Cidr; readonly entry: StoredCidrEntry }[] };

function compile(entries: readonly StoredCidrEntry[]): Compiled {
  return { entries: entries.map((entry) => ({ range: parseCidr(entry.cidr), entry })) };
}

function describe(entry: StoredCidrEntry): string {
  return entry.label === undefined ? entry.cidr : `${entry.cidr} (${entry.label})`;
}

/** Each stored rule set compiled once: the proxy asks at every login. */
const compiled = new WeakMap<IpRuleLists, { allow: Compiled; deny: Compiled }>();

/**
 * Whether a client at `address` may connect under `rules`: deny wins, an empty allow list allows
 * every address, a non-empty one only the addresses in it. An address that cannot be parsed is
 * refused whenever there are rules. The reason is for the audit trail and the operator, not the client.
 */
export function checkAddress(rules: IpRuleLists | undefined, address: string): IpVerdict {
  if (!rules || (rules.allow.length === 0 && rules.deny.length === 0)) return ALLOWED;
  let lists = compiled.get(rules);
  if (!lists) compiled.set(rules, (lists = { allow: compile(rules.allow), deny: compile(rules.deny) }));
  const client = parseAddress(address);
  if (!client) return { allowed: false, reason: `the client address ${JSON.stringify(address)} is not an IP address` };
  const shown = formatAddress(client);
  const denied = lists.deny.entries.find(({ range }) => contains(range, client));
  if (denied) return { allowed: false, reason: `address ${shown} is in deny entry ${describe(denied.entry)}` };
  if (lists.allow.entries.length > 0 && !lists.allow.entries.some(({ range }) => contains(range, client))) {
    return { allowed: false, reason: `address ${shown} is in no allow entry` };
  }
  return ALLOWED;
}

/**
 * A connection of a credential must pass its project's rules and the credential's own (either may
 * be empty): the first refusal, the credential's said to be its own.
 */
export function checkCredentialAddress(projectRules: IpRuleLists | undefined, credentialRules: IpRuleLists | undefined, address: string): IpVerdict {
  const project = checkAddress(projectRules, address);
  if (!project.allowed) return project;
  const own = checkAddress(credentialRules, address);
  return own.allowed ? own : { allowed: false, reason: `${own.reason} of the credential’s own IP rules` };
}
