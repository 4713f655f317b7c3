import { displayPrefix, newSecret, sha256Hex } from '../../src/crypto/tokens.js';
import type { Plan } from '../../src/events/organizations.js';
import { newId } from '../../src/ids.js';
import { plans } from '../../src/plans.js';
import type { EventStore } from '../../src/store/port.js';
import { handle, type CommandContext } from '../handle.js';
import { organization } from './organization.js';

export const ORG_KEY_PREFIX = 'pgw_org_';

export interface CreatedOrganization {
  readonly org_id: string;
  /** The owner's API key, shown once; only its hash is stored. */
  readonly api_key: string;
}

export async function createOrganization(
  store: Pick<EventStore, 'readStream' | 'append'>,
  input: { name: string; plan: Plan; features?: string[] },
  context: CommandContext,
): Promise<CreatedOrganization> {
  const orgId = newId('org_');
  const apiKey = newSecret(ORG_KEY_PREFIX);
  await handle(
    store,
    `org-${orgId}`,
    organization,
    {
      kind: 'create',
      orgId,
      name: input.name,
      plan: input.plan,
      features: input.features ?? [...plans[input.plan].defaultFeatures],
      owner: { key: { keyId: newId('key_'), name: 'owner (bootstrap)', role: 'owner', prefix: displayPrefix(apiKey), tokenHash: sha256Hex(apiKey) } },
    },
    context,
  );
  return { org_id: orgId, api_key: apiKey };
}

/** A person's own organization, created at their sign-up with them as its owner and no API key. */
export async function createOrganizationForUser(
  store: Pick<EventStore, 'readStream' | 'append'>,
  input: { name: string; plan: Plan; userId: string },
  context: CommandContext,
): Promise<string> {
  const orgId = newId('org_');
  await handle(store, `org-${orgId}`, organization, { kind: 'create', orgId, name: input.name, plan: input.plan, features: [...plans[input.plan].defaultFeatures], owner: { userId: input.userId } }, context);
  return orgId;
}
