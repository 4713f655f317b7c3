import { describe, expect, it } from 'vitest';
import type { CatalogRelation, UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import { readReach, writeReach } from '../../proxy/policy/reach.js';

const table = (reach: string[] = [], runsCode = false, kind: CatalogRelation['kind'] = 'table', reads: string[] = [], readsRunCode = false): CatalogRelation => ({
  kind,
  columns: ['id'],
  inheritors: [],
  writesReach: reach.map((name) => ({ schema: 'public', name })),
  writesRunCode: runsCode,
  viewReads: reads.map((name) => ({ schema: 'public', name })),
  readsRunCode,
  partitionTree: [],
  rowColumns: [],
});
const relations: Record<string, CatalogRelation> = {
  'public.events': table(['events_a', 'events_b'], false, 'partitioned'),
  'public.events_a': table(['events']),
  'public.events_b': table(['events']),
  'public.parents': table(['kids']),
  'public.kids': table(['grandkids']),
  'public.grandkids': table(),
  'public.plain': table(),
  'public.logged': table([], true),
  'public.cascades_to_logged': table(['logged']),
  'public.orders_v': table([], false, 'view', ['orders']),
  'public.report_v': table([], false, 'view', ['orders_v', 'plain']),
  'public.calls_v': table([], false, 'view', ['plain'], true),
  'public.over_calls_v': table([], false, 'view', ['calls_v']),
  'public.secured': table([], false, 'table', [], true),
};
const catalog: UpstreamCatalog = { version: '1', relation: (name) => relations[`${name.schema}.${name.name}`], functionSchemas: () => [], operatorSchemas: () => [] };

describe('writeReach: the tables a write may change', () => {
  it('is the written tables, their partition trees and the foreign keys cascading from them, transitively', () => {
    expect(writeReach(['public.plain'], catalog)).toEqual(['public.plain']);
    expect(writeReach(['public.events_a'], catalog)).toEqual(['public.events_a', 'public.events', 'public.events_b']);
    expect(writeReach(['public.parents', 'public.plain'], catalog)).toEqual(['public.parents', 'public.plain', 'public.kids', 'public.grandkids']);
  });

  it('is unbounded (undefined) through a trigger or rule, a view, or a relation the snapshot does not know', () => {
    expect(writeReach(['public.logged'], catalog)).toBeUndefined();
    expect(writeReach(['public.cascades_to_logged'], catalog)).toBeUndefined();
    expect(writeReach(['public.orders_v'], catalog)).toBeUndefined();
    expect(writeReach(['public.created_since'], catalog)).toBeUndefined();
  });

  it('is the written tables alone without a snapshot', () => {
    expect(writeReach(['public.parents'], undefined)).toEqual(['public.parents']);
    expect(writeReach([], catalog)).toEqual([]);
  });
});

describe('readReach: the relations a read depends on', () => {
  it('is what it reads, and what the views among them read, transitively', () => {
    expect(readReach(['public.plain'], catalog)).toEqual(['public.plain']);
    expect(readReach(['public.report_v'], catalog)).toEqual(['public.report_v', 'public.orders_v', 'public.plain', 'public.orders']);
    expect(readReach(['public.unknown'], catalog)).toEqual(['public.unknown']);
    expect(readReach(['public.orders_v'], undefined)).toEqual(['public.orders_v']);
  });

  it('is unbounded (undefined) through a view that calls code, at any depth, or a table under row security', () => {
    expect(readReach(['public.calls_v'], catalog)).toBeUndefined();
    expect(readReach(['public.plain', 'public.over_calls_v'], catalog)).toBeUndefined();
    expect(readReach(['public.secured'], catalog)).toBeUndefined();
  });
});
