import { describe, expect, it } from 'vitest';
import { auditEntryColumns } from '../../projections/audit.js';
import { entryFromRow } from '../../queries/audit.js';

const INT8_COLUMNS = ['seq', 'rows_returned', 'bytes_out', 'latency_us', 'proxy_seq'];

describe('an audit entry from a row read as an array', () => {
  it('takes each column as the member of its name, in the columns order, int8 columns as numbers; where it ran only when placed', () => {
    const fields = auditEntryColumns.filter((column) => column !== 'placed');
    const valueOf = (column: string, i: number) => (INT8_COLUMNS.includes(column) ? BigInt(i + 1) : column === 'placed' ? true : `value of ${column}`);
    const row = auditEntryColumns.map(valueOf);
    const entry = entryFromRow(row);
    expect(Object.keys(entry)).toEqual(fields);
    expect(entry).toEqual(Object.fromEntries(fields.map((column, i) => [column, INT8_COLUMNS.includes(column) ? i + 1 : `value of ${column}`])));
    // An entry of a v1 decision or a gap marker: no placement members at all, whatever the columns hold.
    const unplaced = entryFromRow(auditEntryColumns.map((column, i) => (column === 'placed' ? false : valueOf(column, i))));
    expect(Object.keys(unplaced)).toEqual(fields.filter((column) => !['ran_on', 'replica_id', 'upstream_region'].includes(column)));
  });

  it('keeps a null latency_us and proxy_seq null', () => {
    const row = auditEntryColumns.map((column) => (column === 'latency_us' || column === 'proxy_seq' ? null : 1n));
    const entry = entryFromRow(row);
    expect(entry.latency_us).toBeNull();
    expect(entry.proxy_seq).toBeNull();
  });
});
