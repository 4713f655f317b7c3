/**
 * The acting organization (docs/identity.md#the-acting-organization): a person may belong to
 * several organizations, and each request acts in one of them. A credential of an organization (an
 * API key, an external JWT) has exactly one; a person's session or token acts in the organization
 * the request names, else a default, and always with the role their membership has now.
 */
import { Problem } from '../http/problem.js';

export interface Membership {
  readonly orgId: string;
  readonly role: string;
}

/**
 * Which of a person's memberships (oldest first) a request acts with: the organization it names
 * (404 when the person is not a member, exactly as for a nonexistent one), else the one their
 * token carries (403 once they left it), else their first; undefined for a person in none.
 */
export function actingMembership(memberships: readonly Membership[], named: string | undefined, carried: string | undefined): Membership | undefined {
  const of = (orgId: string) => memberships.find((m) => m.orgId === orgId);
  if (named !== undefined) {
    const membership = of(named);
    if (!membership) throw new Problem('NOT_FOUND', `organization ${named} not found`);
    return membership;
  }
  if (carried !== undefined) {
    const membership = of(carried);
    if (!membership) throw new Problem('FORBIDDEN', `the person this token acts for is no longer a member of organization ${carried}, the one it was issued for: name another with the X-Pgward-Org header or authorize again`);
    return membership;
  }
  return memberships[0];
}
