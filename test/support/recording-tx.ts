/** A projection transaction that touches no database: it records every statement, its parameters and each COPY, in order. */
import type { ProjectionTx } from '../../projections/projection.js';

export function recordingTx(): { tx: ProjectionTx; sent: unknown[] } {
  const sent: unknown[] = [];
  const tx: ProjectionTx = {
    query: async (sql, values) => {
      sent.push(sql, values);
      return { rows: [], rowCount: 0, command: '', oid: 0, fields: [] };
    },
    table: (name) => `rm.${name}`,
    copyIn: async (name, columns, rows) => {
      sent.push(name, columns, rows.toString('utf8'));
      return 0;
    },
  };
  return { tx, sent };
}
