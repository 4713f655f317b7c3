import { describe, expect, it } from 'vitest';
import type { BranchRow } from '../../projections/branches.js';
import { sandboxBranchOf } from '../../proxy/sandbox.js';

const branch = (id: string, over: Partial<BranchRow> = {}): BranchRow => ({
  branch_id: id,
  project_id: 'prj_1',
  database_id: 'db_a',
  name: id,
  database_name: `pgward_branch_${id}`,
  status: 'ready',
  method: 'template',
  failure_reason: null,
  revision: 1,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
  ...over,
});
const sandbox = { write_mode: 'sandbox' as const, read_only: false };

describe('the branch a sandboxed session runs on', () => {
  it('is the newest ready branch of the credential’s database', () => {
    const rows = [
      branch('old', { created_at: '2026-01-01T00:00:00.000Z' }),
      branch('new', { created_at: '2026-01-02T00:00:00.000Z' }),
      branch('copying', { created_at: '2026-01-03T00:00:00.000Z', status: 'copying' }),
      branch('failed', { created_at: '2026-01-03T00:00:00.000Z', status: 'failed' }),
      branch('deleted', { created_at: '2026-01-03T00:00:00.000Z', status: 'deleted' }),
      branch('other-db', { created_at: '2026-01-04T00:00:00.000Z', database_id: 'db_b' }),
    ];
    expect(sandboxBranchOf(sandbox, rows, 'db_a')?.branch_id).toBe('new');
    expect(sandboxBranchOf(sandbox, rows, 'db_b')?.branch_id).toBe('other-db');
    expect(sandboxBranchOf(sandbox, rows, 'db_c')).toBeUndefined();
    // Two made in the same millisecond: the order does not depend on the view's order.
    const tied = [branch('b'), branch('a')];
    expect(sandboxBranchOf(sandbox, tied, 'db_a')?.branch_id).toBe('b');
    expect(sandboxBranchOf(sandbox, [...tied].reverse(), 'db_a')?.branch_id).toBe('b');
  });

  it('is none unless the policy is write-capable with write_mode sandbox', () => {
    const rows = [branch('x')];
    expect(sandboxBranchOf({ write_mode: 'commit', read_only: false }, rows, 'db_a')).toBeUndefined();
    expect(sandboxBranchOf({ write_mode: 'rollback', read_only: false }, rows, 'db_a')).toBeUndefined();
    expect(sandboxBranchOf({ write_mode: 'sandbox', read_only: true }, rows, 'db_a')).toBeUndefined();
    expect(sandboxBranchOf(undefined, rows, 'db_a')).toBeUndefined();
  });
});
