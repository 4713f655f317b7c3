import type { z } from 'zod';
import { LiveHoneytokens } from '../../../proxy/honeytokens.js';
import { masksWithHash } from '../../../proxy/policy/hash-key.js';
import type { StatementContext } from '../../../proxy/policy/hook.js';
import type { UpstreamCatalog } from '../../../proxy/policy/upstream-catalog.js';
import type { CatalogUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import { upstreamChoice } from '../../../proxy/views/policy-roles.js';
import type { PolicyRow } from '../../../projections/policies.js';
import { findDatabase, listDatabases } from '../../../queries/databases.js';
import { honeytokensById } from '../../../queries/honeytokens.js';
import { upstreamOf } from '../../mcp/agent/route.js';
import type { AgentDatabases } from '../../mcp/agent/upstream.js';
import { Problem } from '../problem.js';
import { CreatePolicyRequest, toEventFields } from './policies.js';
import type { ApiDeps } from './support.js';

/** An inline policy as the row a create would make of it; its id names no stream, so nothing it decides is cached beyond the request. */
export function inlinePolicy(projectId: string, body: z.infer<typeof CreatePolicyRequest>, at: string): PolicyRow {
  return { ...(toEventFields(body) as Omit<PolicyRow, 'policy_id'>), policy_id: 'pol_whatif', project_id: projectId, version: 0, status: 'active', revision: 0, created_at: at, updated_at: at };
}

/** The database named, else the project's only one. */
export async function databaseOf(deps: ApiDeps, projectId: string, named: string | undefined): Promise<string> {
  if (named !== undefined) {
    if (!(await findDatabase(deps.pool, projectId, named))) throw new Problem('NOT_FOUND', `database ${named} not found in project ${projectId}`);
    return named;
  }
  const databases = await listDatabases(deps.pool, projectId, undefined, 2);
  if (databases.length === 1) return databases[0]!.database_id;
  throw new Problem('INVALID_INPUT', `project ${projectId} has ${databases.length === 0 ? 'no database' : 'several databases'}; name the one to decide on in database_id`, {
    errors: [{ field: 'database_id', message: databases.length === 0 ? 'the project has no database' : 'required when the project has several databases' }],
  });
}

/** What a decision that runs nothing needs besides the catalog: the policy's canaries, read from the read model; a trip is only an answer, so it disables nothing. */
export async function whatIfContext(deps: ApiDeps, policy: PolicyRow, protocol: 'simple' | 'extended'): Promise<Omit<StatementContext<null>, 'catalog'>> {
  const rows = policy.honeytokens.length > 0 ? await honeytokensById(deps.pool, policy.project_id, policy.honeytokens) : new Map();
  // The project's key is made here if it has none yet, as saving such a policy would make it.
  const hashKey = masksWithHash(policy) ? await deps.hashKeys.load(policy.project_id) : undefined;
  return { credential: null, policy, protocol, honeytokens: new LiveHoneytokens<null>(rows, () => undefined), ...(hashKey ? { hashKey } : {}) };
}

/** The catalog snapshot of one of the project's databases, read through the pool a saved policy's sessions use (its provisioned role, if any). */
export async function catalogOf(deps: ApiDeps, databases: AgentDatabases, policy: PolicyRow, saved: boolean, databaseId: string): Promise<UpstreamCatalog | CatalogUnavailable> {
  const upstream = saved ? await upstreamOf(deps.store, policy, databaseId) : upstreamChoice(policy, undefined, databaseId);
  return databases.catalog({ database_id: databaseId, project_id: policy.project_id }, upstream);
}
