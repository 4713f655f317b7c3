import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ResponsePipeline, type Expectation, type Statement } from '../../proxy/pipeline.js';
import {
  BackendScanner,
  encodeBindComplete,
  encodeCloseComplete,
  encodeCommandComplete,
  encodeDataRow,
  encodeErrorResponse,
  encodeNoticeResponse,
  encodeParseComplete,
  encodeReadyForQuery,
} from '../../proxy/protocol/backend.js';
import { agentErrorEdit } from '../../proxy/statement-deadline.js';

function statement(): Statement {
  return { text: '"sql":"select"', event: 'query', rule: '', reason: '', startedAt: 0, ts: '', rows: 0, bytes: 0, failed: false, lost: false, truncated: false };
}

/** Feeds `server` to a pipeline in the given chunks; returns what the client received and what completed. */
function run(expectations: Expectation[], server: Buffer, cuts: number[] = []) {
  const out: Buffer[] = [];
  const completed: Statement[] = [];
  const failedPrepares: string[] = [];
  const pipeline = new ResponsePipeline((pieces) => out.push(...pieces), { completed: (s) => completed.push(s), prepareFailed: (n) => failedPrepares.push(n), ready: () => undefined });
  for (const expectation of expectations) pipeline.expect(expectation);
  const scanner = new BackendScanner();
  const points = [...new Set([0, ...cuts.filter((c) => c > 0 && c < server.length), server.length])].sort((a, b) => a - b);
  for (let i = 1; i < points.length; i++) {
    const chunk = Buffer.from(server.subarray(points[i - 1], points[i]));
    pipeline.onServerChunk(chunk, scanner.scan(chunk));
  }
  return { client: Buffer.concat(out), completed, failedPrepares, empty: pipeline.empty };
}

const server = (ends: string, extra: Partial<Extract<Expectation, { kind: 'server' }>> = {}): Expectation => ({ kind: 'server', ends, suppress: false, ...extra });
const synthetic = (bytes: Buffer): Expectation => ({ kind: 'synthetic', reply: () => bytes });
const row = encodeDataRow(['1', 'hello']);

describe('response pipeline', () => {
  it('taps each reply of a request whole, with its bytes, however the server’s bytes are cut, and passes them on unchanged (property)', () => {
    const notice = encodeNoticeResponse({ severity: 'NOTICE', code: '00000', message: 'hello' });
    const long = encodeDataRow(['2', 'x'.repeat(300)]);
    const replies = Buffer.concat([encodeBindComplete(), row, long, notice, row, encodeCommandComplete('SELECT 3'), encodeReadyForQuery('I')]);
    fc.assert(
      fc.property(fc.array(fc.nat(replies.length), { maxLength: 10 }), (cuts) => {
        const tapped: Buffer[] = [];
        const result = run([server('2'), server('CIs', { tap: (_message, bytes) => tapped.push(Buffer.from(bytes)) }), server('Z')], replies, cuts);
        expect(result.client.equals(replies)).toBe(true);
        // Runs of DataRows come as one tapped reply; notices belong to no request.
        expect(Buffer.concat(tapped).equals(Buffer.concat([row, long, row, encodeCommandComplete('SELECT 3')]))).toBe(true);
      }),
    );
  });

  it('interleaves the replies the proxy makes in request order, however the server’s bytes are cut (property)', () => {
    const replies = Buffer.concat([encodeParseComplete(), encodeBindComplete(), row, row, encodeCommandComplete('SELECT 2'), encodeReadyForQuery('I')]);
    const expected = Buffer.concat([encodeParseComplete(), encodeCloseComplete(), encodeBindComplete(), row, row, encodeCommandComplete('SELECT 2'), encodeReadyForQuery('I')]);
    fc.assert(
      fc.property(fc.array(fc.nat(replies.length), { maxLength: 8 }), (cuts) => {
        const executed = statement();
        const result = run([server('1'), synthetic(encodeCloseComplete()), server('2'), server('CIs', { statement: executed }), server('Z')], replies, cuts);
        expect(result.client.equals(expected)).toBe(true);
        expect(executed.rows).toBe(2);
        expect(result.completed).toEqual([executed]);
        expect(result.empty).toBe(true);
      }),
    );
  });

  it('hides the replies to an injected Parse, also when they arrive split, and keeps asynchronous notices (property)', () => {
    const notice = encodeNoticeResponse({ severity: 'NOTICE', code: '00000', message: 'hello' });
    const replies = Buffer.concat([encodeParseComplete(), notice, encodeBindComplete(), row, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]);
    const expected = Buffer.concat([notice, encodeBindComplete(), row, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]);
    fc.assert(
      fc.property(fc.array(fc.nat(replies.length), { maxLength: 8 }), (cuts) => {
        const result = run([server('1', { suppress: true, prepares: 'pgw_x' }), server('2'), server('CIs', { statement: statement() }), server('Z')], replies, cuts);
        expect(result.client.equals(expected)).toBe(true);
      }),
    );
  });

  it('after an error skips every owed reply up to the Sync, failing their statements and forgetting a failed prepare', () => {
    const error = encodeErrorResponse({ severity: 'ERROR', code: '42P01', message: 'relation does not exist' });
    const executed = statement();
    const replies = Buffer.concat([error, encodeReadyForQuery('I')]);
    const result = run([server('1', { prepares: 'pgw_y' }), synthetic(encodeParseComplete()), server('2'), server('CIs', { statement: executed }), server('Z')], replies);
    expect(result.client.equals(replies)).toBe(true);
    expect(executed.failed).toBe(true);
    expect(result.completed).toEqual([executed]);
    expect(result.failedPrepares).toEqual(['pgw_y']);
    expect(result.empty).toBe(true);
  });

  it('when the connection is gone, completes every statement still owed as lost, and none that ended before', () => {
    const completed: Statement[] = [];
    const pipeline = new ResponsePipeline(() => undefined, { completed: (s) => completed.push(s), prepareFailed: () => undefined, ready: () => undefined });
    const [done, running, queued] = [statement(), statement(), statement()];
    for (const expectation of [server('Z', { statement: done }), server('Z', { statement: running }), server('Z', { statement: queued })]) pipeline.expect(expectation);
    const replies = Buffer.concat([encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I'), row]);
    pipeline.onServerChunk(replies, new BackendScanner().scan(replies));
    pipeline.abandon();
    expect(completed).toEqual([done, running, queued]);
    expect([done, running, queued].map((s) => [s.failed, s.lost])).toEqual([[false, false], [true, true], [true, true]]);
    expect(running.rows).toBe(1);
    expect(pipeline.empty).toBe(true);
  });

  it('delivers server errors without their DETAIL when asked to, however the bytes are cut, and everything else as it came (property)', () => {
    const failing = encodeErrorResponse({ severity: 'ERROR', code: '23502', message: 'null value in column "id" violates not-null constraint', detail: 'Failing row contains (null, user1@example.com).' });
    const replies = Buffer.concat([encodeParseComplete(), encodeBindComplete(), failing, encodeReadyForQuery('I'), encodeParseComplete(), row, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]);
    const stripped = encodeErrorResponse({ severity: 'ERROR', code: '23502', message: 'null value in column "id" violates not-null constraint' });
    const expected = Buffer.concat([encodeParseComplete(), encodeBindComplete(), stripped, encodeReadyForQuery('I'), encodeParseComplete(), row, encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]);
    fc.assert(
      fc.property(fc.array(fc.nat(replies.length), { maxLength: 8 }), fc.boolean(), (cuts, hide) => {
        const out: Buffer[] = [];
        const pipeline = new ResponsePipeline((pieces) => out.push(...pieces), { completed: () => undefined, prepareFailed: () => undefined, ready: () => undefined }, () => agentErrorEdit(hide, undefined));
        for (const expectation of [server('1'), server('2'), server('CIs', { statement: statement() }), server('Z'), server('1'), server('CIs', { statement: statement() }), server('Z')]) pipeline.expect(expectation);
        const scanner = new BackendScanner();
        const points = [...new Set([0, ...cuts.filter((c) => c > 0 && c < replies.length), replies.length])].sort((a, b) => a - b);
        for (let i = 1; i < points.length; i++) {
          const chunk = Buffer.from(replies.subarray(points[i - 1], points[i]));
          pipeline.onServerChunk(chunk, scanner.scan(chunk), scanner.inErrorResponse);
        }
        expect(Buffer.concat(out).equals(hide ? expected : replies)).toBe(true);
      }),
    );
  });

  it('answers at once when it owes nothing to the server first', () => {
    const result = run([synthetic(Buffer.concat([encodeErrorResponse({ severity: 'ERROR', code: '0A000', message: 'no' }), encodeReadyForQuery('I')]))], Buffer.alloc(0));
    expect(result.client[0]).toBe('E'.charCodeAt(0));
    expect(result.empty).toBe(true);
  });
});

describe('a ReadyForQuery the session must see first', () => {
  // Issue 22: a write's answer waits for its cache invalidation to leave the process, which its
  // ReadyForQuery publishes: the session sees it before the client is sent anything of the chunk.
  for (const seesFirst of [false, true]) {
    it(`is accounted before the chunk is written when the session asks (${seesFirst ? 'asks' : 'does not ask'})`, () => {
      const order: string[] = [];
      const pipeline = new ResponsePipeline(() => order.push('written'), { completed: () => undefined, prepareFailed: () => undefined, ready: () => order.push('ready'), seesReadyFirst: () => seesFirst });
      pipeline.expect(server('Z'));
      const chunk = Buffer.concat([encodeCommandComplete('UPDATE 1'), encodeReadyForQuery('I')]);
      pipeline.onServerChunk(chunk, new BackendScanner().scan(chunk));
      expect(order).toEqual(seesFirst ? ['ready', 'written'] : ['written', 'ready']);
    });
  }
});

describe('a statement ended in a chunk the pipeline cuts (a tapped, rewritten or synthesized reply)', () => {
  // Its audit record need not delay the reply; what it settles (a cursor, the result cache's capture) is settled before.
  it('is settled before the client is written to and audited after, in the order the statements ended', () => {
    const order: string[] = [];
    const pipeline = new ResponsePipeline(() => order.push('written'), {
      completed: (s) => order.push(`audited ${s.text}`),
      prepareFailed: () => undefined,
      ready: () => order.push('ready'),
    });
    const first = { ...statement(), text: 'first', settled: () => order.push('settled first') };
    const second = { ...statement(), text: 'second', settled: () => order.push('settled second') };
    pipeline.expect(server('C', { statement: first, tap: () => order.push('tapped') }));
    pipeline.expect(synthetic(encodeCloseComplete()));
    pipeline.expect(server('Z', { statement: second }));
    const chunk = Buffer.concat([row, encodeCommandComplete('SELECT 1'), encodeCommandComplete('SELECT 0'), encodeReadyForQuery('I')]);
    pipeline.onServerChunk(chunk, new BackendScanner().scan(chunk));
    expect(order).toEqual(['tapped', 'tapped', 'settled first', 'ready', 'settled second', 'written', 'audited first', 'audited second']);
  });

  it('is still audited when writing to the client throws', () => {
    const audited: string[] = [];
    const pipeline = new ResponsePipeline(
      () => {
        throw new Error('write failed');
      },
      { completed: (s) => audited.push(s.text), prepareFailed: () => undefined, ready: () => undefined },
    );
    pipeline.expect(server('Z', { statement: { ...statement(), text: 'only' }, tap: () => undefined }));
    const chunk = Buffer.concat([encodeCommandComplete('SELECT 0'), encodeReadyForQuery('I')]);
    expect(() => pipeline.onServerChunk(chunk, new BackendScanner().scan(chunk))).toThrow('write failed');
    expect(audited).toEqual(['only']);
  });
});
