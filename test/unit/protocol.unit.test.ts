import fc from 'fast-check';
import { serialize } from 'pg-protocol';
import type { BackendMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { describe, expect, it } from 'vitest';
import {
  BackendScanner,
  commandTag,
  encodeAuthenticationCleartextPassword,
  encodeAuthenticationOk,
  encodeAuthenticationSasl,
  encodeAuthenticationSaslContinue,
  encodeAuthenticationSaslFinal,
  encodeBackendKeyData,
  encodeBindComplete,
  encodeCloseComplete,
  encodeCommandComplete,
  encodeDataRow,
  encodeEmptyQueryResponse,
  encodeErrorResponse,
  encodeGssEncResponse,
  encodeNegotiateProtocolVersion,
  encodeNoData,
  encodeNoticeResponse,
  encodeParameterDescription,
  encodeParameterStatus,
  encodeParseComplete,
  encodeReadyForQuery,
  encodeRowDescription,
  encodeSslResponse,
  type CommandCompleteMessage,
  type ErrorFields,
  type ScannedMessage,
  type TransactionStatus,
} from '../../proxy/protocol/backend.js';
import { ProtocolViolation } from '../../proxy/protocol/errors.js';
import {
  decodeFrontendMessage,
  decodePasswordMessage,
  decodeSaslInitialResponse,
  decodeSaslResponse,
  FrontendFramer,
  paramFormat,
  type Bind,
  type FramerOptions,
  type FrontendFrame,
  type FrontendMessage,
  type MessageFrame,
  type StartupPacket,
} from '../../proxy/protocol/frontend.js';

const STARTUP = serialize.startup({ user: 'agent', database: 'app' });

function drain(framer: FrontendFramer): FrontendFrame[] {
  const frames: FrontendFrame[] = [];
  for (let frame = framer.next(); frame !== undefined; frame = framer.next()) frames.push(frame);
  return frames;
}

function frameAll(chunks: readonly Buffer[], options?: FramerOptions): FrontendFrame[] {
  const framer = new FrontendFramer(options);
  return chunks.flatMap((chunk) => {
    framer.push(chunk);
    return drain(framer);
  });
}

/** Frames the startup packet, then decodes the one regular message in `bytes`. */
function decodeOne(bytes: Buffer): FrontendMessage {
  const [startup, frame, ...rest] = frameAll([STARTUP, bytes]);
  expect(startup?.kind).toBe('StartupMessage');
  expect(rest).toEqual([]);
  return decodeFrontendMessage(frame as MessageFrame);
}

function decoded(frames: readonly FrontendFrame[]): (StartupPacket | FrontendMessage)[] {
  return frames.map((frame) => (frame.kind === 'Message' ? decodeFrontendMessage(frame) : frame));
}

/** Splits `bytes` at the given cut points (taken modulo its length). */
function split(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.subarray(from, point));
    from = point;
  }
  return chunks;
}

/** A regular message with a correct length word. */
function message(type: string, body: Buffer | readonly number[]): Buffer {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const header = Buffer.alloc(5);
  header[0] = type.charCodeAt(0);
  header.writeInt32BE(4 + bytes.length, 1);
  return Buffer.concat([header, bytes]);
}

/** A message header claiming `length`, whatever follows. */
function header(type: string, length: number): Buffer {
  const bytes = Buffer.alloc(5);
  bytes[0] = type.charCodeAt(0);
  bytes.writeInt32BE(length, 1);
  return bytes;
}

function startupPacket(code: number, body: Buffer | readonly number[] = []): Buffer {
  const rest = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + rest.length, 0);
  head.writeInt32BE(code, 4);
  return Buffer.concat([head, rest]);
}

const cstr = (value: string): Buffer => Buffer.from(`${value}\0`, 'utf8');
const int16 = (value: number): Buffer => Buffer.from([(value >> 8) & 0xff, value & 0xff]);
const int32 = (value: number): Buffer => {
  const bytes = Buffer.alloc(4);
  bytes.writeInt32BE(value);
  return bytes;
};

function expectViolation(action: () => unknown, text?: RegExp): void {
  let thrown: unknown;
  try {
    action();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ProtocolViolation);
  expect((thrown as ProtocolViolation).code).toBe('08P01');
  if (text) expect((thrown as ProtocolViolation).message).toMatch(text);
}

const text = (maxLength = 40): fc.Arbitrary<string> => fc.string({ unit: 'grapheme', maxLength }).map((value) => value.replaceAll('\0', ''));
const bytes = (maxLength = 64): fc.Arbitrary<Buffer> => fc.uint8Array({ maxLength }).map((array) => Buffer.from(array));
const cuts = fc.array(fc.nat(), { maxLength: 30 });

/** A frontend message as node-postgres serializes it, with what decoding it must give. */
interface Sent {
  readonly bytes: Buffer;
  readonly expected: Record<string, unknown> & { readonly kind: string };
}

const sent: fc.Arbitrary<Sent> = fc.oneof(
  text(200).map((sql) => ({ bytes: serialize.query(sql), expected: { kind: 'Query', sql } })),
  fc.record({ name: text(20), sql: text(), types: fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { maxLength: 8 }) }).map(({ name, sql, types }) => ({
    bytes: serialize.parse({ name, text: sql, types }),
    expected: { kind: 'Parse', name, sql, paramTypes: types },
  })),
  fc
    .record({ portal: text(10), statement: text(10), binary: fc.boolean(), values: fc.array(fc.oneof(text(), bytes(), fc.constant(null)), { maxLength: 6 }) })
    .map(({ portal, statement, binary, values }) => ({
      bytes: serialize.bind({ portal, statement, binary, values }),
      expected: {
        kind: 'Bind',
        portal,
        statement,
        paramFormats: values.map((value) => (Buffer.isBuffer(value) ? 1 : 0)),
        params: values.map((value) => (typeof value === 'string' ? Buffer.from(value, 'utf8') : value)),
        resultFormats: [binary ? 1 : 0],
      },
    })),
  fc.record({ target: fc.constantFrom('S' as const, 'P' as const), name: text(10) }).map(({ target, name }) => ({
    bytes: serialize.describe({ type: target, name }),
    expected: { kind: 'Describe', target, name },
  })),
  fc.record({ target: fc.constantFrom('S' as const, 'P' as const), name: text(10) }).map(({ target, name }) => ({
    bytes: serialize.close({ type: target, name }),
    expected: { kind: 'Close', target, name },
  })),
  fc.record({ portal: text(10), rows: fc.integer({ min: 0, max: 2 ** 31 - 1 }) }).map(({ portal, rows }) => ({
    bytes: serialize.execute({ portal, rows }),
    expected: { kind: 'Execute', portal, maxRows: rows },
  })),
  fc.constant({ bytes: serialize.sync(), expected: { kind: 'Sync' } }),
  fc.constant({ bytes: serialize.flush(), expected: { kind: 'Flush' } }),
  fc.constant({ bytes: serialize.end(), expected: { kind: 'Terminate' } }),
  fc.constant({ bytes: serialize.copyDone(), expected: { kind: 'CopyDone' } }),
  bytes(300).map((data) => ({ bytes: serialize.copyData(data), expected: { kind: 'CopyData', data } })),
  text().map((reason) => ({ bytes: serialize.copyFail(reason), expected: { kind: 'CopyFail', message: reason } })),
  text().map((password) => ({ bytes: serialize.password(password), expected: { kind: 'AuthResponse', body: cstr(password) } })),
);

describe('FrontendFramer: startup packets', () => {
  it('decodes the StartupMessage node-postgres sends, then switches to typed messages', () => {
    const [startup, query] = frameAll([STARTUP, serialize.query('select 1')]);
    expect(startup).toEqual({
      kind: 'StartupMessage',
      minorVersion: 0,
      parameters: new Map([
        ['user', 'agent'],
        ['database', 'app'],
        ['client_encoding', 'UTF8'],
      ]),
      raw: STARTUP,
    });
    expect(decoded([query as FrontendFrame])).toEqual([{ kind: 'Query', sql: 'select 1', raw: serialize.query('select 1') }]);
  });

  it('accepts protocol 3.2 and reports the minor version; a repeated parameter keeps its last value', () => {
    const packet = startupPacket((3 << 16) | 2, Buffer.concat([cstr('user'), cstr('a'), cstr('user'), cstr('b'), Buffer.from([0])]));
    expect(frameAll([packet])).toEqual([{ kind: 'StartupMessage', minorVersion: 2, parameters: new Map([['user', 'b']]), raw: packet }]);
  });

  it('stays in the startup phase after SSLRequest and GSSENCRequest', () => {
    const gss = startupPacket(80877104);
    const frames = frameAll([serialize.requestSsl(), gss, STARTUP, serialize.sync()]);
    expect(frames.map((frame) => frame.kind)).toEqual(['SSLRequest', 'GSSENCRequest', 'StartupMessage', 'Message']);
  });

  it('reports bytes sent ahead of the TLS handshake', () => {
    const framer = new FrontendFramer();
    framer.push(Buffer.concat([serialize.requestSsl(), STARTUP]));
    expect(framer.next()?.kind).toBe('SSLRequest');
    expect(framer.bufferedBytes).toBe(STARTUP.length);
  });

  it('decodes CancelRequest with a 4-byte key (3.0) and a longer key (3.2)', () => {
    const legacy = serialize.cancel(4242, -7);
    expect(frameAll([legacy])).toEqual([{ kind: 'CancelRequest', processId: 4242, secretKey: int32(-7), raw: legacy }]);
    const key = Buffer.alloc(32, 0xab);
    const long = startupPacket(80877102, Buffer.concat([int32(99), key]));
    expect(frameAll([long])).toEqual([{ kind: 'CancelRequest', processId: 99, secretKey: key, raw: long }]);
  });

  it('refuses malformed startup packets with 08P01', () => {
    const cases: [string, Buffer][] = [
      ['unknown request code', startupPacket((1234 << 16) | 5681)],
      ['protocol 2.0', startupPacket(2 << 16, [0])],
      ['length below 8', Buffer.from([0, 0, 0, 7, 0, 3, 0, 0])],
      ['negative length', Buffer.from([0xff, 0xff, 0xff, 0xff])],
      ['SSLRequest with a body', startupPacket(80877103, [0])],
      ['GSSENCRequest with a body', startupPacket(80877104, [0, 0, 0, 0])],
      ['CancelRequest key of 3 bytes', startupPacket(80877102, Buffer.concat([int32(1), Buffer.alloc(3)]))],
      ['CancelRequest key of 257 bytes', startupPacket(80877102, Buffer.concat([int32(1), Buffer.alloc(257)]))],
      ['missing final terminator', startupPacket(3 << 16, cstr('user'))],
      ['name without value', startupPacket(3 << 16, Buffer.concat([cstr('user'), Buffer.from('agent')]))],
      ['bytes after terminator', startupPacket(3 << 16, Buffer.concat([cstr('user'), cstr('a'), Buffer.from([0, 1])]))],
    ];
    for (const [, packet] of cases) expectViolation(() => frameAll([packet]));
  });

  it('refuses a startup packet over 10,000 bytes from its length word alone', () => {
    const framer = new FrontendFramer();
    framer.push(int32(10_001));
    expectViolation(() => framer.next(), /startup packet/);
    expect(frameAll([startupPacket(3 << 16, Buffer.concat([cstr('user'), cstr('x'.repeat(10_000 - 15)), Buffer.from([0])]))])).toHaveLength(1);
  });
});

describe('FrontendFramer and decoders: what node-postgres sends', () => {
  it('round-trips every message type through pg-protocol serialize', () => {
    fc.assert(
      fc.property(sent, ({ bytes, expected }) => {
        expect(decodeOne(bytes)).toEqual({ ...expected, raw: bytes });
      }),
    );
  });

  it('decodes Bind with NULLs, binary values and the none/one/each format rule', () => {
    const bind = decodeOne(serialize.bind({ portal: 'p1', statement: 's1', values: ['42', null, Buffer.from([1, 2])], binary: true })) as Bind;
    expect(bind.params).toEqual([Buffer.from('42'), null, Buffer.from([1, 2])]);
    expect(bind.paramFormats).toEqual([0, 0, 1]);
    expect(bind.resultFormats).toEqual([1]);
    expect([0, 1, 2].map((index) => paramFormat(bind, index))).toEqual([0, 0, 1]);
    const one = decodeOne(message('B', Buffer.concat([cstr(''), cstr(''), int16(1), int16(1), int16(2), int32(0), int32(0), int16(0)]))) as Bind;
    expect([paramFormat(one, 0), paramFormat(one, 1)]).toEqual([1, 1]);
    const none = decodeOne(message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(1), int32(-1), int16(0)]))) as Bind;
    expect(paramFormat(none, 0)).toBe(0);
  });

  it('reads parameter counts as unsigned 16-bit, as PostgreSQL does', () => {
    const values = Array.from({ length: 40_000 }, (_, index) => String(index));
    const bind = decodeOne(serialize.bind({ values })) as Bind;
    expect(bind.params).toHaveLength(40_000);
    expect(bind.params[39_999]).toEqual(Buffer.from('39999'));
  });

  it('decodes the three authentication responses by context', () => {
    const initial = decodeOne(serialize.sendSASLInitialResponseMessage('SCRAM-SHA-256', 'n,,n=,r=abc'));
    const final = decodeOne(serialize.sendSCRAMClientFinalMessage('c=biws,r=abcdef,p=xyz'));
    const password = decodeOne(serialize.password('s3cret'));
    if (initial.kind !== 'AuthResponse' || final.kind !== 'AuthResponse' || password.kind !== 'AuthResponse') throw new Error('expected AuthResponse');
    expect(decodeSaslInitialResponse(initial.body)).toEqual({ mechanism: 'SCRAM-SHA-256', data: Buffer.from('n,,n=,r=abc') });
    expect(decodeSaslResponse(final.body)).toEqual(Buffer.from('c=biws,r=abcdef,p=xyz'));
    expect(decodePasswordMessage(password.body)).toBe('s3cret');
    expect(decodeSaslInitialResponse(Buffer.concat([cstr('SCRAM-SHA-256'), int32(-1)]))).toEqual({ mechanism: 'SCRAM-SHA-256', data: null });
  });

  it('recognizes FunctionCall so the proxy can refuse it', () => {
    const call = message('F', Buffer.concat([int32(1598), int16(0), int16(0), int16(0)]));
    expect(decodeOne(call)).toEqual({ kind: 'FunctionCall', raw: call });
  });

  it('returns views into the pushed chunk, copying only messages that span chunks', () => {
    const chunk = Buffer.concat([STARTUP, serialize.query('select 1'), serialize.sync()]);
    const frames = frameAll([chunk]);
    for (const frame of frames) expect(frame.raw.buffer).toBe(chunk.buffer);
    const query = serialize.query('select 2');
    const [, spanning] = frameAll([STARTUP, query.subarray(0, 3), query.subarray(3)]);
    expect(spanning?.raw).toEqual(query);
  });

  it('yields the same messages however the byte stream is split', () => {
    fc.assert(
      fc.property(fc.array(sent, { maxLength: 25 }), cuts, (messages, points) => {
        const stream = Buffer.concat([STARTUP, ...messages.map((m) => m.bytes)]);
        const frames = frameAll(split(stream, points));
        expect(frames.map((frame) => frame.raw)).toEqual([STARTUP, ...messages.map((m) => m.bytes)]);
        expect(decoded(frames.slice(1))).toEqual(messages.map((m) => ({ ...m.expected, raw: m.bytes })));
      }),
    );
  });

  it('handles a stream fed one byte at a time', () => {
    const messages = [STARTUP, serialize.parse({ name: 's', text: 'select $1', types: [23] }), serialize.bind({ statement: 's', values: ['1'] }), serialize.execute(), serialize.sync()];
    const stream = Buffer.concat(messages);
    const frames = frameAll(Array.from(stream, (byte) => Buffer.from([byte])));
    expect(frames.map((frame) => frame.raw)).toEqual(messages);
  });

  it('delivers the messages before a malformed one, then throws', () => {
    const framer = new FrontendFramer();
    framer.push(Buffer.concat([STARTUP, serialize.query('select 1'), header('Q', 3)]));
    expect(framer.next()?.kind).toBe('StartupMessage');
    expect(framer.next()?.kind).toBe('Message');
    expectViolation(() => framer.next(), /invalid message length 3/);
  });
});

describe('FrontendFramer and decoders: malformed input', () => {
  function framed(bytes: Buffer, options?: FramerOptions): () => unknown {
    return () => decoded(frameAll([STARTUP, bytes], options));
  }

  it('refuses a length word below 4', () => {
    expectViolation(framed(header('Q', 3)));
    expectViolation(framed(header('S', -1)));
  });

  it('refuses a length over the maximum from the header alone, without buffering the body', () => {
    expectViolation(framed(header('Q', 1025), { maxMessageBytes: 1024 }), /invalid message length 1025/);
    expect(decoded(frameAll([STARTUP, serialize.query('x'.repeat(1024 - 5))], { maxMessageBytes: 1024 }))).toHaveLength(2);
    expectViolation(framed(header('d', 64 * 1024 * 1024 + 1)));
  });

  it('applies PostgreSQL’s 10,000-byte limit to types that never carry SQL or data', () => {
    for (const type of ['S', 'H', 'X', 'D', 'E', 'C', 'c', 'f']) expectViolation(framed(header(type, 10_001)));
    expectViolation(framed(header('p', 65_536)));
  });

  it('refuses an unknown type byte as soon as it arrives', () => {
    const framer = new FrontendFramer();
    framer.push(STARTUP);
    framer.next();
    framer.push(Buffer.from('Z'));
    expectViolation(() => framer.next(), /invalid frontend message type "Z"/);
  });

  it('refuses truncated bodies, missing NULs, overrunning or negative counts, bad codes and trailing bytes', () => {
    const cases: Buffer[] = [
      message('Q', Buffer.from('select 1')),
      message('Q', Buffer.concat([cstr('select 1'), Buffer.from([0])])),
      message('P', Buffer.concat([cstr('s'), cstr('select $1'), int16(2), int32(23)])),
      message('P', Buffer.concat([cstr('s'), cstr('select $1'), int16(-1)])),
      message('P', Buffer.concat([cstr('s'), Buffer.from('select')])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(-1)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(1), int32(-2), int16(0)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(1), int32(10), Buffer.from('abc'), int16(0)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(2), int16(0), int16(0), int16(3), int32(-1), int32(-1), int32(-1), int16(0)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(1), int16(2), int16(0), int16(0)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(0), int16(1), int16(7)])),
      message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(0)])),
      message('D', Buffer.concat([Buffer.from('X'), cstr('name')])),
      message('D', Buffer.from('S')),
      message('C', Buffer.concat([Buffer.from('P'), Buffer.from('portal')])),
      message('E', cstr('')),
      message('E', Buffer.concat([cstr(''), int32(0), Buffer.from([1])])),
      message('S', [0]),
      message('H', [0]),
      message('X', [0]),
      message('c', [0]),
      message('f', Buffer.from('reason')),
    ];
    for (const bytes of cases) expectViolation(framed(bytes));
  });

  it('refuses malformed authentication responses', () => {
    expectViolation(() => decodePasswordMessage(Buffer.from('no terminator')));
    expectViolation(() => decodePasswordMessage(Buffer.concat([cstr('pw'), Buffer.from([1])])));
    expectViolation(() => decodeSaslInitialResponse(Buffer.from('SCRAM-SHA-256')));
    expectViolation(() => decodeSaslInitialResponse(Buffer.concat([cstr('SCRAM-SHA-256'), int32(10), Buffer.from('short')])));
    expectViolation(() => decodeSaslInitialResponse(Buffer.concat([cstr('SCRAM-SHA-256'), int32(-2)])));
    expectViolation(() => decodeSaslInitialResponse(Buffer.concat([cstr('SCRAM-SHA-256'), int32(1), Buffer.from('ab')])));
  });
});

/** Parses `bytes` with node-postgres's own backend parser. */
function pgParse(bytes: Buffer): BackendMessage[] {
  const messages: BackendMessage[] = [];
  new Parser().parse(bytes, (parsed) => messages.push(parsed));
  return messages;
}

describe('backend encoders, checked by pg-protocol’s Parser', () => {
  it('encodes authentication, session and status messages a real client understands', () => {
    expect(pgParse(encodeAuthenticationOk())).toMatchObject([{ name: 'authenticationOk', length: 8 }]);
    expect(pgParse(encodeAuthenticationCleartextPassword())).toMatchObject([{ name: 'authenticationCleartextPassword' }]);
    expect(pgParse(encodeAuthenticationSasl(['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256']))).toMatchObject([{ name: 'authenticationSASL', mechanisms: ['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256'] }]);
    expect(pgParse(encodeAuthenticationSaslContinue('r=abc,s=c2FsdA==,i=4096'))).toMatchObject([{ name: 'authenticationSASLContinue', data: 'r=abc,s=c2FsdA==,i=4096' }]);
    expect(pgParse(encodeAuthenticationSaslFinal(Buffer.from('v=c2ln')))).toMatchObject([{ name: 'authenticationSASLFinal', data: 'v=c2ln' }]);
    expect(pgParse(encodeParameterStatus('server_version', '17.4'))).toMatchObject([{ name: 'parameterStatus', parameterName: 'server_version', parameterValue: '17.4' }]);
    expect(pgParse(encodeBackendKeyData(31337, int32(-123456)))).toMatchObject([{ name: 'backendKeyData', processID: 31337, secretKey: -123456 }]);
    for (const status of ['I', 'T', 'E'] as const) expect(pgParse(encodeReadyForQuery(status))).toMatchObject([{ name: 'readyForQuery', status }]);
  });

  it('encodes ErrorResponse and NoticeResponse fields', () => {
    const fields: ErrorFields = { severity: 'ERROR', code: '42501', message: 'permission denied for table secrets', detail: 'policy p1', hint: 'ask an admin', position: 15 };
    expect(pgParse(encodeErrorResponse(fields))).toMatchObject([
      { name: 'error', severity: 'ERROR', code: '42501', message: 'permission denied for table secrets', detail: 'policy p1', hint: 'ask an admin', position: '15' },
    ]);
    expect(pgParse(encodeNoticeResponse({ severity: 'NOTICE', code: '00000', message: 'masked' }))).toMatchObject([{ name: 'notice', severity: 'NOTICE', code: '00000', message: 'masked', detail: undefined }]);
  });

  it('encodes a synthesized result set and the extended-protocol acknowledgements', () => {
    const stream = Buffer.concat([
      encodeParseComplete(),
      encodeParameterDescription([23, 3_000_000_000]),
      encodeBindComplete(),
      encodeRowDescription([{ name: 'id', typeOid: 23, typeSize: 4 }, { name: 'note', typeOid: 25, tableOid: 16384, columnNumber: 2, format: 1 }]),
      encodeDataRow(['1', null]),
      encodeDataRow([Buffer.from('2'), 'ünïcode']),
      encodeCommandComplete('SELECT 2'),
      encodeCloseComplete(),
      encodeNoData(),
      encodeEmptyQueryResponse(),
    ]);
    expect(pgParse(stream)).toMatchObject([
      { name: 'parseComplete' },
      { name: 'parameterDescription', dataTypeIDs: [23, 3_000_000_000] },
      { name: 'bindComplete' },
      {
        name: 'rowDescription',
        fields: [
          { name: 'id', tableID: 0, columnID: 0, dataTypeID: 23, dataTypeSize: 4, dataTypeModifier: -1, format: 'text' },
          { name: 'note', tableID: 16384, columnID: 2, dataTypeID: 25, dataTypeSize: -1, dataTypeModifier: -1, format: 'binary' },
        ],
      },
      { name: 'dataRow', fields: ['1', null] },
      { name: 'dataRow', fields: ['2', 'ünïcode'] },
      { name: 'commandComplete', text: 'SELECT 2' },
      { name: 'closeComplete' },
      { name: 'noData' },
      { name: 'emptyQuery' },
    ]);
  });

  it('round-trips arbitrary text through DataRow, CommandComplete and ErrorResponse', () => {
    fc.assert(
      fc.property(fc.array(fc.option(text(), { nil: null }), { maxLength: 8 }), text(), text(), (values, tag, detail) => {
        const parsed = pgParse(Buffer.concat([encodeDataRow(values), encodeCommandComplete(tag), encodeErrorResponse({ severity: 'ERROR', code: '08P01', message: tag, detail })]));
        expect(parsed).toMatchObject([
          { name: 'dataRow', fields: values },
          { name: 'commandComplete', text: tag },
          { name: 'error', message: tag, detail },
        ]);
      }),
    );
  });

  it('encodes NegotiateProtocolVersion and the single-byte encryption answers', () => {
    expect(encodeNegotiateProtocolVersion(0, ['_pq_.foo'])).toEqual(Buffer.concat([Buffer.from('v'), int32(4 + 8 + 9), int32(0), int32(1), cstr('_pq_.foo')]));
    expect([encodeSslResponse(true), encodeSslResponse(false), encodeGssEncResponse(true), encodeGssEncResponse(false)].map(String)).toEqual(['S', 'N', 'G', 'N']);
  });

  it('refuses strings with NUL characters and cancel keys of the wrong size', () => {
    expect(() => encodeCommandComplete('SELECT\0 1')).toThrow(RangeError);
    expect(() => encodeErrorResponse({ severity: 'ERROR', code: '42000', message: 'a\0b' })).toThrow(RangeError);
    expect(() => encodeBackendKeyData(1, Buffer.alloc(3))).toThrow(RangeError);
    expect(() => encodeBackendKeyData(1, Buffer.alloc(257))).toThrow(RangeError);
  });
});

function copyData(data: Buffer): Buffer {
  return message('d', data);
}

/** A backend message, and what the scanner must report for it (before runs are merged). */
interface Served {
  readonly bytes: Buffer;
  readonly expected: Record<string, unknown> & { readonly kind: string; readonly type: string };
}

const errorFields: fc.Arbitrary<ErrorFields> = fc
  .record({ severity: fc.constantFrom('ERROR', 'FATAL'), code: fc.stringMatching(/^[0-9A-Z]{5}$/), message: text(), detail: fc.option(text(), { nil: undefined }), position: fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: undefined }) })
  .map(({ detail, position, ...required }) => ({ ...required, ...(detail !== undefined ? { detail } : {}), ...(position !== undefined ? { position } : {}) }));

const served: fc.Arbitrary<Served> = fc.oneof(
  { arbitrary: fc.array(fc.option(text(), { nil: null }), { maxLength: 6 }).map((values) => ({ bytes: encodeDataRow(values), expected: { kind: 'Run', type: 'D' } })), weight: 6 },
  { arbitrary: bytes(200).map((data) => ({ bytes: copyData(data), expected: { kind: 'Run', type: 'd' } })), weight: 2 },
  fc.constantFrom<TransactionStatus>('I', 'T', 'E').map((status) => ({ bytes: encodeReadyForQuery(status), expected: { kind: 'ReadyForQuery', type: 'Z', status } })),
  errorFields.map((error) => ({ bytes: encodeErrorResponse(error), expected: { kind: 'ErrorResponse', type: 'E', error } })),
  text().map((tag) => ({ bytes: encodeCommandComplete(tag), expected: { kind: 'CommandComplete', type: 'C', tag } })),
  fc.record({ processId: fc.integer(), secretKey: fc.uint8Array({ minLength: 4, maxLength: 256 }).map((key) => Buffer.from(key)) }).map(({ processId, secretKey }) => ({
    bytes: encodeBackendKeyData(processId, secretKey),
    expected: { kind: 'BackendKeyData', type: 'K', processId, secretKey },
  })),
  fc.record({ name: text(20), value: text() }).map(({ name, value }) => ({ bytes: encodeParameterStatus(name, value), expected: { kind: 'ParameterStatus', type: 'S', name, value } })),
  fc.constant<Served>({ bytes: encodeAuthenticationOk(), expected: { kind: 'Authentication', type: 'R', code: 0, data: Buffer.alloc(0) } }),
  text().map((data) => ({ bytes: encodeAuthenticationSaslContinue(data), expected: { kind: 'Authentication', type: 'R', code: 11, data: Buffer.from(data) } })),
  fc.constant<Served>({ bytes: encodeAuthenticationSasl(['SCRAM-SHA-256']), expected: { kind: 'Authentication', type: 'R', code: 10, data: Buffer.from('SCRAM-SHA-256\0\0') } }),
  fc.constantFrom(encodeParseComplete(), encodeBindComplete(), encodeNoData(), encodeEmptyQueryResponse(), encodeRowDescription([{ name: 'a', typeOid: 25 }]), encodeNoticeResponse({ severity: 'NOTICE', code: '00000', message: 'n' })).map((bytes) => ({
    bytes,
    expected: { kind: 'Other', type: String.fromCharCode(bytes[0] as number) },
  })),
);

/** Scanner output with offsets made absolute and runs merged across chunk boundaries. */
type Report = Record<string, unknown> & { kind: string; type: string; bytes: number; end: number; count?: number };

function scanAll(chunks: readonly Buffer[]): Report[] {
  const scanner = new BackendScanner();
  const reports: Report[] = [];
  let offset = 0;
  for (const chunk of chunks) {
    let previous = -1;
    for (const scanned of scanner.scan(chunk)) {
      expect(scanned.end).toBeGreaterThan(previous);
      expect(scanned.end).toBeLessThanOrEqual(chunk.length);
      previous = scanned.end;
      appendReport(reports, { ...reportOf(scanned), end: offset + scanned.end });
    }
    offset += chunk.length;
  }
  return reports;
}

/** A scanned message as the model states it: a CommandComplete by its tag. */
function reportOf(scanned: ScannedMessage): Report {
  if (scanned.kind !== 'CommandComplete') return { ...scanned };
  const { body: _body, ...rest } = scanned;
  return { ...rest, tag: commandTag(scanned) };
}

function appendReport(reports: Report[], report: Report): void {
  const last = reports.at(-1);
  if (report.kind === 'Run' && last?.kind === 'Run' && last.type === report.type) {
    reports[reports.length - 1] = { ...last, count: (last.count ?? 0) + (report.count ?? 0), bytes: last.bytes + report.bytes, end: report.end };
  } else {
    reports.push(report);
  }
}

/** What scanning the concatenation of `messages` must report. */
function model(messages: readonly Served[]): Report[] {
  const reports: Report[] = [];
  let end = 0;
  for (const { bytes, expected } of messages) {
    end += bytes.length;
    appendReport(reports, { ...expected, bytes: bytes.length, end, ...(expected.kind === 'Run' ? { count: 1 } : {}) });
  }
  return reports;
}

describe('BackendScanner', () => {
  it('reports every message, in order, however the stream is split', () => {
    fc.assert(
      fc.property(fc.array(served, { maxLength: 40 }), cuts, (messages, points) => {
        const stream = Buffer.concat(messages.map((m) => m.bytes));
        expect(scanAll(split(stream, points))).toEqual(model(messages));
      }),
    );
  });

  it('summarizes a result in one chunk so the proxy can forward it and know where each phase ends', () => {
    const rows = Array.from({ length: 100 }, (_, index) => encodeDataRow([String(index), 'x']));
    const chunk = Buffer.concat([
      encodeAuthenticationOk(),
      encodeParameterStatus('client_encoding', 'UTF8'),
      encodeBackendKeyData(7, int32(8)),
      encodeReadyForQuery('I'),
      encodeRowDescription([{ name: 'n', typeOid: 25 }]),
      ...rows,
      encodeCommandComplete('SELECT 100'),
      encodeReadyForQuery('I'),
    ]);
    const scanned = new BackendScanner().scan(chunk);
    expect(scanned.map((m) => m.kind)).toEqual(['Authentication', 'ParameterStatus', 'BackendKeyData', 'ReadyForQuery', 'Other', 'Run', 'CommandComplete', 'ReadyForQuery']);
    const ready = scanned[3] as ScannedMessage;
    expect(chunk[ready.end]).toBe('T'.charCodeAt(0));
    expect(scanned[5]).toMatchObject({ kind: 'Run', type: 'D', count: 100, bytes: rows.reduce((sum, row) => sum + row.length, 0) });
    expect(scanned[7]).toMatchObject({ kind: 'ReadyForQuery', status: 'I', end: chunk.length });
  });

  it('decodes an interesting message split across many chunks once, in the chunk that completes it', () => {
    const error = encodeErrorResponse({ severity: 'FATAL', code: '57P01', message: 'terminating connection due to administrator command' });
    const scanner = new BackendScanner();
    const reports = Array.from(error, (byte) => scanner.scan(Buffer.from([byte])));
    expect(reports.slice(0, -1).every((report) => report.length === 0)).toBe(true);
    expect(reports.at(-1)).toEqual([{ kind: 'ErrorResponse', type: 'E', bytes: error.length, end: 1, error: { severity: 'FATAL', code: '57P01', message: 'terminating connection due to administrator command' } }]);
  });

  it('keeps a CommandComplete undecoded until its tag is asked for, whole even when it came in pieces', () => {
    const done = encodeCommandComplete('INSERT 0 12');
    const scanned = new BackendScanner().scan(done);
    expect(scanned).toEqual([{ kind: 'CommandComplete', type: 'C', bytes: done.length, end: done.length, body: Buffer.from('INSERT 0 12\0') }]);
    expect(commandTag(scanned[0] as CommandCompleteMessage)).toBe('INSERT 0 12');
    const scanner = new BackendScanner();
    const pieces = Array.from(done, (byte) => scanner.scan(Buffer.from([byte])));
    expect(pieces.slice(0, -1).every((report) => report.length === 0)).toBe(true);
    expect(commandTag(pieces.at(-1)![0] as CommandCompleteMessage)).toBe('INSERT 0 12');
    expect(commandTag(new BackendScanner().scan(encodeCommandComplete(''))[0] as CommandCompleteMessage)).toBe('');
  });

  it('refuses a CommandComplete that is not one terminated string, as it is scanned', () => {
    expectViolation(() => new BackendScanner().scan(message('C', Buffer.alloc(0))), /invalid CommandComplete message: missing string terminator/);
    expectViolation(() => new BackendScanner().scan(message('C', Buffer.from('SELECT 1'))), /invalid CommandComplete message: missing string terminator/);
    expectViolation(() => new BackendScanner().scan(message('C', Buffer.concat([cstr('SELECT 1'), cstr('x')]))), /invalid CommandComplete message: 2 unexpected trailing bytes/);
    expectViolation(() => new BackendScanner().scan(message('C', Buffer.concat([cstr(''), Buffer.from([1])]))), /invalid CommandComplete message: 1 unexpected trailing bytes/);
  });

  it('skips DataRows larger than the limit for decoded messages', () => {
    const big = encodeDataRow(['x'.repeat(2048)]);
    expect(new BackendScanner({ maxMessageBytes: 1024 }).scan(big)).toEqual([{ kind: 'Run', type: 'D', count: 1, bytes: big.length, end: big.length }]);
    expectViolation(() => new BackendScanner({ maxMessageBytes: 1024 }).scan(header('E', 1025)), /invalid message length 1025/);
  });

  it('refuses malformed server messages with 08P01', () => {
    const cases: Buffer[] = [
      header('D', 3),
      message('Z', Buffer.from('X')),
      message('Z', Buffer.from('II')),
      message('E', Buffer.concat([Buffer.from('S'), cstr('ERROR'), Buffer.from('Mno terminator')])),
      message('E', Buffer.concat([Buffer.from('S'), cstr('ERROR'), Buffer.from([0])])),
      message('E', Buffer.concat([Buffer.from('S'), cstr('ERROR'), Buffer.from('C'), cstr('XX000'), Buffer.from('M'), cstr('m'), Buffer.from('P'), cstr('abc'), Buffer.from([0])])),
      message('K', Buffer.concat([int32(1), Buffer.alloc(3)])),
      message('S', Buffer.concat([cstr('name'), Buffer.from('value')])),
      message('R', Buffer.from([0, 0])),
    ];
    for (const bytes of cases) expectViolation(() => new BackendScanner().scan(bytes));
  });
});
