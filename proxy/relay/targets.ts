import type { BranchRow } from '../../projections/branches.js';
import type { UpstreamHandle, Upstreams } from '../upstreams.js';
import type { LiveView } from '../views/live-view.js';
import type { PolicyRole, PolicyRoles } from '../views/policy-roles.js';
import type { RelayTarget } from './handshake.js';

/** The peer's own pool for a link's target, from its own views: undefined when the database, the role or the branch is not one it knows so. */
export function relayTargets(
  upstreams: Pick<Upstreams, 'for'>,
  views: { readonly policyRoles: Pick<LiveView<PolicyRoles>, 'values'>; readonly branches: Pick<LiveView<BranchRow>, 'get'> },
): (target: RelayTarget) => Promise<UpstreamHandle | undefined> {
  const roleNamed = (databaseId: string, name: string): PolicyRole | undefined => {
    for (const roles of views.policyRoles.values()) {
      const role = roles[databaseId];
      if (role?.role_name === name) return role;
    }
    return undefined;
  };
  return async (target) => {
    const role = target.role === '' ? undefined : roleNamed(target.database_id, target.role);
    if (target.role !== '' && !role) return undefined;
    const branch = target.branch === '' ? undefined : views.branches.get(target.branch);
    if (target.branch !== '' && (branch?.database_id !== target.database_id || branch.status !== 'ready')) return undefined;
    const handle = await upstreams.for(target.database_id, target.project_id, target.read_only, role, branch);
    return handle?.database.project_id === target.project_id ? handle : undefined;
  };
}
