import { describe, expect, it } from 'vitest';
import { approval, type ApprovalCommand, type ApprovalState } from '../../commands/approvals/approval.js';
import { bindingOf } from '../../commands/approvals/binding.js';
import { DomainError } from '../../commands/domain-error.js';
import type { Emit } from '../../commands/handle.js';
import { evolveApproval, type ApprovalRow } from '../../projections/approvals.js';
import { lostToRestart } from '../../proxy/approval-hold.js';
import { decodeEvent, type CatalogEvent } from '../../src/events/catalog.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { RecordedEvent } from '../../src/store/port.js';
import { approvalRequest } from '../support/approval-request.js';

const ID = 'apr_aaaaaaaaaaaaaaaaaaaaaaaaaa';
const request = approvalRequest({ approval_id: ID });
const BEFORE = '2026-01-01T00:30:00.000Z';
const AFTER = '2026-01-01T01:00:00.000Z';

/** Runs commands through decide and evolve as the handler does, recording each as the store would. */
function run(commands: readonly (readonly [ApprovalCommand, string])[]): { state: ApprovalState; recorded: RecordedEvent[]; last: Emit[] | DomainError } {
  let state = approval.initial;
  const recorded: RecordedEvent[] = [];
  let last: Emit[] | DomainError = [];
  for (const [command, at] of commands) {
    last = approval.decide(state, command, at);
    if (last instanceof DomainError) continue;
    for (const e of last) {
      const encoded = encodeEvent(e.definition, e.data, { event_id: crypto.randomUUID(), correlation_id: 'c', actor: 'user:u1', at });
      const event = { ...encoded, stream: `approval-${ID}`, revision: recorded.length, position: BigInt(recorded.length + 1) };
      recorded.push(event);
      state = approval.evolve(state, decodeEvent(event) as CatalogEvent);
    }
  }
  return { state, recorded, last };
}

const fold = (recorded: readonly RecordedEvent[]): ApprovalRow | undefined => recorded.reduce<ApprovalRow | undefined>((row, event) => evolveApproval(row, event) ?? undefined, undefined);

describe('approval aggregate', () => {
  it('a pending request is approved once; deciding again is INVALID_STATE and appends nothing', () => {
    const approve = { kind: 'approve', decidedBy: 'api_key:key_1', reason: 'ticket 12' } as const;
    const { recorded, last } = run([[{ kind: 'request', request }, BEFORE], [approve, BEFORE], [{ kind: 'reject', decidedBy: 'user:u2', reason: '' }, BEFORE]]);
    expect(recorded.map((e) => e.type)).toEqual(['ApprovalRequested.v1', 'ApprovalApproved.v1']);
    expect(last).toBeInstanceOf(DomainError);
    expect(last).toMatchObject({ code: 'INVALID_STATE', message: `approval request ${ID} was approved already; it cannot be rejected` });
    expect(fold(recorded)).toMatchObject({ status: 'approved', decided_by: 'api_key:key_1', reason: 'ticket 12', decided_at: BEFORE, revision: 1 });
  });

  it('a rejection carries its reason; a request cannot be decided at or after its expiry, and only then expires', () => {
    const rejected = run([[{ kind: 'request', request }, BEFORE], [{ kind: 'reject', decidedBy: 'user:u2', reason: 'not on a Friday' }, BEFORE]]);
    expect(fold(rejected.recorded)).toMatchObject({ status: 'rejected', decided_by: 'user:u2', reason: 'not on a Friday' });
    const early = run([[{ kind: 'request', request }, BEFORE], [{ kind: 'expire' }, BEFORE]]);
    expect(early.last).toMatchObject({ code: 'INVALID_STATE' });
    const late = run([[{ kind: 'request', request }, BEFORE], [{ kind: 'approve', decidedBy: 'user:u2', reason: '' }, AFTER]]);
    expect(late.last).toMatchObject({ code: 'INVALID_STATE', message: expect.stringContaining('expired at') });
    const expired = run([[{ kind: 'request', request }, BEFORE], [{ kind: 'expire' }, '2026-01-02T00:00:00.000Z'], [{ kind: 'expire' }, '2026-01-03T00:00:00.000Z']]);
    expect(expired.recorded.map((e) => e.type)).toEqual(['ApprovalRequested.v1', 'ApprovalExpired.v1']);
    // Event time: the expiry is recorded at expires_at, whenever the sweep ran.
    expect(fold(expired.recorded)).toMatchObject({ status: 'expired', reason: `expired undecided at ${request.expires_at}` });
  });

  it('an approved request is taken by one executor only, then executed; a second take is INVALID_STATE', () => {
    const { recorded, last } = run([
      [{ kind: 'request', request }, BEFORE],
      [{ kind: 'approve', decidedBy: 'user:u1', reason: '' }, BEFORE],
      [{ kind: 'start', executor: 'wire:s1' }, BEFORE],
      [{ kind: 'start', executor: 'mcp:s2' }, BEFORE],
    ]);
    expect(last).toMatchObject({ code: 'INVALID_STATE' });
    const done = run([
      [{ kind: 'request', request }, BEFORE],
      [{ kind: 'approve', decidedBy: 'user:u1', reason: '' }, BEFORE],
      [{ kind: 'start', executor: 'wire:s1' }, BEFORE],
      [{ kind: 'executed', rowsAffected: 1 }, BEFORE],
      [{ kind: 'fail', sqlstate: '57P01', message: 'x' }, BEFORE],
    ]);
    expect(recorded.map((e) => e.type)).toEqual(['ApprovalRequested.v1', 'ApprovalApproved.v1', 'ApprovalExecutionStarted.v1']);
    expect(fold(recorded)).toMatchObject({ status: 'approved', started: true });
    expect(fold(done.recorded)).toMatchObject({ status: 'executed', rows_affected: '1' });
    expect(done.last).toMatchObject({ code: 'INVALID_STATE' });
  });

  it('a pending or approved request whose wait ends fails with the reason; a second request under one id is refused', () => {
    const { recorded } = run([[{ kind: 'request', request }, BEFORE], [{ kind: 'fail', sqlstate: '57P01', message: 'the credential was disabled' }, BEFORE]]);
    expect(fold(recorded)).toMatchObject({ status: 'failed', reason: 'failed (57P01): the credential was disabled' });
    expect(run([[{ kind: 'request', request }, BEFORE], [{ kind: 'request', request }, BEFORE]]).last).toMatchObject({ code: 'RESOURCE_EXISTS' });
    expect(approval.decide(approval.initial, { kind: 'approve', decidedBy: 'u', reason: '' }, BEFORE)).toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('approval binding', () => {
  const facts = { sql: 'update orders set amount = 0 where id = 1', params: [], credentialId: 'agt_1', policyId: 'pol_1', policyVersion: 2 };
  it('changes with one byte of the statement, a parameter, the credential or the policy version', () => {
    const base = bindingOf(facts);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(bindingOf({ ...facts })).toBe(base);
    for (const other of [
      { ...facts, sql: 'update orders set amount = 0 where id = 1 ' },
      { ...facts, sql: 'update orders set amount = 0 where id = 2' },
      { ...facts, params: ['1'] },
      { ...facts, credentialId: 'agt_2' },
      { ...facts, policyVersion: 3 },
      { ...facts, policyId: 'pol_2' },
    ]) {
      expect(bindingOf(other)).not.toBe(base);
    }
  });
});

describe('held statements lost to a restart', () => {
  const row = (over: Partial<ApprovalRow>): ApprovalRow => ({ ...(fold(run([[{ kind: 'request', request }, BEFORE]]).recorded) as ApprovalRow), ...over });
  it('fails the pending and approved requests of this proxy’s earlier runs only, saying whether it had started', () => {
    const rows = [
      row({ approval_id: 'apr_old_pending', session_id: 'px-1.100.4' }),
      row({ approval_id: 'apr_old_running', session_id: 'px-1.100.5', status: 'approved', started: true }),
      row({ approval_id: 'apr_now', session_id: 'px-1.200.1' }),
      row({ approval_id: 'apr_other_proxy', session_id: 'px-10.100.1' }),
      row({ approval_id: 'apr_dotted_proxy', session_id: 'px-1.b.100.1' }),
      row({ approval_id: 'apr_mcp', session_id: 'px-1.100.6', source: 'mcp' }),
      row({ approval_id: 'apr_done', session_id: 'px-1.100.7', status: 'executed' }),
      row({ approval_id: 'apr_rejected', session_id: 'px-1.100.8', status: 'rejected' }),
    ];
    expect(lostToRestart(rows, { proxyId: 'px-1', bootEpoch: 200 })).toEqual([
      { approvalId: 'apr_old_pending', message: 'the proxy restarted while the statement was held; the session that held it was lost, and the statement did not run' },
      { approvalId: 'apr_old_running', message: 'the proxy restarted while the approved statement ran; its end was not seen, and it will not run again' },
    ]);
  });
});
