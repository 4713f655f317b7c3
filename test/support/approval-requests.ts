import type { TestGateway } from './gateway.js';
import { waitFor } from './wire.js';

/** An approval request as GET .../approvals lists it (the members tests read). */
export interface ApprovalRequest {
  readonly id: string;
  readonly status: string;
  readonly sql: string;
  readonly hold_rule: string;
  readonly hold_reason: string;
}

/** The credential's pending request for exactly `sql`, once the proxy has recorded it (within 10 s). */
export async function pendingRequest(gateway: TestGateway, credentialId: string, sql: string): Promise<ApprovalRequest> {
  const list = async (): Promise<ApprovalRequest[]> =>
    ((await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/approvals?page_size=100&credential_id=${credentialId}` })).json() as { approvals: ApprovalRequest[] }).approvals;
  let found: ApprovalRequest | undefined;
  await waitFor(async () => (found = (await list()).find((a) => a.sql === sql && a.status === 'pending')) !== undefined, 10_000, `a pending request for ${sql}`);
  return found!;
}
