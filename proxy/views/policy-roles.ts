import { decodeWith } from '../../src/events/envelope.js';
import type { SealedSecret } from '../../src/events/fields.js';
import { PolicyProfileDeleted, PolicyRoleProvisioned } from '../../src/events/policies.js';
import type { RecordedEvent } from '../../src/store/port.js';

/** An upstream login role provisioned for a policy on one database (its password sealed with the role name as associated data). */
export interface PolicyRole {
  readonly role_name: string;
  readonly password: SealedSecret;
  /** The stream revision that recorded it: a new provisioning means a new pool. */
  readonly revision: number;
}

/** A policy's provisioned roles by database id. */
export type PolicyRoles = Readonly<Record<string, PolicyRole>>;

/** Which of a database's pools a credential's statements use: read-only for a read-only policy (or a missing one), as the policy's provisioned role when it has one there. */
export interface UpstreamChoice {
  readonly readOnly: boolean;
  readonly role: PolicyRole | undefined;
}

export function upstreamChoice(policy: { readonly read_only: boolean } | undefined, roles: PolicyRoles | undefined, databaseId: string): UpstreamChoice {
  const readOnly = policy?.read_only ?? true;
  return { readOnly, role: readOnly ? roles?.[databaseId] : undefined };
}

/** Fold step of the proxy's view of provisioned roles, keyed by policy id (streams `policy-<id>`). */
export function evolvePolicyRoles(row: PolicyRoles | undefined, event: RecordedEvent): PolicyRoles | null {
  switch (event.type) {
    case PolicyRoleProvisioned.type: {
      const { data } = decodeWith(PolicyRoleProvisioned, event);
      return { ...row, [data.database_id]: { role_name: data.role_name, password: data.password, revision: event.revision } };
    }
    case PolicyProfileDeleted.type:
      return null;
    default:
      return row ?? null;
  }
}
