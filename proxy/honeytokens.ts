import type { CredentialRow } from '../projections/credentials.js';
import type { HoneytokenRow } from '../projections/honeytokens.js';
import type { PolicyRow } from '../projections/policies.js';
import type { Honeytokens } from './policy/hook.js';
import type { Canary } from './policy/rules.js';
import type { LiveView } from './views/live-view.js';

const NO_CANARIES: readonly Canary[] = [];

/**
 * The proxy's honeytokens: a policy's ids resolved through the live view of the project's
 * honeytokens, and a trip of one that says `disable_credential` handed to `disable`.
 */
export class LiveHoneytokens<C = CredentialRow> implements Honeytokens<C> {
  constructor(
    private readonly view: Pick<LiveView<HoneytokenRow>, 'get'>,
    private readonly disable: (credential: C, honeytoken: HoneytokenRow) => void,
  ) {}

  canariesOf(policy: PolicyRow): readonly Canary[] {
    if (policy.honeytokens.length === 0) return NO_CANARIES;
    return policy.honeytokens.flatMap((id) => {
      const row = this.view.get(id);
      return row?.status === 'active' && row.project_id === policy.project_id ? [{ honeytoken_id: id, kind: row.kind, target: row.target }] : [];
    });
  }

  tripped(credential: C, honeytokenId: string): void {
    const row = this.view.get(honeytokenId);
    if (row?.disable_credential) this.disable(credential, row);
  }
}
