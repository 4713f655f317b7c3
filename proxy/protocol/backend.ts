import { ProtocolViolation } from './errors.js';
import { DEFAULT_MAX_MESSAGE_BYTES, type FormatCode } from './frontend.js';
import { BodyReader } from './reader.js';
import { TYPE_OF_BYTE } from './type-bytes.js';
import { cstringSize, MessageWriter } from './writer.js';

export type TransactionStatus = 'I' | 'T' | 'E';

/** The fields of an ErrorResponse or NoticeResponse that pgward writes and reads. */
export interface ErrorFields {
  /** ERROR, FATAL, WARNING, NOTICE ...; written as both 'S' and the untranslated 'V'. */
  readonly severity: string;
  /** SQLSTATE, e.g. '08P01'. */
  readonly code: string;
  readonly message: string;
  readonly detail?: string;
  readonly hint?: string;
  /** 1-based character position in the statement text. */
  readonly position?: number;
}

export interface ColumnDescription {
  readonly name: string;
  readonly typeOid: number;
  /** pg_type.typlen: -1 for variable length. */
  readonly typeSize?: number;
  readonly typeModifier?: number;
  readonly tableOid?: number;
  readonly columnNumber?: number;
  readonly format?: FormatCode;
}

const AUTH_OK = 0;
const AUTH_CLEARTEXT_PASSWORD = 3;
const AUTH_SASL = 10;
const AUTH_SASL_CONTINUE = 11;
const AUTH_SASL_FINAL = 12;
const MIN_CANCEL_KEY_BYTES = 4;
const MAX_CANCEL_KEY_BYTES = 256;

export function encodeAuthenticationOk(): Buffer {
  return new MessageWriter('R', 4).int32(AUTH_OK).done();
}

export function encodeAuthenticationCleartextPassword(): Buffer {
  return new MessageWriter('R', 4).int32(AUTH_CLEARTEXT_PASSWORD).done();
}

export function encodeAuthenticationSasl(mechanisms: readonly string[]): Buffer {
  const size = mechanisms.reduce((sum, mechanism) => sum + cstringSize(mechanism), 4 + 1);
  const writer = new MessageWriter('R', size).int32(AUTH_SASL);
  for (const mechanism of mechanisms) writer.cstring(mechanism);
  return writer.byte(0).done();
}

export function encodeAuthenticationSaslContinue(data: string | Buffer): Buffer {
  return saslData(AUTH_SASL_CONTINUE, data);
}

export function encodeAuthenticationSaslFinal(data: string | Buffer): Buffer {
  return saslData(AUTH_SASL_FINAL, data);
}

function saslData(code: number, data: string | Buffer): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  return new MessageWriter('R', 4 + bytes.length).int32(code).bytes(bytes).done();
}

export function encodeParameterStatus(name: string, value: string): Buffer {
  return new MessageWriter('S', cstringSize(name) + cstringSize(value)).cstring(name).cstring(value).done();
}

/** `secretKey` must be exactly 4 bytes for protocol 3.0 clients; 3.2 allows up to 256. */
export function encodeBackendKeyData(processId: number, secretKey: Buffer): Buffer {
  if (secretKey.length < MIN_CANCEL_KEY_BYTES || secretKey.length > MAX_CANCEL_KEY_BYTES) {
    throw new RangeError(`cancel key must be ${MIN_CANCEL_KEY_BYTES} to ${MAX_CANCEL_KEY_BYTES} bytes, got ${secretKey.length}`);
  }
  return new MessageWriter('K', 4 + secretKey.length).int32(processId).bytes(secretKey).done();
}

export function encodeReadyForQuery(status: TransactionStatus): Buffer {
  return new MessageWriter('Z', 1).byte(status.charCodeAt(0)).done();
}

export function encodeErrorResponse(fields: ErrorFields): Buffer {
  return encodeFields('E', fields);
}

export function encodeNoticeResponse(fields: ErrorFields): Buffer {
  return encodeFields('N', fields);
}

function encodeFields(type: 'E' | 'N', fields: ErrorFields): Buffer {
  const entries: [string, string][] = [
    ['S', fields.severity],
    ['V', fields.severity],
    ['C', fields.code],
    ['M', fields.message],
  ];
  if (fields.detail !== undefined) entries.push(['D', fields.detail]);
  if (fields.hint !== undefined) entries.push(['H', fields.hint]);
  if (fields.position !== undefined) entries.push(['P', String(fields.position)]);
  const size = entries.reduce((sum, [, value]) => sum + 1 + cstringSize(value), 1);
  const writer = new MessageWriter(type, size);
  for (const [code, value] of entries) writer.byte(code.charCodeAt(0)).cstring(value);
  return writer.byte(0).done();
}

export function encodeCommandComplete(tag: string): Buffer {
  return new MessageWriter('C', cstringSize(tag)).cstring(tag).done();
}

export function encodeEmptyQueryResponse(): Buffer {
  return new MessageWriter('I', 0).done();
}

export function encodeRowDescription(columns: readonly ColumnDescription[]): Buffer {
  const size = columns.reduce((sum, column) => sum + cstringSize(column.name) + 18, 2);
  const writer = new MessageWriter('T', size).uint16(columns.length);
  for (const column of columns) {
    writer
      .cstring(column.name)
      .uint32(column.tableOid ?? 0)
      .int16(column.columnNumber ?? 0)
      .uint32(column.typeOid)
      .int16(column.typeSize ?? -1)
      .int32(column.typeModifier ?? -1)
      .int16(column.format ?? 0);
  }
  return writer.done();
}

/** Strings are written as UTF-8 text-format values; null is SQL NULL. */
export function encodeDataRow(values: readonly (Buffer | string | null)[]): Buffer {
  const bytes = values.map((value) => (typeof value === 'string' ? Buffer.from(value, 'utf8') : value));
  const size = bytes.reduce((sum, value) => sum + 4 + (value?.length ?? 0), 2);
  const writer = new MessageWriter('D', size).uint16(bytes.length);
  for (const value of bytes) {
    if (value === null) writer.int32(-1);
    else writer.int32(value.length).bytes(value);
  }
  return writer.done();
}

export function encodeParseComplete(): Buffer {
  return new MessageWriter('1', 0).done();
}

export function encodeBindComplete(): Buffer {
  return new MessageWriter('2', 0).done();
}

export function encodeCloseComplete(): Buffer {
  return new MessageWriter('3', 0).done();
}

export function encodeNoData(): Buffer {
  return new MessageWriter('n', 0).done();
}

export function encodeParameterDescription(typeOids: readonly number[]): Buffer {
  const writer = new MessageWriter('t', 2 + 4 * typeOids.length).uint16(typeOids.length);
  for (const oid of typeOids) writer.uint32(oid);
  return writer.done();
}

/** The answer to a StartupMessage asking for a newer minor version or for `_pq_.` options we do not know. */
export function encodeNegotiateProtocolVersion(newestMinorVersion: number, unrecognizedOptions: readonly string[]): Buffer {
  const size = unrecognizedOptions.reduce((sum, option) => sum + cstringSize(option), 8);
  const writer = new MessageWriter('v', size).int32(newestMinorVersion).int32(unrecognizedOptions.length);
  for (const option of unrecognizedOptions) writer.cstring(option);
  return writer.done();
}

/** The single byte answering an SSLRequest: 'S' to start TLS, 'N' to continue in clear text. */
export function encodeSslResponse(accept: boolean): Buffer {
  return Buffer.from(accept ? 'S' : 'N', 'latin1');
}

/** The single byte answering a GSSENCRequest: 'G' to start GSSAPI encryption, 'N' to decline. */
export function encodeGssEncResponse(accept: boolean): Buffer {
  return Buffer.from(accept ? 'G' : 'N', 'latin1');
}

interface Scanned {
  /** The message type byte as a character. */
  readonly type: string;
  /** Bytes on the wire, type byte and length word included. */
  readonly bytes: number;
  /** Offset in the scanned chunk just past the message's last byte. */
  readonly end: number;
}

/**
 * What BackendScanner reports about each message completed by a chunk, in order. Consecutive
 * DataRows (or CopyData messages) are reported as one Run, so a chunk of rows costs one object.
 */
export type ScannedMessage =
  | (Scanned & { readonly kind: 'ReadyForQuery'; readonly status: TransactionStatus })
  | (Scanned & { readonly kind: 'ErrorResponse'; readonly error: ErrorFields })
  | (Scanned & { readonly kind: 'BackendKeyData'; readonly processId: number; readonly secretKey: Buffer })
  | (Scanned & { readonly kind: 'ParameterStatus'; readonly name: string; readonly value: string })
  | (Scanned & { readonly kind: 'Authentication'; readonly code: number; readonly data: Buffer })
  | (Scanned & { readonly kind: 'Run'; readonly type: 'D' | 'd'; readonly count: number })
  | CommandCompleteMessage
  | (Scanned & { readonly kind: 'Other' });

/**
 * A CommandComplete, checked as it is scanned (one terminated string) but not decoded: few
 * statements need their tag (commandTag reads it), and a result of many small statements would
 * otherwise pay a string for each.
 */
export type CommandCompleteMessage = Scanned & {
  readonly kind: 'CommandComplete';
  /** The message body, a view into the chunk that completed it: the tag and its terminator. */
  readonly body: Buffer;
};

/** The command tag of a CommandComplete ("INSERT 0 3", "SELECT 20"). */
export function commandTag(message: CommandCompleteMessage): string {
  return message.body.toString('utf8', 0, message.body.length - 1);
}

interface Run {
  readonly kind: 'Run';
  readonly type: 'D' | 'd';
  count: number;
  bytes: number;
  end: number;
}

const DATA_ROW = 0x44;
const COPY_DATA = 0x64;
const ERROR_RESPONSE = 0x45;
/** Types whose bodies are decoded (and buffered when split across chunks); every other body is skipped. */
const DECODED = new Uint8Array(256);
for (const type of ['Z', 'E', 'K', 'S', 'C', 'R']) DECODED[type.charCodeAt(0)] = 1;

export interface BackendScannerOptions {
  /** Largest declared length accepted for a message whose body is decoded. Skipped messages have no limit. */
  readonly maxMessageBytes?: number;
}

/**
 * Finds message boundaries in what an upstream server sends, without copying or decoding bodies
 * other than the few the proxy acts on, so each chunk can be forwarded to the client as it came.
 * A message split across chunks is reported by the scan of the chunk that completes it. State is
 * undefined after a ProtocolViolation: close the upstream connection.
 */
export class BackendScanner {
  readonly #maxDecodedBytes: number;
  readonly #header = Buffer.alloc(5);
  #headerFill = 0;
  #type = 0;
  #bodySize = 0;
  /** Body bytes of the current message still to come; -1 while waiting for a header. */
  #left = -1;
  /** The body so far of a decoded message that spans chunks. */
  #partial: Buffer | undefined;

  constructor(options: BackendScannerOptions = {}) {
    this.#maxDecodedBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** Whether the last chunk scanned ended inside an ErrorResponse (its header or its body). */
  get inErrorResponse(): boolean {
    return this.#headerFill > 0 ? this.#header[0] === ERROR_RESPONSE : this.#left >= 0 && this.#type === ERROR_RESPONSE;
  }

  scan(chunk: Buffer): ScannedMessage[] {
    const out: ScannedMessage[] = [];
    let run: Run | undefined;
    let pos = 0;
    for (;;) {
      if (this.#left < 0) {
        if (this.#headerFill === 0 && chunk.length - pos >= 5) {
          this.#start(chunk[pos] as number, chunk.readInt32BE(pos + 1));
          pos += 5;
        } else {
          const n = Math.min(5 - this.#headerFill, chunk.length - pos);
          chunk.copy(this.#header, this.#headerFill, pos, pos + n);
          this.#headerFill += n;
          pos += n;
          if (this.#headerFill < 5) break;
          this.#headerFill = 0;
          this.#start(this.#header[0] as number, this.#header.readInt32BE(1));
        }
      }
      const available = chunk.length - pos;
      let body: Buffer | undefined;
      if (DECODED[this.#type] === 0) {
        const n = Math.min(this.#left, available);
        pos += n;
        this.#left -= n;
        if (this.#left > 0) break;
      } else if (this.#partial === undefined && this.#left <= available) {
        body = chunk.subarray(pos, pos + this.#left);
        pos += this.#left;
      } else {
        this.#partial ??= Buffer.allocUnsafe(this.#bodySize);
        const n = Math.min(this.#left, available);
        chunk.copy(this.#partial, this.#bodySize - this.#left, pos, pos + n);
        pos += n;
        this.#left -= n;
        if (this.#left > 0) break;
        body = this.#partial;
        this.#partial = undefined;
      }
      this.#left = -1;
      run = this.#complete(out, run, body, pos);
    }
    return out;
  }

  #start(type: number, length: number): void {
    if (length < 4 || (length > this.#maxDecodedBytes && DECODED[type] === 1)) {
      throw new ProtocolViolation(`invalid message length ${length} for server message type ${JSON.stringify(String.fromCharCode(type))}`);
    }
    this.#type = type;
    this.#bodySize = length - 4;
    this.#left = this.#bodySize;
  }

  #complete(out: ScannedMessage[], run: Run | undefined, body: Buffer | undefined, end: number): Run | undefined {
    const bytes = this.#bodySize + 5;
    const type = TYPE_OF_BYTE[this.#type]!;
    if (this.#type === DATA_ROW || this.#type === COPY_DATA) {
      if (run?.type === type) {
        run.count++;
        run.bytes += bytes;
        run.end = end;
        return run;
      }
      const next: Run = { kind: 'Run', type: type as 'D' | 'd', count: 1, bytes, end };
      out.push(next);
      return next;
    }
    out.push(body === undefined ? { kind: 'Other', type, bytes, end } : decodeScanned(type, body, bytes, end));
    return undefined;
  }
}

function decodeScanned(type: string, body: Buffer, bytes: number, end: number): ScannedMessage {
  const at = { type, bytes, end };
  switch (type) {
    case 'Z': {
      // Once per statement: read the status byte without a reader.
      const status = body.length === 1 ? String.fromCharCode(body[0]!) : '';
      if (status !== 'I' && status !== 'T' && status !== 'E') throw new BodyReader(body, 'ReadyForQuery').fail(`invalid transaction status or length (${body.length} bytes)`);
      return { type, bytes, end, kind: 'ReadyForQuery', status };
    }
    case 'E':
      return { ...at, kind: 'ErrorResponse', error: decodeErrorFields(body) };
    case 'C': {
      // The checks BodyReader's cstring() and end() make, without decoding the tag.
      const nul = body.indexOf(0);
      if (nul < 0) throw new BodyReader(body, 'CommandComplete').fail('missing string terminator');
      if (nul !== body.length - 1) throw new BodyReader(body, 'CommandComplete').fail(`${body.length - 1 - nul} unexpected trailing bytes`);
      return { type, bytes, end, kind: 'CommandComplete', body };
    }
    case 'K': {
      const reader = new BodyReader(body, 'BackendKeyData');
      const processId = reader.int32();
      if (reader.remaining < MIN_CANCEL_KEY_BYTES || reader.remaining > MAX_CANCEL_KEY_BYTES) throw reader.fail(`invalid cancel key length ${reader.remaining}`);
      return { ...at, kind: 'BackendKeyData', processId, secretKey: Buffer.from(reader.rest()) };
    }
    case 'S': {
      const reader = new BodyReader(body, 'ParameterStatus');
      const name = reader.cstring();
      const value = reader.cstring();
      reader.end();
      return { ...at, kind: 'ParameterStatus', name, value };
    }
    default: {
      // 'R', the last of DECODED.
      const reader = new BodyReader(body, 'Authentication');
      const code = reader.int32();
      return { ...at, kind: 'Authentication', code, data: Buffer.from(reader.rest()) };
    }
  }
}

function decodeErrorFields(body: Buffer): ErrorFields {
  const reader = new BodyReader(body, 'ErrorResponse');
  const fields = new Map<string, string>();
  for (let code = reader.byte(); code !== 0; code = reader.byte()) fields.set(String.fromCharCode(code), reader.cstring());
  reader.end();
  const severity = fields.get('V') ?? fields.get('S');
  const code = fields.get('C');
  const message = fields.get('M');
  if (severity === undefined || code === undefined || message === undefined) throw reader.fail('missing severity, SQLSTATE or message');
  const detail = fields.get('D');
  const hint = fields.get('H');
  const position = fields.get('P');
  if (position !== undefined && !/^[1-9][0-9]{0,9}$/.test(position)) throw reader.fail(`invalid position ${JSON.stringify(position)}`);
  return {
    severity,
    code,
    message,
    ...(detail !== undefined ? { detail } : {}),
    ...(hint !== undefined ? { hint } : {}),
    ...(position !== undefined ? { position: Number(position) } : {}),
  };
}
