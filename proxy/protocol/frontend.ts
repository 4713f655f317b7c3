import { ChunkQueue } from './chunk-queue.js';
import { ProtocolViolation } from './errors.js';
import { BodyReader } from './reader.js';
import { TYPE_OF_BYTE } from './type-bytes.js';

export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** PostgreSQL's MAX_STARTUP_PACKET_LENGTH. */
export const MAX_STARTUP_PACKET_BYTES = 10_000;
/** PostgreSQL's PQ_SMALL_MESSAGE_LIMIT, for message types that never carry SQL or data. */
const SMALL_MESSAGE_BYTES = 10_000;
/** PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH, for password and SASL messages. */
const AUTH_MESSAGE_BYTES = 65_535;

const PROTOCOL_MAJOR = 3;
const CANCEL_REQUEST_CODE = 80877102;
const SSL_REQUEST_CODE = 80877103;
const GSSENC_REQUEST_CODE = 80877104;
/** Protocol 3.2 (PostgreSQL 18) lets cancel keys be 4 to 256 bytes; 3.0 keys are 4. */
const MIN_CANCEL_KEY_BYTES = 4;
const MAX_CANCEL_KEY_BYTES = 256;

/** The first packet of a connection, or of a connection after an SSLRequest/GSSENCRequest was declined. */
export type StartupPacket = StartupMessage | SSLRequest | GSSENCRequest | CancelRequest;

export interface StartupMessage {
  readonly kind: 'StartupMessage';
  /** The minor protocol version asked for (3.0 → 0, 3.2 → 2); a client asking above what we serve gets NegotiateProtocolVersion. */
  readonly minorVersion: number;
  /** In packet order; a repeated name keeps its last value, as in PostgreSQL. */
  readonly parameters: ReadonlyMap<string, string>;
  readonly raw: Buffer;
}

export interface SSLRequest {
  readonly kind: 'SSLRequest';
  readonly raw: Buffer;
}

export interface GSSENCRequest {
  readonly kind: 'GSSENCRequest';
  readonly raw: Buffer;
}

export interface CancelRequest {
  readonly kind: 'CancelRequest';
  readonly processId: number;
  /** 4 bytes in protocol 3.0, up to 256 in 3.2. A view into `raw`. */
  readonly secretKey: Buffer;
  readonly raw: Buffer;
}

/** Every message type byte a protocol 3 client may send after startup. */
export type FrontendMessageType = 'B' | 'C' | 'D' | 'E' | 'F' | 'H' | 'P' | 'Q' | 'S' | 'X' | 'c' | 'd' | 'f' | 'p';

/** One framed regular message, not yet decoded: `raw` is the whole message; its body follows the type byte and length. */
export interface MessageFrame {
  readonly kind: 'Message';
  readonly type: FrontendMessageType;
  readonly raw: Buffer;
}

/** The type byte and the length ahead of a regular message's body. */
const HEADER_BYTES = 5;

export type FrontendFrame = StartupPacket | MessageFrame;

export interface FramerOptions {
  /** Largest declared length accepted for Query, Parse, Bind, FunctionCall and CopyData. */
  readonly maxMessageBytes?: number;
}

/**
 * Splits the bytes a client sends into messages. `push` each chunk as it arrives, then call `next`
 * until it returns undefined: the framer holds incomplete messages across chunks, so the caller can
 * also stop pulling while it waits on something and resume later. Returned buffers are views into
 * the pushed chunks whenever a message lies inside one chunk, so chunks must not be reused.
 */
export class FrontendFramer {
  readonly #queue = new ChunkQueue();
  /** The largest length accepted per type byte; -1 for a byte that is no message type. */
  readonly #limits = new Int32Array(256).fill(-1);
  #startupPhase = true;

  constructor(options: FramerOptions = {}) {
    const large = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const small = Math.min(SMALL_MESSAGE_BYTES, large);
    const auth = Math.min(AUTH_MESSAGE_BYTES, large);
    for (const type of ['B', 'P', 'Q', 'F', 'd']) this.#limits[type.charCodeAt(0)] = large;
    this.#limits['p'.charCodeAt(0)] = auth;
    for (const type of ['C', 'D', 'E', 'H', 'S', 'X', 'c', 'f']) this.#limits[type.charCodeAt(0)] = small;
  }

  /**
   * Bytes received but not yet returned by `next`. After an SSLRequest or GSSENCRequest this must be
   * 0 before the handshake starts: bytes sent ahead of it were never encrypted, and PostgreSQL
   * refuses them (CVE-2021-23214).
   */
  get bufferedBytes(): number {
    return this.#queue.length;
  }

  push(chunk: Buffer): void {
    this.#queue.push(chunk);
  }

  /** The next complete message, or undefined until more bytes arrive. Throws ProtocolViolation. */
  next(): FrontendFrame | undefined {
    return this.#startupPhase ? this.#nextStartupPacket() : this.#nextMessage();
  }

  #nextStartupPacket(): StartupPacket | undefined {
    const queue = this.#queue;
    if (queue.length < 4) return undefined;
    const length = queue.int32At(0);
    if (length < 8 || length > MAX_STARTUP_PACKET_BYTES) throw new ProtocolViolation(`invalid length of startup packet: ${length}`);
    if (queue.length < length) return undefined;
    const packet = decodeStartupPacket(queue.take(length));
    if (packet.kind === 'StartupMessage') this.#startupPhase = false;
    return packet;
  }

  #nextMessage(): MessageFrame | undefined {
    const queue = this.#queue;
    if (queue.length < 1) return undefined;
    const byte = queue.byteAt(0);
    const limit = this.#limits[byte]!;
    if (limit < 0) throw new ProtocolViolation(`invalid frontend message type ${JSON.stringify(String.fromCharCode(byte))}`);
    if (queue.length < HEADER_BYTES) return undefined;
    const length = queue.int32At(1);
    if (length < 4 || length > limit) throw new ProtocolViolation(`invalid message length ${length} for message type ${JSON.stringify(String.fromCharCode(byte))}`);
    if (queue.length < 1 + length) return undefined;
    return { kind: 'Message', type: TYPE_OF_BYTE[byte] as FrontendMessageType, raw: queue.take(1 + length) };
  }
}

function decodeStartupPacket(raw: Buffer): StartupPacket {
  const code = raw.readInt32BE(4);
  switch (code) {
    case SSL_REQUEST_CODE:
    case GSSENC_REQUEST_CODE: {
      const kind = code === SSL_REQUEST_CODE ? 'SSLRequest' : 'GSSENCRequest';
      if (raw.length !== 8) throw new ProtocolViolation(`invalid length of ${kind}: ${raw.length}`);
      return { kind, raw };
    }
    case CANCEL_REQUEST_CODE: {
      const keyBytes = raw.length - 12;
      if (keyBytes < MIN_CANCEL_KEY_BYTES || keyBytes > MAX_CANCEL_KEY_BYTES) throw new ProtocolViolation(`invalid length of CancelRequest: ${raw.length}`);
      return { kind: 'CancelRequest', processId: raw.readInt32BE(8), secretKey: raw.subarray(12), raw };
    }
    default:
      if (code >>> 16 !== PROTOCOL_MAJOR) throw new ProtocolViolation(`unsupported frontend protocol ${code >>> 16}.${code & 0xffff}`);
      return { kind: 'StartupMessage', minorVersion: code & 0xffff, parameters: decodeStartupParameters(raw.subarray(8)), raw };
  }
}

function decodeStartupParameters(body: Buffer): Map<string, string> {
  const reader = new BodyReader(body, 'startup packet');
  const parameters = new Map<string, string>();
  for (;;) {
    const name = reader.cstring();
    if (name === '') break;
    parameters.set(name, reader.cstring());
  }
  reader.end();
  return parameters;
}

export type FrontendMessage =
  | Query
  | Parse
  | Bind
  | Describe
  | Execute
  | Close
  | CopyData
  | CopyFail
  | { readonly kind: 'Sync' | 'Flush' | 'Terminate' | 'CopyDone' | 'FunctionCall'; readonly raw: Buffer }
  | AuthResponse;

export interface Query {
  readonly kind: 'Query';
  readonly sql: string;
  readonly raw: Buffer;
}

export interface Parse {
  readonly kind: 'Parse';
  /** '' is the unnamed statement. */
  readonly name: string;
  readonly sql: string;
  /** One OID per declared parameter; 0 leaves the type to the server. */
  readonly paramTypes: readonly number[];
  readonly raw: Buffer;
}

/** 0 = text, 1 = binary. */
export type FormatCode = 0 | 1;

export interface Bind {
  readonly kind: 'Bind';
  readonly portal: string;
  readonly statement: string;
  /** As sent: none (all text), one (applies to all), or one per parameter. See `paramFormat`. */
  readonly paramFormats: readonly FormatCode[];
  /** Views into `raw`; null is SQL NULL. */
  readonly params: readonly (Buffer | null)[];
  readonly resultFormats: readonly FormatCode[];
  readonly raw: Buffer;
}

export interface Describe {
  readonly kind: 'Describe';
  readonly target: 'S' | 'P';
  readonly name: string;
  readonly raw: Buffer;
}

export interface Execute {
  readonly kind: 'Execute';
  readonly portal: string;
  /** 0 (or negative) means no limit. */
  readonly maxRows: number;
  readonly raw: Buffer;
}

export interface Close {
  readonly kind: 'Close';
  readonly target: 'S' | 'P';
  readonly name: string;
  readonly raw: Buffer;
}

export interface CopyData {
  readonly kind: 'CopyData';
  readonly data: Buffer;
  readonly raw: Buffer;
}

export interface CopyFail {
  readonly kind: 'CopyFail';
  readonly message: string;
  readonly raw: Buffer;
}

/**
 * PasswordMessage, SASLInitialResponse and SASLResponse share the type byte 'p'; which one it is
 * depends on the authentication exchange in progress, so the body is decoded by the caller with
 * decodePasswordMessage, decodeSaslInitialResponse or decodeSaslResponse.
 */
export interface AuthResponse {
  readonly kind: 'AuthResponse';
  readonly body: Buffer;
  readonly raw: Buffer;
}

/** Decodes a framed message, refusing malformed bodies with ProtocolViolation. Strings are read as UTF-8. */
export function decodeFrontendMessage(frame: MessageFrame): FrontendMessage {
  const { raw } = frame;
  switch (frame.type) {
    case 'Q': {
      const reader = bodyReader(raw, 'Query');
      const sql = reader.cstring();
      reader.end();
      return { kind: 'Query', sql, raw };
    }
    case 'P':
      return decodeParse(raw);
    case 'B':
      return decodeBind(raw);
    case 'D':
    case 'C': {
      const what = frame.type === 'D' ? 'Describe' : 'Close';
      const reader = bodyReader(raw, what);
      const target = String.fromCharCode(reader.byte());
      if (target !== 'S' && target !== 'P') throw reader.fail(`invalid target ${JSON.stringify(target)}`);
      const name = reader.cstring();
      reader.end();
      return { kind: what, target, name, raw };
    }
    case 'E': {
      const reader = bodyReader(raw, 'Execute');
      const portal = reader.cstring();
      const maxRows = reader.int32();
      reader.end();
      return { kind: 'Execute', portal, maxRows, raw };
    }
    case 'd':
      return { kind: 'CopyData', data: raw.subarray(HEADER_BYTES), raw };
    case 'f': {
      const reader = bodyReader(raw, 'CopyFail');
      const message = reader.cstring();
      reader.end();
      return { kind: 'CopyFail', message, raw };
    }
    case 'S':
      return emptyMessage('Sync', raw);
    case 'H':
      return emptyMessage('Flush', raw);
    case 'X':
      return emptyMessage('Terminate', raw);
    case 'c':
      return emptyMessage('CopyDone', raw);
    case 'F':
      return { kind: 'FunctionCall', raw };
    case 'p':
      return { kind: 'AuthResponse', body: raw.subarray(HEADER_BYTES), raw };
  }
}

function bodyReader(raw: Buffer, what: string): BodyReader {
  return new BodyReader(raw, what, HEADER_BYTES);
}

function emptyMessage(kind: 'Sync' | 'Flush' | 'Terminate' | 'CopyDone', raw: Buffer): FrontendMessage {
  if (raw.length !== HEADER_BYTES) throw new ProtocolViolation(`invalid ${kind} message: ${raw.length - HEADER_BYTES} unexpected trailing bytes`);
  return { kind, raw };
}

function decodeParse(raw: Buffer): Parse {
  const reader = bodyReader(raw, 'Parse');
  const name = reader.cstring();
  const sql = reader.cstring();
  const count = reader.uint16();
  const paramTypes: number[] = new Array(count);
  for (let i = 0; i < count; i++) paramTypes[i] = reader.uint32();
  reader.end();
  return { kind: 'Parse', name, sql, paramTypes, raw };
}

function decodeBind(raw: Buffer): Bind {
  const reader = bodyReader(raw, 'Bind');
  const portal = reader.cstring();
  const statement = reader.cstring();
  const paramFormats = readFormatCodes(reader);
  const count = reader.uint16();
  if (paramFormats.length > 1 && paramFormats.length !== count) {
    throw reader.fail(`${paramFormats.length} parameter formats but ${count} parameters`);
  }
  const params: (Buffer | null)[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const length = reader.int32();
    if (length < -1) throw reader.fail(`invalid parameter length ${length}`);
    params[i] = length === -1 ? null : reader.bytes(length);
  }
  const resultFormats = readFormatCodes(reader);
  reader.end();
  return { kind: 'Bind', portal, statement, paramFormats, params, resultFormats, raw };
}

function readFormatCodes(reader: BodyReader): FormatCode[] {
  const count = reader.uint16();
  const codes: FormatCode[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const code = reader.uint16();
    if (code !== 0 && code !== 1) throw reader.fail(`invalid format code ${code}`);
    codes[i] = code;
  }
  return codes;
}

/** The format of Bind parameter `index`, applying the protocol's none/one/each rule. */
export function paramFormat(bind: Bind, index: number): FormatCode {
  const formats = bind.paramFormats;
  return formats.length === 0 ? 0 : ((formats.length === 1 ? formats[0] : formats[index]) ?? 0);
}

/** PasswordMessage: a cleartext password. */
export function decodePasswordMessage(body: Buffer): string {
  const reader = new BodyReader(body, 'PasswordMessage');
  const password = reader.cstring();
  reader.end();
  return password;
}

export interface SaslInitialResponse {
  readonly mechanism: string;
  /** The client-first message; null when the client sent none (length -1). */
  readonly data: Buffer | null;
}

export function decodeSaslInitialResponse(body: Buffer): SaslInitialResponse {
  const reader = new BodyReader(body, 'SASLInitialResponse');
  const mechanism = reader.cstring();
  const length = reader.int32();
  if (length < -1) throw reader.fail(`invalid initial response length ${length}`);
  const data = length === -1 ? null : reader.bytes(length);
  reader.end();
  return { mechanism, data };
}

/** SASLResponse: the whole body is mechanism data. */
export function decodeSaslResponse(body: Buffer): Buffer {
  return body;
}
