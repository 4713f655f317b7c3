import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sessionSpans, type SessionSpan } from '../../projections/session-spans.js';
import { StatementDecided, type AuditSource } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { RecordedEvent } from '../../src/store/port.js';

const project = 'prj_01j9zq8x4m7k2n5p6r3s8t0v1w';

function decided(session: string, source: AuditSource, ts: string, n: number): RecordedEvent {
  const proxied = source === 'wire' || source === 'mcp';
  const decision = {
    event: 'query' as const, project_id: project, credential_id: null, session_id: session, source, region: 'local', client_ip: '', ts, sql: 'select 1', normalized_sql: '',
    query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'none' as const, rows_returned: '0', bytes_out: '0', latency_us: null,
    tables_read: [], tables_written: [], tables_blocked: [], parsed: true, proxy_id: proxied ? 'p' : null, boot_epoch: proxied ? 1 : null, seq: proxied ? String(n + 1) : null, approval_id: null,
  };
  return { ...encodeEvent(StatementDecided, decision, { event_id: randomUUID(), correlation_id: 't', actor: 't', at: ts }), stream: `audit-${project}`, revision: n, position: BigInt(n) };
}

/** What the projection's upsert does with a batch's spans: least, greatest, sum. */
function merge(into: Map<string, SessionSpan>, spans: SessionSpan[]): void {
  for (const span of spans) {
    const known = into.get(span.session_id);
    into.set(span.session_id, known ? { ...known, first_at: known.first_at < span.first_at ? known.first_at : span.first_at, last_at: known.last_at > span.last_at ? known.last_at : span.last_at, decisions: known.decisions + span.decisions } : { ...span });
  }
}

describe('session spans', () => {
  it('spans each wire session from its first to its last decision, whatever their order; MCP, control and session-less entries are no connection', () => {
    const events = [
      decided('p:1.1', 'wire', '2026-01-01T10:00:30.500Z', 0),
      decided('p:1.1', 'wire', '2026-01-01T10:00:00.000Z', 1),
      decided('p:1.1', 'wire', '2026-01-01T10:00:10.000Z', 2),
      decided('mcp:1', 'mcp', '2026-01-01T11:00:00.000Z', 3),
      decided('', 'control', '2026-01-01T12:00:00.000Z', 4),
    ];
    expect(sessionSpans(events)).toEqual([{ project_id: project, session_id: 'p:1.1', first_at: '2026-01-01T10:00:00.000Z', last_at: '2026-01-01T10:00:30.500Z', decisions: 3 }]);
  });

  it('gives the same spans however the events are split into batches', () => {
    const decision = fc.record({ session: fc.constantFrom('p:1.1', 'p:1.2', 'p:2.1'), second: fc.integer({ min: 0, max: 86_399 }) });
    fc.assert(
      fc.property(fc.array(decision, { minLength: 1, maxLength: 40 }), fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 5 }), (decisions, cuts) => {
        const events = decisions.map((d, n) => decided(d.session, 'wire', new Date(Date.UTC(2026, 0, 1) + d.second * 1000).toISOString(), n));
        const whole = new Map<string, SessionSpan>();
        merge(whole, sessionSpans(events));
        const batched = new Map<string, SessionSpan>();
        const bounds = [0, ...[...new Set(cuts)].filter((c) => c < events.length).sort((a, b) => a - b), events.length];
        for (let i = 1; i < bounds.length; i++) merge(batched, sessionSpans(events.slice(bounds[i - 1], bounds[i])));
        expect(batched).toEqual(whole);
      }),
    );
  });
});
