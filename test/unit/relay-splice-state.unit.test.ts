import { serialize } from 'pg-protocol';
import { describe, expect, it } from 'vitest';
import { SpliceState } from '../../proxy/relay/splice-state.js';

/** A backend message of `type` with `body`. */
function backend(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeUInt32BE(4 + body.length, 1);
  return Buffer.concat([header, body]);
}

const ready = (status: string): Buffer => backend('Z', Buffer.from(status, 'latin1'));
const complete = (tag: string): Buffer => backend('C', Buffer.from(`${tag}\0`, 'latin1'));
const copyIn = backend('G', Buffer.from([0, 0, 0]));

/** Feeds each piece one byte at a time when `bytewise`, so that every header is split across chunks. */
function feed(into: (chunk: Buffer) => unknown, bytes: Buffer, bytewise: boolean): void {
  if (!bytewise) return void into(bytes);
  for (let at = 0; at < bytes.length; at++) into(bytes.subarray(at, at + 1));
}

describe.each([false, true])('the splice state (bytewise %s)', (bytewise) => {
  const origin = (state: SpliceState, bytes: Buffer): void => feed((chunk) => state.fromOrigin(chunk), bytes, bytewise);
  const upstream = (state: SpliceState, bytes: Buffer): void => feed((chunk) => state.fromUpstream(chunk), bytes, bytewise);

  it('is idle at the start, after an answered query, and after an extended batch and its Sync', () => {
    const state = new SpliceState();
    expect(state.idle).toBe(true);
    origin(state, serialize.query('select 1'));
    expect(state.idle).toBe(false);
    upstream(state, Buffer.concat([complete('SELECT 1'), ready('I')]));
    expect(state.idle).toBe(true);
    origin(state, Buffer.concat([serialize.parse({ text: 'select $1' }), serialize.bind({ values: ['1'] }), serialize.execute({}), serialize.sync()]));
    expect(state.idle).toBe(false);
    upstream(state, Buffer.concat([backend('1'), backend('2'), complete('SELECT 1'), ready('I')]));
    expect(state.idle).toBe(true);
    // A notice or notification after ReadyForQuery leaves it idle.
    upstream(state, backend('A', Buffer.from([0, 0, 0, 1, 0, 0])));
    expect(state.idle).toBe(true);
  });

  it('is not idle inside a transaction or a failed one, until it ends', () => {
    const state = new SpliceState();
    origin(state, serialize.query('begin'));
    upstream(state, Buffer.concat([complete('BEGIN'), ready('T')]));
    expect(state.idle).toBe(false);
    origin(state, serialize.query('select 1/0'));
    upstream(state, Buffer.concat([backend('E', Buffer.from('SERROR\0\0')), ready('E')]));
    expect(state.idle).toBe(false);
    origin(state, serialize.query('rollback'));
    upstream(state, Buffer.concat([complete('ROLLBACK'), ready('I')]));
    expect(state.idle).toBe(true);
  });

  it('is not idle while a reply is owed, with a Parse not yet synced, or with half a message either way', () => {
    const owed = new SpliceState();
    origin(owed, Buffer.concat([serialize.query('select 1'), serialize.query('select 2')]));
    upstream(owed, Buffer.concat([complete('SELECT 1'), ready('I')]));
    expect(owed.idle).toBe(false);

    const unsynced = new SpliceState();
    origin(unsynced, Buffer.concat([serialize.parse({ text: 'select 1' }), serialize.flush()]));
    expect(unsynced.idle).toBe(false);

    const halfSent = new SpliceState();
    halfSent.fromOrigin(serialize.query('select 1').subarray(0, 7));
    expect(halfSent.idle).toBe(false);

    const halfRead = new SpliceState();
    origin(halfRead, serialize.query('select 1'));
    upstream(halfRead, Buffer.concat([complete('SELECT 1'), ready('I'), complete('SELECT 1').subarray(0, 3)]));
    expect(halfRead.idle).toBe(false);
  });

  it('is not idle during a COPY from the client, and idle once it is done', () => {
    const state = new SpliceState();
    origin(state, serialize.query('copy t from stdin'));
    upstream(state, copyIn);
    origin(state, serialize.copyData(Buffer.from('1\n')));
    expect(state.idle).toBe(false);
    origin(state, serialize.copyDone());
    expect(state.idle).toBe(false);
    upstream(state, Buffer.concat([complete('COPY 1'), ready('I')]));
    expect(state.idle).toBe(true);
  });

  it('is lost for good on a ReadyForQuery nothing asked for, or a length no message has', () => {
    const unasked = new SpliceState();
    upstream(unasked, ready('I'));
    origin(unasked, serialize.query('select 1'));
    upstream(unasked, ready('I'));
    expect(unasked.idle).toBe(false);

    const broken = new SpliceState();
    origin(broken, Buffer.from([0x51, 0, 0, 0, 1]));
    expect(broken.idle).toBe(false);
  });
});

describe('a Terminate from the origin', () => {
  it('is held back from the upstream: what comes before it is forwarded, and the link ends idle', () => {
    const state = new SpliceState();
    const query = serialize.query('select 1');
    expect(state.fromOrigin(query)).toEqual({ forward: query.length, terminated: false });
    state.fromUpstream(Buffer.concat([complete('SELECT 1'), ready('I')]));
    expect(state.fromOrigin(Buffer.concat([serialize.sync(), serialize.end()]))).toEqual({ forward: 5, terminated: true });
    state.fromUpstream(ready('I'));
    expect(state.idle).toBe(true);
  });

  it('split across chunks is forwarded like any message, and the link is not idle', () => {
    const state = new SpliceState();
    const terminate = serialize.end();
    expect(state.fromOrigin(terminate.subarray(0, 2))).toEqual({ forward: 2, terminated: false });
    expect(state.fromOrigin(terminate.subarray(2))).toEqual({ forward: 3, terminated: false });
    expect(state.idle).toBe(false);
  });
});
