import type { BranchRow } from '../projections/branches.js';
import type { PolicyRow } from '../projections/policies.js';

/**
 * The branch a session under `policy` runs on: under write_mode sandbox, the newest ready branch
 * of the credential's database; else none (the database itself). A sandboxed session with no ready
 * branch runs on the database with its writes refused (write_mode.sandbox_unavailable). Pure.
 */
export function sandboxBranchOf(policy: Pick<PolicyRow, 'write_mode' | 'read_only'> | undefined, branches: Iterable<BranchRow>, databaseId: string): BranchRow | undefined {
  if (policy?.write_mode !== 'sandbox' || policy.read_only) return undefined;
  let newest: BranchRow | undefined;
  for (const branch of branches) {
    if (branch.database_id !== databaseId || branch.status !== 'ready') continue;
    if (!newest || branch.created_at > newest.created_at || (branch.created_at === newest.created_at && branch.branch_id > newest.branch_id)) newest = branch;
  }
  return newest;
}
