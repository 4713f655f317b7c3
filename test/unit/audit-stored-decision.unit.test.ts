import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ZodError } from 'zod';
import { storedDecision } from '../../src/audit/stored-decision.js';
import { AuditEventKind, CacheStatus, decodeDecision, StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { placed } from '../support/decisions.js';
import { decodeData, encodeEvent } from '../../src/events/envelope.js';

const metadata = { event_id: '00000000-0000-4000-8000-000000000001', correlation_id: 'test', actor: 'ingest', at: '2025-01-31T12:00:00.000Z' };

function decision(change: Partial<StatementDecidedV1> = {}): StatementDecided {
  return placed({
    event: 'query', project_id: 'prj_01jq3v5m8k2r7t9w4x6y0z1a2b', credential_id: 'agt_01jq3v5m8k2r7t9w4x6y0z1a2b', session_id: 'px.1.7', source: 'wire',
    region: 'eu-west-1', client_ip: '10.0.0.1', ts: '2025-01-31T12:00:00.000Z', sql: 'select * from t where id = 1', normalized_sql: 'select * from t where id = $1',
    query_hash: '0123456789abcdef', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'miss', rows_returned: '1', bytes_out: '120',
    latency_us: 1_250, tables_read: ['public.t'], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'px-1', boot_epoch: 1, seq: '7', approval_id: null,
    ...change,
  });
}

const withoutPlacement = ({ ran_on: _ran, replica_id: _replica, upstream_region: _region, ...v1 }: StatementDecided): StatementDecidedV1 => v1;

const stored = (payload: unknown): Uint8Array => Buffer.from(JSON.stringify(payload), 'utf8');

describe('reading StatementDecided back from the store', () => {
  it('gives what the full parse gives for any payload encodeEvent wrote', () => {
    const change = fc.record(
      {
        event: fc.constantFrom(...AuditEventKind.options.filter((e) => !['approval_requested', 'approved', 'rejected', 'approval_expired'].includes(e))),
        credential_id: fc.constant(null),
        sql: fc.string({ unit: 'grapheme', maxLength: 200 }),
        reason: fc.string({ maxLength: 50 }).filter((s) => !s.includes('\0')),
        cache_status: fc.constantFrom(...CacheStatus.options),
        rows_returned: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }).map(String),
        latency_us: fc.option(fc.nat(), { nil: null }),
        tables_read: fc.array(fc.constantFrom('public.t', 'a.b'), { maxLength: 3 }),
        parsed: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(change, (partial) => {
        const event = encodeEvent(StatementDecided, decision(partial), metadata);
        expect(storedDecision(event.type, event.data)).toEqual(decodeData(StatementDecided, event));
      }),
      { numRuns: 300 },
    );
  });

  it('parses in full, and so refuses, a payload of the wrong shape or types', () => {
    const { sql: _sql, ...missing } = decision();
    const malformed: unknown[] = [
      null,
      [],
      'query',
      missing,
      { ...decision(), extra: 1 },
      { ...decision(), event: 'dropped' },
      { ...decision(), source: 'smtp' },
      { ...decision(), cache_status: 'warm' },
      { ...decision(), sql: 1 },
      { ...decision(), credential_id: 5 },
      { ...decision(), ts: '2025-01-31 12:00:00' },
      { ...decision(), rows_returned: 1 },
      { ...decision(), rows_returned: '1e3' },
      { ...decision(), bytes_out: '9223372036854775808' },
      { ...decision(), seq: '-1' },
      { ...decision(), latency_us: -1 },
      { ...decision(), latency_us: 1.5 },
      { ...decision(), boot_epoch: '1' },
      { ...decision(), tables_read: 'public.t' },
      { ...decision(), tables_written: [1] },
      { ...decision(), parsed: 'true' },
      { ...decision(), ran_on: 'edge' },
      { ...decision(), replica_id: 1 },
      { ...decision(), upstream_region: false },
      withoutPlacement(decision()),
    ];
    for (const payload of malformed) expect(() => storedDecision(StatementDecided.type, stored(payload))).toThrow(ZodError);
    // A v1 payload is read by v1's rules: with v2's members it is refused.
    for (const payload of [decision(), { ...withoutPlacement(decision()), event: 'dropped' }]) expect(() => storedDecision(StatementDecidedV1.type, stored(payload))).toThrow(ZodError);
  });

  it('reads a v1 payload upcast: its placement members absent, not null', () => {
    const v1 = withoutPlacement(decision());
    const event = encodeEvent(StatementDecidedV1, v1, metadata);
    const read = storedDecision(event.type, event.data);
    expect(read).toEqual(v1);
    expect('ran_on' in read).toBe(false);
    expect(decodeDecision({ type: event.type, data: event.data })).toEqual(v1);
  });

  it('takes a well-typed payload as stored, without the format checks encodeEvent made before appending it', () => {
    const unchecked = { ...decision(), project_id: 'not-a-project-id', client_ip: 'somewhere' };
    expect(() => StatementDecided.schema.parse(unchecked)).toThrow(ZodError);
    expect(storedDecision(StatementDecided.type, stored(unchecked))).toEqual(unchecked);
  });
});
