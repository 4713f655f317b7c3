/**
 * The proxy's live view of approval requests is bounded: it keeps the wire requests a session may
 * still wait on or run (pending, approved) and forgets each once it is settled (rejected, expired,
 * executed, failed), and MCP requests altogether, while its listeners still hear every change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approval, approvalStream, type ApprovalCommand } from '../../commands/approvals/approval.js';
import { handle } from '../../commands/handle.js';
import type { ApprovalRow } from '../../projections/approvals.js';
import { awaitDecision } from '../../proxy/approval-hold.js';
import { proxyViews } from '../../proxy/views/proxy-views.js';
import { newId } from '../../src/ids.js';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/store/postgres.js';
import { approvalRequest } from '../support/approval-request.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';

let database: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  database = await freshDatabase('approval_view');
  store = await createPostgresEventStore(database.url);
});
afterAll(async () => {
  await store?.close();
  await database?.drop();
});

const request = (approvalId: string, source: 'wire' | 'mcp') =>
  approvalRequest({ approval_id: approvalId, source, estimate_method: 'trial' as const, expires_at: new Date(Date.now() + 3_600_000).toISOString() });

const on = (approvalId: string, command: ApprovalCommand) => handle(store, approvalStream(approvalId), approval, command, { correlationId: 'test', actor: 'user:test' });

async function waitFor(probe: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('the proxy’s view of approval requests', () => {
  it('keeps open wire requests only, forgets each once settled, and still tells its listeners', async () => {
    const { approvals } = proxyViews(store);
    await approvals.start();
    const heard: ApprovalRow[] = [];
    approvals.onChange((_key, _before, after) => after && heard.push(after));
    try {
      const wire = Array.from({ length: 40 }, () => newId('apr_'));
      const mcp = Array.from({ length: 5 }, () => newId('apr_'));
      for (const id of wire) await on(id, { kind: 'request', request: request(id, 'wire') });
      for (const id of mcp) await on(id, { kind: 'request', request: request(id, 'mcp') });
      await waitFor(() => heard.length === 45, 'every request heard');
      expect(approvals.size).toBe(40);

      const decide = { decidedBy: 'user:u1', reason: '' };
      for (const id of wire.slice(0, 10)) await on(id, { kind: 'reject', ...decide });
      for (const id of wire.slice(10, 20)) await on(id, { kind: 'fail', sqlstate: '57014', message: 'cancelled' });
      for (const id of wire.slice(20, 30)) {
        await on(id, { kind: 'approve', ...decide });
        await on(id, { kind: 'start', executor: 'wire:px.1.1' });
        await on(id, { kind: 'executed', rowsAffected: 1 });
      }
      // Approved and taken, not yet ended: still kept (a restart must end it).
      await on(wire[30]!, { kind: 'approve', ...decide });
      await on(wire[30]!, { kind: 'start', executor: 'wire:px.1.1' });
      await waitFor(() => heard.filter((row) => row.approval_id === wire[29] && row.status === 'executed').length === 1, 'the last execution heard');
      await waitFor(() => heard.some((row) => row.approval_id === wire[30] && row.started), 'the last start heard');

      expect(heard.filter((row) => row.status === 'rejected')).toHaveLength(10);
      expect(approvals.size).toBe(10);
      expect([...approvals.values()].map((row) => row.approval_id).sort()).toEqual(wire.slice(30).sort());
      expect(approvals.get(wire[0]!)).toBeUndefined();
      // What the view forgot is still read from its stream.
      expect(await approvals.getOrRead(wire[0]!, approvalStream(wire[0]!))).toMatchObject({ status: 'rejected' });

      // A view started now catches up to the same ten.
      const later = proxyViews(store).approvals;
      await later.start();
      expect(later.size).toBe(10);
      await later.stop();
    } finally {
      await approvals.stop();
    }
  });

  it('a wait whose end came before it began (the session ended meanwhile) ends at once; the request stays pending for its end to be recorded', async () => {
    const { approvals } = proxyViews(store);
    await approvals.start();
    try {
      const id = newId('apr_');
      const held = request(id, 'wire');
      await on(id, { kind: 'request', request: held });
      const waited = awaitDecision({ store, approvals }, held, AbortSignal.abort('closed'), () => undefined);
      const outcome = await Promise.race([waited, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2_000))]);
      expect(outcome).toBeUndefined();
      expect(await approvals.getOrRead(id, approvalStream(id))).toMatchObject({ status: 'pending' });
    } finally {
      await approvals.stop();
    }
  });
});
