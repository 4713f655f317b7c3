import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { heldThrough, holdOf, needsEstimate, unheldUpTo, type HoldFacts } from '../../proxy/policy/approval-rules.js';
import type { CatalogRelation, UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import { decideStatement } from '../../proxy/policy/hook.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { POLICY_STATEMENT_KINDS, type ApprovalRule } from '../../src/events/policies.js';

beforeAll(loadParser);

const rule = (over: Partial<ApprovalRule> = {}): ApprovalRule => ({ held_kinds: [], row_threshold: null, expiry_seconds: 3600, ...over });
const policy = { policy_id: 'pol_fixture', revision: 1, status: 'active', read_only: false, allowed_tables: ['public.*', 'audit.*'], masked_columns: {}, allow_catalog: false, max_rows: null, honeytokens: [] } as unknown as PolicyRow;
const context = { credential: { credential_id: 'agt_fixture' } as CredentialRow, policy, protocol: 'simple' as const, honeytokens: { canariesOf: () => [], tripped: () => undefined } };

/** The facts of a statement as the policy hook decides them (every kind it runs, what it writes). */
function factsOf(sql: string, estimatedRows: number | null = null): HoldFacts {
  const decision = decideStatement(sql, context);
  if (decision.action !== 'allow') throw new Error(`refused: ${sql}: ${decision.reason}`);
  return { kinds: decision.kinds, tablesWritten: decision.tablesWritten, writes: decision.writes, estimatedRows };
}

describe('approval holds', () => {
  it('holds a statement of a held kind, naming the rule and the kind', () => {
    expect(holdOf(rule({ held_kinds: ['update'] }), factsOf('update public.orders set amount = 0 where id = 1'))).toEqual({
      held: true,
      rule: 'approval.held_kind',
      reason: "it runs a statement of kind update, which this credential's policy holds for approval (rule approval.held_kind)",
    });
    expect(holdOf(rule({ held_kinds: ['update'] }), factsOf('select * from public.orders'))).toEqual({ held: false });
  });

  it('holds by every kind the statement runs, not its top-level kind: writable CTEs, EXPLAIN ANALYZE, several statements', () => {
    const deletes = rule({ held_kinds: ['delete'] });
    for (const sql of [
      'with d as (delete from public.orders returning id) select * from d',
      'explain analyze delete from public.orders',
      'select 1; delete from public.orders where id = 2',
      'with d as (delete from public.orders returning *) insert into public.archive select * from d',
    ]) {
      expect(holdOf(deletes, factsOf(sql)), sql).toMatchObject({ held: true, rule: 'approval.held_kind' });
    }
    // Plain EXPLAIN runs nothing: it is an explain only.
    expect(holdOf(deletes, factsOf('explain delete from public.orders'))).toEqual({ held: false });
    expect(holdOf(rule({ held_kinds: ['ddl'] }), factsOf('select 1; alter table public.orders add column note text'))).toMatchObject({ held: true });
  });

  it('holds writes to listed tables (schema.table or schema.*), not reads of them', () => {
    const tables = rule({ tables: ['public.orders', 'audit.*'] });
    expect(holdOf(tables, factsOf('delete from public.orders where id = 1'))).toMatchObject({ held: true, rule: 'approval.held_table', reason: expect.stringContaining('it writes public.orders') });
    expect(holdOf(tables, factsOf('insert into audit.log values (1)'))).toMatchObject({ held: true, rule: 'approval.held_table' });
    expect(holdOf(tables, factsOf('select * from public.orders'))).toEqual({ held: false });
    expect(holdOf(tables, factsOf('delete from public.customers where id = 1'))).toEqual({ held: false });
  });

  it('holds writes past the row threshold, and writes it cannot count or estimate; never reads', () => {
    const threshold = rule({ row_threshold: 10 });
    expect(holdOf(threshold, factsOf('update public.orders set amount = 0', 11))).toEqual({
      held: true,
      rule: 'approval.row_threshold',
      reason: "it is estimated to affect 11 rows, more than the 10 this credential's policy lets run without approval (rule approval.row_threshold)",
    });
    expect(holdOf(threshold, factsOf('update public.orders set amount = 0', 10))).toEqual({ held: false });
    expect(holdOf(threshold, factsOf('update public.orders set amount = 0', null))).toMatchObject({ held: true, reason: expect.stringContaining('could not be estimated') });
    expect(holdOf(threshold, factsOf('truncate public.orders'))).toMatchObject({ held: true, reason: expect.stringContaining('the rows TRUNCATE affects cannot be counted') });
    expect(holdOf(threshold, factsOf('create index on public.orders (amount)'))).toMatchObject({ held: true, reason: expect.stringContaining('a schema change') });
    expect(holdOf(threshold, factsOf('select * from public.orders', 1_000_000))).toEqual({ held: false });
  });

  it('auto-approves a counted write within every written table’s ceiling, capped at it; never DDL, uncounted writes or unknown estimates', () => {
    const auto = rule({ held_kinds: ['update', 'delete', 'ddl'], auto_approve: { 'public.orders': { max_rows: 5 } } });
    expect(holdOf(auto, factsOf('update public.orders set amount = 0 where id = 1', 1))).toEqual({ held: false, autoApproved: { cap: 5, tables: ['public.orders'] } });
    expect(holdOf(auto, factsOf('update public.orders set amount = 0', 6))).toMatchObject({ held: true });
    expect(holdOf(auto, factsOf('update public.orders set amount = 0', null))).toMatchObject({ held: true });
    expect(holdOf(auto, factsOf('update public.customers set name = 1', 1))).toMatchObject({ held: true });
    expect(holdOf(auto, factsOf('with d as (delete from public.orders returning *) select * from d', 1))).toMatchObject({ held: true });
    expect(holdOf(auto, factsOf('alter table public.orders add column x int', 0))).toMatchObject({ held: true });
  });

  it('asks for an estimate only where one decides: a counted write under a threshold or a ceiling', () => {
    expect(needsEstimate(rule({ held_kinds: ['update'] }), factsOf('update public.orders set amount = 0'))).toBe(false);
    expect(needsEstimate(rule({ row_threshold: 3 }), factsOf('update public.orders set amount = 0'))).toBe(true);
    expect(needsEstimate(rule({ auto_approve: { 'public.orders': { max_rows: 3 } } }), factsOf('delete from public.orders'))).toBe(true);
    expect(needsEstimate(rule({ row_threshold: 3 }), factsOf('truncate public.orders'))).toBe(false);
    expect(needsEstimate(undefined, factsOf('delete from public.orders'))).toBe(false);
  });

  it('tells the most rows a held counted write may be estimated at to run unheld (the what-if), null when its rows do not decide', () => {
    const update = factsOf('update public.orders set amount = 0');
    expect(unheldUpTo(rule({ row_threshold: 10 }), update)).toBe(10);
    expect(unheldUpTo(rule({ row_threshold: 0 }), update)).toBe(0);
    expect(unheldUpTo(rule({ held_kinds: ['update'], auto_approve: { 'public.orders': { max_rows: 5 } } }), update)).toBe(5);
    // Under a threshold and a ceiling, the larger lifts the hold.
    expect(unheldUpTo(rule({ row_threshold: 10, auto_approve: { 'public.orders': { max_rows: 50 } } }), update)).toBe(50);
    expect(unheldUpTo(rule({ row_threshold: 10, auto_approve: { 'public.orders': { max_rows: 5 } } }), update)).toBe(10);
    // Held whatever its rows: a held kind no ceiling covers, a ceiling of another table, rows it cannot count, a schema change.
    expect(unheldUpTo(rule({ held_kinds: ['update'], row_threshold: 10 }), update)).toBe(null);
    expect(unheldUpTo(rule({ held_kinds: ['update'], auto_approve: { 'public.customers': { max_rows: 5 } } }), update)).toBe(null);
    expect(unheldUpTo(rule({ row_threshold: 10 }), factsOf('truncate public.orders'))).toBe(null);
    expect(unheldUpTo(rule({ row_threshold: 10 }), factsOf('with d as (delete from public.orders returning *) select * from d'))).toBe(null);
    expect(unheldUpTo(rule({ row_threshold: 10 }), factsOf('create index on public.orders (amount)'))).toBe(null);
  });

  it('unheldUpTo agrees with holdOf at, above and below the count it names, for any threshold and ceiling', () => {
    const update = factsOf('update public.orders set amount = 0');
    fc.assert(
      fc.property(fc.option(fc.nat(1_000_000)), fc.option(fc.integer({ min: 1, max: 1_000_000 })), fc.boolean(), (threshold, ceiling, heldKind) => {
        const rules = rule({ row_threshold: threshold, held_kinds: heldKind ? ['update'] : [], ...(ceiling === null ? {} : { auto_approve: { 'public.orders': { max_rows: ceiling } } }) });
        const most = unheldUpTo(rules, update);
        const held = (rows: number) => holdOf(rules, { ...update, estimatedRows: rows }).held;
        if (!holdOf(rules, update).held) return;
        if (most === null) expect([0, 1, 1_000_001].map(held)).toEqual([true, true, true]);
        else expect([held(most), held(most + 1)]).toEqual([false, true]);
      }),
    );
  });
});

describe('approval holds, properties', () => {
  const kinds = fc.subarray([...POLICY_STATEMENT_KINDS]);
  const shape = fc.oneof(
    fc.record({ rows: fc.constant('none' as const), ddl: fc.boolean() }),
    fc.record({ rows: fc.constant('counted' as const), ddl: fc.boolean(), returning: fc.boolean() }),
    fc.record({ rows: fc.constant('uncounted' as const), ddl: fc.boolean(), what: fc.constant('TRUNCATE') }),
  );
  const table = fc.constantFrom('public.orders', 'public.customers', 'audit.log');
  const facts = fc.record({ kinds, tablesWritten: fc.uniqueArray(table), writes: shape, estimatedRows: fc.option(fc.nat(1000)) });
  const rules = fc.record({
    held_kinds: kinds,
    row_threshold: fc.option(fc.nat(1000)),
    expiry_seconds: fc.constant(60),
    tables: fc.uniqueArray(fc.constantFrom('public.orders', 'audit.*')),
    auto_approve: fc.dictionary(table, fc.record({ max_rows: fc.integer({ min: 1, max: 1000 }) })),
  });

  it('no rules, no hold; a held kind always holds unless auto-approved; adding a rule never lifts a hold', () => {
    fc.assert(
      fc.property(rules, facts, kinds, (r, f, more) => {
        expect(holdOf(rule(), f)).toEqual({ held: false });
        const decision = holdOf(r, f);
        if (f.kinds.some((k) => r.held_kinds.includes(k)) && !('autoApproved' in decision && decision.autoApproved)) expect(decision.held).toBe(true);
        // More held kinds, a lower threshold: held stays held (auto-approval aside, which the ceilings alone decide).
        const stricter = { ...r, held_kinds: [...new Set([...r.held_kinds, ...more])], row_threshold: r.row_threshold === null ? null : Math.max(0, r.row_threshold - 1) };
        if (decision.held) expect(holdOf(stricter, f).held).toBe(true);
      }),
    );
  });

  it('an auto-approval is only ever a counted write with an estimate within the smallest ceiling of the tables it writes, never DDL', () => {
    fc.assert(
      fc.property(rules, facts, (r, f) => {
        const decision = holdOf(r, f);
        if (decision.held || !decision.autoApproved) return;
        expect(f.writes.rows).toBe('counted');
        expect(f.writes.ddl || f.kinds.includes('ddl')).toBe(false);
        expect(f.estimatedRows).not.toBeNull();
        expect(decision.autoApproved.cap).toBe(Math.min(...f.tablesWritten.map((t) => r.auto_approve[t]!.max_rows)));
        expect(f.estimatedRows!).toBeLessThanOrEqual(decision.autoApproved.cap);
      }),
    );
  });
});

describe('writes that reach a held table without naming it (heldThrough)', () => {
  const relations: Record<string, CatalogRelation> = {
    'public.orders': { kind: 'table', columns: ['id'], inheritors: [{ schema: 'public', name: 'orders_child' }], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.orders_child': { kind: 'table', columns: ['id'], inheritors: [{ schema: 'public', name: 'orders_grandchild' }], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.orders_grandchild': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.orders_view': { kind: 'view', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.events': { kind: 'partitioned', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.remote': { kind: 'foreign', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.notes': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.orders_2026': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [{ schema: 'public', name: 'orders' }], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.customers': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [{ schema: 'public', name: 'carts' }], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.carts': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [{ schema: 'public', name: 'orders' }], writesRunCode: false, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
    'public.logged': { kind: 'table', columns: ['id'], inheritors: [], writesReach: [], writesRunCode: true, viewReads: [], readsRunCode: false, partitionTree: [], rowColumns: [] },
  };
  const catalog: UpstreamCatalog = { version: '1', relation: (name) => relations[`${name.schema}.${name.name}`], functionSchemas: () => [], operatorSchemas: () => [] };
  const held = rule({ tables: ['public.orders'] });

  it('names views, partitioned and foreign tables and every inheritance descendant of a named table; not other plain tables', () => {
    const written = ['public.orders', 'public.orders_child', 'public.orders_grandchild', 'public.orders_view', 'public.events', 'public.remote', 'public.notes'];
    expect(heldThrough(held, written, catalog)).toEqual(['public.orders_child', 'public.orders_grandchild', 'public.orders_view', 'public.events', 'public.remote']);
  });

  it('names a partition of a named table, a table whose foreign keys cascade into it at any depth, and a table with a trigger or rule', () => {
    const written = ['public.orders_2026', 'public.customers', 'public.carts', 'public.logged', 'public.notes', 'public.unknown'];
    expect(heldThrough(held, written, catalog)).toEqual(['public.orders_2026', 'public.customers', 'public.carts', 'public.logged']);
  });

  it('names none when the rules name no table, or without a catalog', () => {
    expect(heldThrough(rule({ held_kinds: ['update'] }), ['public.orders_view'], catalog)).toEqual([]);
    expect(heldThrough(held, ['public.orders_view'], undefined)).toEqual([]);
  });

  it('holds such a write (approval.held_table), also once estimated under the threshold, and never auto-approves it', () => {
    const facts = { ...factsOf('update public.orders_view set amount = 0 where id = 1', 1), writesThrough: ['public.orders_view'] };
    const auto = rule({ tables: ['public.orders'], row_threshold: 100, auto_approve: { 'public.orders_view': { max_rows: 10 } } });
    expect(holdOf(auto, facts)).toMatchObject({ held: true, rule: 'approval.held_table', through: ['public.orders_view'] });
  });
});
