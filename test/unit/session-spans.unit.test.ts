import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sessionSpans, type SessionSpan } from '../../projections/audit-usage.js';
import type { AuditSource } from '../../src/events/audit.js';

const project = 'prj_01j9zq8x4m7k2n5p6r3s8t0v1w';

/** The members of an entry a span reads. */
const decided = (session: string, source: AuditSource, ts: string) => ({ project_id: project, session_id: session, source, ts });

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
      decided('p:1.1', 'wire', '2026-01-01T10:00:30.500Z'),
      decided('p:1.1', 'wire', '2026-01-01T10:00:00.000Z'),
      decided('p:1.1', 'wire', '2026-01-01T10:00:10.000Z'),
      decided('mcp:1', 'mcp', '2026-01-01T11:00:00.000Z'),
      decided('', 'control', '2026-01-01T12:00:00.000Z'),
    ];
    expect(sessionSpans(events)).toEqual([{ project_id: project, session_id: 'p:1.1', first_at: '2026-01-01T10:00:00.000Z', last_at: '2026-01-01T10:00:30.500Z', decisions: 3 }]);
  });

  it('gives the same spans however the events are split into batches', () => {
    const decision = fc.record({ session: fc.constantFrom('p:1.1', 'p:1.2', 'p:2.1'), second: fc.integer({ min: 0, max: 86_399 }) });
    fc.assert(
      fc.property(fc.array(decision, { minLength: 1, maxLength: 40 }), fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 5 }), (decisions, cuts) => {
        const events = decisions.map((d) => decided(d.session, 'wire', new Date(Date.UTC(2026, 0, 1) + d.second * 1000).toISOString()));
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
