/**
 * Wire sessions' spans for the daily usage aggregate's connection_seconds (docs/http-api.md): per
 * project and session, the first and last decision's time and the decisions counted. The proxy
 * records no connect or disconnect, so a session's span runs from its first decision to its last.
 * Merging with least/greatest and a sum makes the table the same however events are batched.
 */
import { StatementDecided } from '../src/events/audit.js';
import { parseJson } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { AUDIT_STREAM_PREFIX } from './audit.js';
import type { Projection } from './projection.js';

export interface SessionSpan {
  project_id: string;
  session_id: string;
  first_at: string;
  last_at: string;
  decisions: number;
}

/** The members of a decision a span reads. */
interface SpanFields {
  project_id: string;
  session_id: string;
  source: string;
  ts: string;
}

/** The spans of the wire sessions among `events`: pure, so batches fold to the same rows in any split. */
export function sessionSpans(events: readonly RecordedEvent[]): SessionSpan[] {
  const spans = new Map<string, SessionSpan>();
  for (const event of events) {
    if (event.type !== StatementDecided.type) continue;
    const d = parseJson(event.data) as SpanFields;
    if (d.source !== 'wire' || d.session_id === '') continue;
    // Project ids hold no space, so the pair is one key.
    const key = `${d.project_id} ${d.session_id}`;
    const span = spans.get(key);
    if (!span) spans.set(key, { project_id: d.project_id, session_id: d.session_id, first_at: d.ts, last_at: d.ts, decisions: 1 });
    else {
      if (d.ts < span.first_at) span.first_at = d.ts;
      if (d.ts > span.last_at) span.last_at = d.ts;
      span.decisions += 1;
    }
  }
  return [...spans.values()];
}

export const sessionSpansProjection: Projection = {
  name: 'session_spans',
  streamPrefixes: [AUDIT_STREAM_PREFIX],
  tables: [
    {
      name: 'session_spans',
      columns: 'project_id text not null, session_id text not null, first_at timestamptz not null, last_at timestamptz not null, decisions bigint not null, primary key (project_id, session_id)',
      orderBy: 'project_id, session_id',
      indexes: ['project_id, last_at'],
    },
  ],
  async apply(tx, events) {
    const spans = sessionSpans(events);
    if (spans.length === 0) return;
    await tx.query(
      `insert into ${tx.table('session_spans')} as t select * from json_populate_recordset(null::${tx.table('session_spans')}, $1::json)
       on conflict (project_id, session_id) do update
         set first_at = least(t.first_at, excluded.first_at), last_at = greatest(t.last_at, excluded.last_at), decisions = t.decisions + excluded.decisions`,
      [JSON.stringify(spans)],
    );
  },
};
