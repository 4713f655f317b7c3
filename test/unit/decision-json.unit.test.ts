import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { auditSql } from '../../proxy/audit-text.js';
import { decisionMembers, sessionMembers, textMembers } from '../../proxy/decision-json.js';
import { decisionRecord, type DecisionFacts } from '../../proxy/decision-record.js';
import { DecisionPublisher, type BusRecord } from '../../proxy/decisions.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { AuditEventKind, StatementDecided } from '../../src/events/audit.js';

/** Any UTF-16 code unit, lone surrogates and control characters included: the escaping must match JSON.stringify's. */
const anyText = (maxLength: number) => fc.string({ unit: fc.nat(0xffff).map((code) => String.fromCharCode(code)), maxLength });
const table = fc.constantFrom('public.orders', 'public.customers', 'app."Weird ""name"""', 'pg_catalog.pg_class');

const facts: fc.Arbitrary<DecisionFacts> = fc.record({
  event: fc.constantFrom(...AuditEventKind.options),
  projectId: fc.constant('prj_aaaaaaaaaaaaaaaaaaaaaaaaaa'),
  credentialId: fc.constantFrom(null, 'agt_bbbbbbbbbbbbbbbbbbbbbbbbbb'),
  sessionId: fc.constant('prx_1.1700000000.42'),
  source: fc.constantFrom('wire' as const, 'mcp' as const),
  region: fc.constantFrom('local', 'eu-west-1'),
  clientIp: fc.constantFrom('', '127.0.0.1', '::1'),
  ts: fc.date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
  sql: fc.oneof(
    fc.constantFrom('select 1', 'SELECT abalance FROM pgbench_accounts WHERE aid = $1', 'select * from orders where note = \'a "quoted" \\ value\''),
    anyText(60),
    fc.nat(200).map((n) => `select '${'x'.repeat(4_000 + n)}'`),
    // Comments that push a statement past the audit's text limit: the record keeps the statement.
    fc.nat(200).map((n) => `/* ${'c'.repeat(4_000 + n)} */ select id from orders -- ${'d'.repeat(n)}`),
    fc.nat(3_000).map((n) => `-- ${'c'.repeat(n)}\nselect '${'x'.repeat(4_000)}' as a, 2 as b`),
  ),
  kind: fc.constantFrom('', 'select', 'insert', 'with'),
  rule: fc.constantFrom('', 'masked_columns.masked', 'max_rows.truncated', 'auth.auth_failed'),
  reason: anyText(80),
  ran: fc.boolean(),
  rows: fc.nat(),
  bytes: fc.nat(),
  latencyUs: fc.oneof(fc.constant(null), fc.nat()),
  tablesRead: fc.option(fc.array(table, { maxLength: 3 }), { nil: undefined }),
  tablesWritten: fc.option(fc.array(table, { maxLength: 3 }), { nil: undefined }),
  tablesBlocked: fc.option(fc.array(table, { maxLength: 3 }), { nil: undefined }),
});

beforeAll(async () => {
  await loadParser();
});

describe('decision records as JSON members', () => {
  it('encode exactly the record decisionRecord builds, its text as the audit keeps it', () => {
    fc.assert(
      fc.property(facts, (f) => {
        const encoded: unknown = JSON.parse(`{${decisionMembers(sessionMembers(f), textMembers(f), f)}}`);
        const record = decisionRecord(f);
        expect(encoded).toEqual({ ...record, sql: auditSql(record.sql) });
      }),
      { numRuns: 500 },
    );
  });

  it('encode the record exactly when texts of one shape share their analysis, whatever comes between them', () => {
    // One decision's tables, shared as a numeric shape's decisions share them; the same arrays with another kind, and other arrays.
    const tablesRead = ['public.orders'];
    const tablesWritten: string[] = [];
    const text = fc.record({
      id: fc.nat(),
      kind: fc.constantFrom('select', 'with'),
      sameArrays: fc.boolean(),
      sql: fc.constantFrom((id: number) => `select * from orders where id = ${id}`, (id: number) => `SELECT * FROM orders WHERE id = ${id} /* other shape */`, () => 'not sql at all'),
    });
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 20 }), (texts) => {
        for (const t of texts) {
          const f = { ...fc.sample(facts, 1)[0]!, sql: t.sql(t.id), kind: t.kind, tablesRead: t.sameArrays ? tablesRead : [...tablesRead, 'public.customers'], tablesWritten: t.sameArrays ? tablesWritten : [] };
          const encoded: unknown = JSON.parse(`{${decisionMembers(sessionMembers(f), textMembers(f), f)}}`);
          expect(encoded).toEqual(decisionRecord(f));
        }
      }),
      { numRuns: 100 },
    );
  });

  it('publish as the same stamped record whichever way the decision was given', async () => {
    const bus = createMemoryBus();
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'd', maxInFlight: 8 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    const publisher = new DecisionPublisher(bus, { proxyId: 'prx_1', bootEpoch: 1_700_000_000 }, 1_000);
    const samples = fc.sample(facts, 50);
    for (const f of samples) {
      publisher.publish(decisionRecord(f));
      publisher.publishMembers(f.projectId, decisionMembers(sessionMembers(f), textMembers(f), f));
    }
    await publisher.close();
    const stamped = received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : []));
    expect(stamped).toHaveLength(100);
    for (let i = 0; i < samples.length; i++) {
      const [asObject, asMembers] = [stamped[2 * i]!, stamped[2 * i + 1]!];
      expect(asObject.seq).toBe(String(2 * i + 1));
      expect(asMembers).toEqual({ ...asObject, seq: String(2 * i + 2) });
    }
    await bus.close();
  });

  it('make a record the trail accepts', () => {
    const members = decisionMembers(
      sessionMembers({ projectId: 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa', credentialId: 'agt_bbbbbbbbbbbbbbbbbbbbbbbbbb', sessionId: 'prx_1.1700000000.42', source: 'wire', region: 'local', clientIp: '127.0.0.1' }),
      textMembers({ sql: 'select * from orders where id = 7', kind: 'select', tablesRead: ['public.orders'], tablesWritten: [] }),
      { event: 'query', ts: '2026-11-22T16:00:00.000Z', rule: '', reason: '', ran: true, rows: 1, bytes: 90, latencyUs: 120, region: 'local' },
    );
    const parsed = StatementDecided.schema.parse(JSON.parse(`{${members},"proxy_id":"prx_1","boot_epoch":1700000000,"seq":"1"}`));
    expect(parsed).toMatchObject({ normalized_sql: 'select * from orders where id = $1', query_hash: expect.stringMatching(/^[0-9a-f]{16}$/), parsed: true, latency_us: 120, ran_on: 'primary', replica_id: null, upstream_region: 'local' });
  });

  it('record a count beyond 2^53 - 1 as 2^53 - 1, the most an audit entry holds exactly, on both paths', () => {
    const session = { projectId: 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa', credentialId: null, sessionId: 'prx_1.1700000000.42', source: 'wire', region: 'local', clientIp: '' } as const;
    const text = { sql: 'select 1', kind: 'select' };
    for (const [count, recorded] of [[2 ** 53 - 1, '9007199254740991'], [2 ** 53, '9007199254740991'], [1e21, '9007199254740991'], [2 ** 64, '9007199254740991'], [123, '123']] as const) {
      const outcome = { event: 'query', ts: '2026-11-22T16:00:00.000Z', rule: '', reason: '', ran: true, rows: count, bytes: count, latencyUs: 1, region: 'local' } as const;
      const members = StatementDecided.schema.parse(JSON.parse(`{${decisionMembers(sessionMembers(session), textMembers(text), outcome)},"proxy_id":"prx_1","boot_epoch":1,"seq":"1"}`));
      const record = decisionRecord({ ...session, ...text, ...outcome });
      expect([members.rows_returned, members.bytes_out, record.rows_returned, record.bytes_out]).toEqual([recorded, recorded, recorded, recorded]);
    }
  });
});
