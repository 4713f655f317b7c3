import { z } from 'zod';
import { ProblemBody } from '../problem.js';
import type { Api } from './support.js';

const Operation = z.object({ operation_id: z.string(), method: z.string(), path: z.string() });

/** Discovery metadata of the agent-credential path (spec §5.1 point 8). */
export const agentCredentialDiscovery = {
  identity_types_supported: ['agent', 'human'],
  credential_types_supported: ['bearer', 'scram-sha-256'],
  feature_flag: 'agent-gateway',
  registration: { operation_id: 'registerAgentCredential', method: 'POST', path: '/v1/projects/{project_id}/agents' },
  rotation: { operation_id: 'rotateAgentCredential', method: 'POST', path: '/v1/projects/{project_id}/agents/{agent_id}/rotate' },
  kill_switch: { operation_id: 'updateAgentCredential', method: 'PATCH', path: '/v1/projects/{project_id}/agents/{agent_id}' },
  revocation: { operation_id: 'revokeAgentCredential', method: 'DELETE', path: '/v1/projects/{project_id}/agents/{agent_id}' },
  openapi: '/v1/openapi.json',
};

export function discoveryRoutes(app: Api): void {
  app.get(
    '/.well-known/pgward-agent-credentials',
    {
      config: { public: true },
      schema: {
        operationId: 'getAgentCredentialDiscovery',
        summary: 'Discovery metadata of the agent-credential path',
        tags: ['discovery'],
        security: [],
        response: {
          200: z.object({
            identity_types_supported: z.array(z.string()),
            credential_types_supported: z.array(z.string()),
            feature_flag: z.string(),
            registration: Operation,
            rotation: Operation,
            kill_switch: Operation,
            revocation: Operation,
            openapi: z.string(),
          }),
          429: ProblemBody,
          500: ProblemBody,
        },
      },
    },
    async () => agentCredentialDiscovery,
  );
}
