import { z } from 'zod';
import { findApproval } from '../../../../queries/approvals.js';
import { ApprovalId } from '../../../events/fields.js';
import { structuredResult, toolError } from '../../tool.js';
import { approvalView } from '../approval.js';
import type { AgentTool } from '../context.js';

export const ApprovalStatusInput = z.strictObject({ approval_id: ApprovalId.describe('The apr_ id a held query answered with') });

export const approvalStatus: AgentTool<typeof ApprovalStatusInput> = {
  name: 'approval_status',
  title: 'See a held statement’s decision',
  description:
    'The status of an approval request of yours (a statement your policy held): pending, approved (call query again with the same sql and params to run it, once), rejected (with the reviewer’s reason), expired, executed (with rows_affected) or failed.',
  inputSchema: ApprovalStatusInput,
  outputSchema: z.object({
    approval_id: z.string(),
    status: z.enum(['pending', 'approved', 'rejected', 'expired', 'executed', 'failed']),
    expires_at: z.string(),
    estimated_rows: z.int().nullable(),
    estimate_method: z.enum(['trial', 'plan']).nullable().describe('trial: the exact rows of a run rolled back; plan: the planner’s estimate'),
    held_because: z.string(),
    decided_by: z.string().nullable(),
    reason: z.string(),
    rows_affected: z.int().nullable(),
  }),
  annotations: { title: 'See a held statement’s decision', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ approval_id }, context) {
    const row = await findApproval(context.services.pool, context.credential.project_id, approval_id);
    // Another credential's request answers as an unknown one.
    if (!row || row.credential_id !== context.credential.credential_id) return toolError(`No approval request ${approval_id} of yours; the id comes from a query your policy held.`);
    return structuredResult(approvalView(row));
  },
};
