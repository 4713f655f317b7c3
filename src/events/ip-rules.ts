import { z } from 'zod';
import { parseCidr } from '../net/cidr.js';
import { defineEvent } from './envelope.js';
import { ProjectId, text } from './fields.js';

/** Most entries one list (allow or deny) of a project may hold. */
export const MAX_IP_RULE_ENTRIES = 500;

/** Whether `cidr` is written as parseCidr normalises it, as every stored entry is. */
function isCanonical(cidr: string): boolean {
  try {
    return parseCidr(cidr).text === cidr;
  } catch {
    return false;
  }
}

/** One stored entry (spec §2.11 CidrEntry): the normalised range and an optional label. */
export const StoredCidrEntry = z.strictObject({
  cidr: z.string().refine(isCanonical, { message: 'expected a normalised CIDR range' }),
  label: text(100).optional(),
});
export type StoredCidrEntry = z.infer<typeof StoredCidrEntry>;

/**
 * A project's IP rules were replaced (stream `iprules-<project_id>`): connections from an address
 * in a deny entry are refused, and, when the allow list has entries, so is every address in none.
 */
export const IpRulesSet = defineEvent(
  'IpRulesSet',
  1,
  z.strictObject({
    project_id: ProjectId,
    allow: z.array(StoredCidrEntry).max(MAX_IP_RULE_ENTRIES),
    deny: z.array(StoredCidrEntry).max(MAX_IP_RULE_ENTRIES),
  }),
);
export type IpRulesSet = z.infer<typeof IpRulesSet.schema>;
