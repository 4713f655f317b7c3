import { z } from 'zod';
import { structuredResult } from '../../tool.js';
import type { AgentTool } from '../context.js';
import { CredentialSummary, credentialSummary, PolicySummary, policySummary } from '../permissions.js';

export const MyPermissionsInput = z.strictObject({});

export const myPermissions: AgentTool<typeof MyPermissionsInput> = {
  name: 'my_permissions',
  title: 'Your credential and policy',
  description: 'Your credential (status, expiry) and the policy profile that governs it on MCP and on the Postgres wire alike: read-only, allowed and denied tables, allowed and denied statement kinds, migration safety, masked columns, row cap, budgets, approvals. policy is null when the profile is gone, and then every statement is refused.',
  inputSchema: MyPermissionsInput,
  outputSchema: z.object({ credential: CredentialSummary, policy: PolicySummary.nullable() }),
  annotations: { title: 'Your credential and policy', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler(_args, { credential, policy, honeytokens }) {
    return structuredResult({ credential: credentialSummary(credential), policy: policy ? policySummary(policy, honeytokens.canariesOf(policy)) : null });
  },
};
