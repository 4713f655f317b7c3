import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { policy, WRITE_CAPABLE } from '../../../commands/policies/policy.js';
import { sealSecret } from '../../crypto/seal.js';
import { policyRoleName, provisionPolicyRole, ProvisionError, type ProvisionErrorCode } from '../../provisioning/policy-role.js';
import { Problem, type ProblemCode } from '../problem.js';
import { databaseFromStream, upstreamClientConfig } from './databases.js';
import { visiblePolicy } from './policies.js';
import { errorResponses, execute, IdParam, requireRole, type Api, type ApiDeps } from './support.js';

const PolicyParams = z.object({ project_id: IdParam('project id'), policy_id: IdParam('policy id') });

const ProvisionPolicyRoleRequest = z
  .strictObject({ database_id: IdParam('database of the project the role is made on') })
  .meta({ title: 'ProvisionPolicyRoleRequest' });

const PolicyRole = z
  .object({
    policy_id: z.string(),
    database_id: z.string(),
    role_name: z.string().describe('The upstream login role the proxy now uses for this policy’s sessions on the database'),
    tables: z.array(z.string()).describe('Every table the role may SELECT, schema-qualified'),
    missing_tables: z.array(z.string()).describe('Allowed tables that do not exist upstream: nothing was granted for them; provision again once they exist'),
  })
  .meta({ id: 'PolicyRole' });

const PROBLEM_OF: Readonly<Record<ProvisionErrorCode, ProblemCode>> = {
  CANNOT_CREATE_ROLES: 'INVALID_STATE',
  CANNOT_GRANT: 'INVALID_STATE',
  UNREACHABLE: 'BAD_GATEWAY',
};

export function policyRoleRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/projects/:project_id/policies/:policy_id/provision',
    {
      schema: {
        operationId: 'provisionPolicyRole',
        summary: 'Enforce a read-only policy in the database too: make an upstream role that may only SELECT the allowed tables',
        description:
          'Needs a registered database user that can create roles (CREATEROLE) and grant SELECT on the tables; otherwise 409 INVALID_STATE says which. ' +
          'The role logs in with a generated password (stored sealed), has default_transaction_read_only on, and runs every later session of the policy on ' +
          'that database. Provisioning again replaces its password and grants: do it after changing allowed_tables or creating tables.',
        tags: ['policies'],
        params: PolicyParams,
        body: ProvisionPolicyRoleRequest,
        response: { 200: PolicyRole, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'CONFLICT', 'BAD_GATEWAY', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'admin');
      const { project_id: projectId, policy_id: policyId } = request.params;
      const current = await visiblePolicy(deps, caller.orgId, projectId, policyId);
      if (!current.read_only) throw new Problem('INVALID_STATE', WRITE_CAPABLE);
      const databaseId = request.body.database_id;
      const database = await databaseFromStream(deps, projectId, databaseId);
      if (!database) {
        throw new Problem('INVALID_INPUT', `database ${databaseId} not found in project ${projectId}`, { errors: [{ field: 'database_id', message: 'names no database of this project' }] });
      }
      const roleName = policyRoleName(policyId, databaseId);
      const password = randomBytes(32).toString('base64url');
      const made = await provisionPolicyRole(upstreamClientConfig(database, deps, 'pgward-provision'), {
        roleName,
        password,
        allowedTables: current.allowed_tables,
        comment: `pgward: SELECT-only role of policy ${policyId} on database ${databaseId}`,
      }).catch((error: unknown) => {
        throw error instanceof ProvisionError ? new Problem(PROBLEM_OF[error.code], error.message) : error;
      });
      await execute(deps, request, `policy-${policyId}`, policy, {
        kind: 'record-role',
        role: { database_id: databaseId, role_name: roleName, password: sealSecret(password, deps.keyring, roleName), tables: [...made.tables] },
        version: current.version,
      });
      return { policy_id: policyId, database_id: databaseId, role_name: roleName, tables: [...made.tables], missing_tables: [...made.missing] };
    },
  );
}
