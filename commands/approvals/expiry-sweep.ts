import type pg from 'pg';
import type { ApprovalRow } from '../../projections/approvals.js';
import { evolveApproval } from '../../projections/approvals.js';
import { approvalsPastExpiry } from '../../queries/approvals.js';
import type { EventStore } from '../../src/store/port.js';
import { DomainError } from '../domain-error.js';
import { handle } from '../handle.js';
import { approval, approvalStream } from './approval.js';

/**
 * Records ApprovalExpired for each pending request past its expires_at at `now`, at its expires_at
 * (event time: a rebuild folds the same rows whenever the sweep ran). Candidates come from the read
 * model, each decided on its own stream, so a request decided meanwhile, a second run or two at once
 * append nothing more. `expired` hears each request this run expired. Returns how many.
 */
export async function sweepExpiredApprovals(store: Pick<EventStore, 'readStream' | 'append'>, pool: pg.Pool, now: Date, expired: (row: ApprovalRow) => void): Promise<number> {
  let recorded = 0;
  for (const approvalId of await approvalsPastExpiry(pool, now)) {
    try {
      const result = await handle(store, approvalStream(approvalId), approval, { kind: 'expire' }, { correlationId: `approval-expiry-${now.toISOString()}`, actor: 'system:approval-expiry', now: () => now });
      if (result.recorded.length === 0) continue;
      recorded += result.recorded.length;
      const row = (await store.readStream(approvalStream(approvalId))).reduce<ApprovalRow | undefined>((r, event) => evolveApproval(r, event) ?? undefined, undefined);
      if (row) expired(row);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
    }
  }
  return recorded;
}
