/** An ApprovalRequested's data for tests: a wire-held UPDATE of one row, with any field replaced. */
export function approvalRequest<O extends Record<string, unknown>>(overrides: O) {
  return {
    approval_id: 'apr_aaaaaaaaaaaaaaaaaaaaaaaaaa',
    project_id: 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa',
    database_id: 'db_aaaaaaaaaaaaaaaaaaaaaaaaaa',
    policy_profile_id: 'pol_aaaaaaaaaaaaaaaaaaaaaaaaaa',
    credential_id: 'agt_aaaaaaaaaaaaaaaaaaaaaaaaaa',
    session_id: 'px.1.1',
    region: 'local',
    sql: 'update orders set amount = 0 where id = 1',
    normalized_sql: 'update orders set amount = $1 where id = $2',
    statement_kind: 'update',
    target_tables: ['public.orders'],
    estimated_rows: '1',
    expires_at: '2026-01-01T01:00:00.000Z',
    source: 'wire' as 'wire' | 'mcp',
    policy_version: 1,
    binding: 'b'.repeat(64),
    hold_rule: 'approval.held_kind',
    hold_reason: 'held',
    ...overrides,
  };
}
