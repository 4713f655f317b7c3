import { describe, expect, it } from 'vitest';
import { auditEntryColumns } from '../../projections/audit.js';
import { entryFromRow } from '../../queries/audit.js';

const INT8_COLUMNS = ['seq', 'rows_returned', 'bytes_out', 'latency_us', 'proxy_seq'];

describe('an audit entry from a row read as an array', () => {
  it('takes each column as the member of its name, in the columns order, int8 columns as numbers', () => {
    const row = auditEntryColumns.map((column, i) => (INT8_COLUMNS.includes(column) ? BigInt(i + 1) : `value of ${column}`));
    const entry = entryFromRow(row);
    expect(Object.keys(entry)).toEqual(auditEntryColumns);
    expect(entry).toEqual(Object.fromEntries(auditEntryColumns.map((column, i) => [column, INT8_COLUMNS.includes(column) ? i + 1 : `value of ${column}`])));
  });

  it('keeps a null latency_us and proxy_seq null', () => {
    const row = auditEntryColumns.map((column) => (column === 'latency_us' || column === 'proxy_seq' ? null : 1n));
    const entry = entryFromRow(row);
    expect(entry.latency_us).toBeNull();
    expect(entry.proxy_seq).toBeNull();
  });
});
