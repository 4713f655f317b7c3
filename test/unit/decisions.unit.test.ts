import fc from 'fast-check';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { batchMessage, DecisionPublisher, type BusRecord, type Decision } from '../../proxy/decisions.js';
import { createMemoryBus } from '../../src/bus/memory.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { placed } from '../support/decisions.js';

const project = 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa';

function decision(sql: string): Decision {
  return placed({
    event: 'query', project_id: project, credential_id: null, session_id: 's1', source: 'wire', region: 'local', client_ip: '', ts: '2026-01-01T00:00:00.000Z',
    sql, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'bypass', rows_returned: '1', bytes_out: '10',
    latency_us: 5, tables_read: [], tables_written: [], tables_blocked: [], parsed: false, approval_id: null,
  });
}

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('batchMessage', () => {
  it('gives the bytes of the joined JSON for any decisions, any text in them, across scratch growth', () => {
    // Any UTF-16 unit, lone surrogates included: JSON.stringify escapes those, and the bytes must agree either way.
    const text = fc.string({ unit: fc.nat(0xffff).map((code) => String.fromCharCode(code)), maxLength: 200 });
    const json = fc.oneof(text.map((sql) => JSON.stringify({ sql })), text);
    fc.assert(
      fc.property(fc.array(json, { minLength: 1, maxLength: 20 }), fc.nat(400_000), (jsons, padding) => {
        const decisions = [...jsons, 'x'.repeat(padding)].map((value) => ({ json: value }));
        const expected = Buffer.from(`{"kind":"batch","decisions":[${decisions.map((d) => d.json).join(',')}]}`);
        expect(batchMessage(decisions).equals(expected)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('returns its own bytes: a later message does not change an earlier one', () => {
    const first = batchMessage([{ json: '{"a":1}' }, { json: '{"b":2}' }]);
    batchMessage([{ json: '{"c":3}' }, { json: '{"d":4}' }]);
    expect(first.toString()).toBe('{"kind":"batch","decisions":[{"a":1},{"b":2}]}');
  });
});

describe('decision publisher', () => {
  beforeAll(() => loadParser());
  it('sends decisions that come within a few milliseconds of each other in one bus message, at most 1,024 in one', async () => {
    const bus = createMemoryBus();
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'd', maxInFlight: 8 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10_000);
    for (let i = 0; i < 1_300; i++) publisher.publish(decision(`select ${i}`));
    await until(() => publisher.stats().published === 1_300);
    await until(() => received.length === 2);
    expect(received.map((r) => (r.kind === 'batch' ? r.decisions.length : r.kind))).toEqual([1_024, 276]);
    await bus.close();
  });

  it('under a steady flow, sends what came while the bus took a message after a linger, not at once: a few large messages, not one per publish', async () => {
    const bus = createMemoryBus();
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'd', maxInFlight: 8 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10_000);
    // Two decisions a millisecond for 300 ms, as a proxy at 2,000 statements a second.
    let sent = 0;
    const started = performance.now();
    while (performance.now() - started < 300) {
      publisher.publish(decision(`select ${sent++}`));
      publisher.publish(decision(`select ${sent++}`));
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await until(() => publisher.stats().published === sent);
    const seqs = received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : [])).map((d) => Number(d.seq));
    expect(seqs).toEqual(Array.from({ length: sent }, (_, i) => i + 1));
    // A message about every 50 ms: 6 or 7 in 300 ms, where a 20 ms linger sent 15 or 16 and a 5 ms one 60 and more.
    expect(received.length).toBeLessThanOrEqual(8);
    await bus.close();
  });

  it('keeps each message within the bus’s maxMessageBytes: long statements take several messages, every decision in order', async () => {
    const bus = createMemoryBus({ maxMessageBytes: 64 * 1024 });
    const sizes: number[] = [];
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'd', maxInFlight: 8 }, async (d) => {
      sizes.push(d.data.length);
      received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord);
    });
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10_000);
    // 4,000 characters of three UTF-8 bytes each: about 12 KB a decision, so five fit in 64 KB.
    for (let i = 0; i < 100; i++) publisher.publish(decision(`select '${'€'.repeat(4_000)}', ${i}`));
    await until(() => publisher.stats().published === 100);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64 * 1024);
    expect(sizes.length).toBeGreaterThanOrEqual(20);
    const seqs = received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : [])).map((d) => Number(d.seq));
    expect(seqs).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    await bus.close();
  });

  it('sends a strict decision, and the decisions queued before it, without waiting for the linger, also while the bus is taking a message', async () => {
    // On the clock the publisher and the bus read, so a loaded machine's late timers cannot blur 60 ms into 80.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const memory = createMemoryBus();
    try {
      let publishes = 0;
      // The bus takes 30 ms a message, so the strict decision arrives while the first message is under way.
      const bus = { ...memory, publish: async (message: { id: string; data: Uint8Array }) => {
        publishes++;
        await new Promise((resolve) => setTimeout(resolve, 30));
        await memory.publish(message);
      } };
      const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10_000);
      const first = publisher.publishStrict(decision('select 1'));
      publisher.publish(decision('select 2'));
      const strict = publisher.publishStrict(decision('select 3'));
      let settled = false;
      const both = Promise.all([first, strict]).then(() => (settled = true));
      // Two messages back to back take 60 ms; a linger between them would add 50 ms.
      await vi.advanceTimersByTimeAsync(59);
      expect(settled).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(settled).toBe(true);
      await both;
      expect(publishes).toBe(2);
      expect(publisher.stats()).toMatchObject({ depth: 0, published: 3 });
    } finally {
      vi.useRealTimers();
      await memory.close();
    }
  });

  it('stamps proxy id, boot epoch and a dense sequence; abridges statement text to 4 KB around its digest', async () => {
    const bus = createMemoryBus();
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'd', maxInFlight: 8 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10);
    publisher.publish(decision('select 1'));
    publisher.publish(decision(`select '${'x'.repeat(5000)}'`));
    await until(() => received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : [])).length === 2);
    const stamped = received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : []));
    expect(stamped.map((d) => [d?.proxy_id, d?.boot_epoch, d?.seq])).toEqual([['p1', 7, '1'], ['p1', 7, '2']]);
    expect(stamped[1]?.sql.length).toBeLessThanOrEqual(4096);
    expect(stamped[1]?.sql).toMatch(/^SELECT 'x{100}.*sha256 of the whole text: [0-9a-f]{64}.*x{100}'$/s);
    await bus.close();
  });

  it('drops when full without blocking, reports a gap marker with the exact count once the bus accepts, and refuses strict statements meanwhile', async () => {
    const bus = createMemoryBus({ maxRetained: 1 });
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 1 }, 3);
    for (let i = 0; i < 10; i++) publisher.publish(decision(`select ${i}`));
    // The three queued decisions share one bus message; the gap marker after them finds the bus full.
    await until(() => publisher.stats().published === 3 && !publisher.acceptingStrict());
    expect(publisher.stats()).toMatchObject({ depth: 0, dropped: 7, published: 3 });
    await expect(publisher.publishStrict(decision('select strict'))).rejects.toThrow('not accepting records');

    const received: BusRecord[] = [];
    await bus.consume({ durable: 'ingest', maxInFlight: 4 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    await until(() => received.some((r) => r.kind === 'gap'));
    await until(() => publisher.acceptingStrict());
    const gap = received.find((r) => r.kind === 'gap');
    expect(gap).toMatchObject({ kind: 'gap', project_id: project, proxy_id: 'p1', boot_epoch: 1, count: '8', reason: 'proxy_buffer_full' });
    const decided = received.reduce((n, r) => n + (r.kind === 'batch' ? r.decisions.length : r.kind === 'decision' ? 1 : 0), 0);
    expect(decided + Number((gap as { count: string }).count)).toBe(11);
    await publisher.close();
    await bus.close();
  });

  it('sends session marks in a sessions message of their own, with no sequence number, after the bus takes them again', async () => {
    const bus = createMemoryBus({ maxRetained: 1 });
    const publisher = new DecisionPublisher(bus, { proxyId: 'p1', bootEpoch: 7 }, 10);
    const mark = (phase: 'opened' | 'closed', n: number) => ({ phase, project_id: project, session_id: `p1.7.${n}`, credential_id: `agt_${'a'.repeat(26)}`, at: '2026-01-01T00:00:00.000Z' });
    publisher.publish(decision('select 1'));
    expect(publisher.publishSession(mark('opened', 1))).toBe(true);
    // The bus holds one unconsumed message: the marks wait, and go once it takes them.
    await until(() => publisher.stats().published === 1);
    publisher.publishSession(mark('closed', 1));
    publisher.publish(decision('select 2'));
    const received: BusRecord[] = [];
    await bus.consume({ durable: 'ingest', maxInFlight: 1 }, async (d) => void received.push(JSON.parse(Buffer.from(d.data).toString()) as BusRecord));
    await until(() => received.some((r) => r.kind === 'sessions'));
    await publisher.close();
    const stamped = received.flatMap((r) => (r.kind === 'batch' ? r.decisions : r.kind === 'decision' ? [r.decision] : []));
    expect(stamped.map((d) => d.seq)).toEqual(['1', '2']);
    const marks = received.flatMap((r) => (r.kind === 'sessions' ? [r] : []));
    expect(marks.map((r) => [r.proxy_id, r.boot_epoch, r.sessions.map((m) => [m.phase, m.session_id])])).toEqual([['p1', 7, [['opened', 'p1.7.1'], ['closed', 'p1.7.1']]]]);
    expect(publisher.stats()).toMatchObject({ depth: 0, dropped: 0 });
    await bus.close();
  });
});
