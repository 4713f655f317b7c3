import { WireSessionClosed, WireSessionOpened } from '../src/events/connections.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import type { Projection } from './projection.js';

export const CONNECTION_STREAM = 'connection-';

/** The stream of a project's wire connections (ingest appends the proxies' session marks to it). */
export const connectionStream = (projectId: string): string => `${CONNECTION_STREAM}${projectId}`;

interface ConnectionRow {
  project_id: string;
  session_id: string;
  credential_id: string | null;
  opened_at: string | null;
  closed_at: string | null;
}

/**
 * The rows of a batch, one per session. Ingest may append a session's close before its open (it
 * handles bus messages concurrently), so each mark fills only its own columns.
 */
function connectionRows(events: readonly RecordedEvent[]): ConnectionRow[] {
  const rows = new Map<string, ConnectionRow>();
  const rowOf = (projectId: string, sessionId: string): ConnectionRow => {
    const key = `${projectId} ${sessionId}`;
    let row = rows.get(key);
    if (!row) rows.set(key, (row = { project_id: projectId, session_id: sessionId, credential_id: null, opened_at: null, closed_at: null }));
    return row;
  };
  for (const event of events) {
    if (event.type === WireSessionOpened.type) {
      const { data } = decodeWith(WireSessionOpened, event);
      Object.assign(rowOf(data.project_id, data.session_id), { credential_id: data.credential_id, opened_at: data.at });
    } else if (event.type === WireSessionClosed.type) {
      const { data } = decodeWith(WireSessionClosed, event);
      rowOf(data.project_id, data.session_id).closed_at = data.at;
    }
  }
  return [...rows.values()];
}

/** Wire sessions' connections, opened and closed as their proxies recorded them (docs/http-api.md, connection_seconds). */
export const connectionsProjection: Projection = {
  name: 'wire_connections',
  streamPrefixes: [CONNECTION_STREAM],
  tables: [
    {
      name: 'wire_connections',
      columns: 'project_id text not null, session_id text not null, credential_id text, opened_at timestamptz, closed_at timestamptz, primary key (project_id, session_id)',
      orderBy: 'project_id, session_id',
      indexes: ['project_id, opened_at'],
    },
  ],
  async apply(tx, events) {
    const rows = connectionRows(events);
    if (rows.length === 0) return;
    const table = tx.table('wire_connections');
    await tx.query(
      `insert into ${table} as t select * from json_populate_recordset(null::${table}, $1::json)
       on conflict (project_id, session_id) do update set credential_id = coalesce(excluded.credential_id, t.credential_id),
         opened_at = coalesce(excluded.opened_at, t.opened_at), closed_at = coalesce(excluded.closed_at, t.closed_at)`,
      [JSON.stringify(rows)],
    );
  },
};
