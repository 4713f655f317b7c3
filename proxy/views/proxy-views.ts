import { approvalIdOf, evolveApproval, type ApprovalRow } from '../../projections/approvals.js';
import { branchIdOf, evolveBranch, type BranchRow } from '../../projections/branches.js';
import { cacheControlsDatabaseOf, evolveCacheControls, type CacheControlsRow } from '../../projections/cache-controls.js';
import { evolveCredential, type CredentialRow } from '../../projections/credentials.js';
import { databaseIdOf, evolveDatabase, evolveReplica, replicaIdOf, type DatabaseRow, type ReplicaRow } from '../../projections/databases.js';
import { evolveHoneytoken, honeytokenIdOf, type HoneytokenRow } from '../../projections/honeytokens.js';
import { evolveIpRules, ipRulesProjectOf, type IpRulesRow } from '../../projections/ip-rules.js';
import { evolveOrganization, type OrganizationRow } from '../../projections/organizations.js';
import { evolvePolicy, type PolicyRow } from '../../projections/policies.js';
import { evolveProject, type ProjectRow } from '../../projections/projects.js';
import type { ProxyStore } from '../../src/store/port.js';
import { LiveView } from './live-view.js';
import { evolvePolicyRoles, type PolicyRoles } from './policy-roles.js';

const afterPrefix = (prefix: string) => (event: { stream: string }) => event.stream.slice(prefix.length);

/** A request a wire session may still wait on or run, or a restart must end: pending, or approved and not yet ended. */
export const openOnWire = (row: ApprovalRow): boolean => row.source === 'wire' && (row.status === 'pending' || row.status === 'approved');

/** Each database's result-cache rules and purges (docs/cache.md): the proxy's, and the hosted agent MCP's in the API process. */
export const cacheControlsView = (store: Omit<ProxyStore, 'append'>) =>
  new LiveView<CacheControlsRow>(store, { streamPrefix: 'cache-', keyOf: cacheControlsDatabaseOf, evolve: evolveCacheControls });

/** The databases and their read replicas, as read routing needs them: the proxy's, and the hosted agent MCP's in the API process. */
export const databasesView = (store: Omit<ProxyStore, 'append'>) => new LiveView<DatabaseRow>(store, { streamPrefix: 'project-', keyOf: databaseIdOf, evolve: evolveDatabase });
export const replicasView = (store: Omit<ProxyStore, 'append'>) => new LiveView<ReplicaRow>(store, { streamPrefix: 'project-', keyOf: replicaIdOf, evolve: evolveReplica });

/**
 * The proxy's in-memory views. Each follows only its own control-plane category (`credential-`,
 * `project-`, `policy-`, `honeytoken-`, `org-`, `approval-`, `iprules-`, `branch-`, `cache-`), so audit appends never wake one.
 */
export function proxyViews(store: Omit<ProxyStore, 'append'>) {
  const views = {
    credentials: new LiveView<CredentialRow>(store, { streamPrefix: 'credential-', keyOf: afterPrefix('credential-'), evolve: evolveCredential }),
    databases: databasesView(store),
    replicas: replicasView(store),
    policies: new LiveView<PolicyRow>(store, { streamPrefix: 'policy-', keyOf: afterPrefix('policy-'), evolve: evolvePolicy }),
    honeytokens: new LiveView<HoneytokenRow>(store, { streamPrefix: 'honeytoken-', keyOf: honeytokenIdOf, evolve: evolveHoneytoken }),
    policyRoles: new LiveView<PolicyRoles>(store, { streamPrefix: 'policy-', keyOf: afterPrefix('policy-'), evolve: evolvePolicyRoles }),
    projects: new LiveView<ProjectRow>(store, { streamPrefix: 'project-', keyOf: afterPrefix('project-'), evolve: evolveProject }),
    organizations: new LiveView<OrganizationRow>(store, { streamPrefix: 'org-', keyOf: afterPrefix('org-'), evolve: evolveOrganization }),
    /** Sandbox branches: where write_mode sandbox sessions run (proxy/sandbox.ts). */
    branches: new LiveView<BranchRow>(store, { streamPrefix: 'branch-', keyOf: branchIdOf, evolve: evolveBranch }),
    /** Held statements wait on their request's decision here; only open wire requests are kept, so memory is bounded by the statements held. */
    approvals: new LiveView<ApprovalRow>(store, { streamPrefix: 'approval-', keyOf: approvalIdOf, evolve: evolveApproval, keep: openOnWire }),
    /** Each project's IP rules, checked at every login. */
    ipRules: new LiveView<IpRulesRow>(store, { streamPrefix: 'iprules-', keyOf: ipRulesProjectOf, evolve: evolveIpRules }),
    cacheControls: cacheControlsView(store),
  };
  return { ...views, all: Object.values(views) };
}
