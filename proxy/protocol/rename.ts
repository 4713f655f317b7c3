/**
 * Rewrites the statement name inside a raw frontend message without decoding the rest: the proxy
 * maps a client's statement names to server-side names shared by every client that prepares the
 * same text, so a statement can be prepared once per upstream connection and found again after
 * transaction pooling moves the client to another connection.
 */

function cstringEnd(raw: Buffer, from: number): number {
  const end = raw.indexOf(0, from);
  if (end < 0) throw new RangeError('unterminated string in a message that was already framed');
  return end;
}

function rebuild(raw: Buffer, fieldStart: number, fieldEnd: number, value: string): Buffer {
  const replacement = Buffer.from(value, 'utf8');
  const out = Buffer.allocUnsafe(raw.length - (fieldEnd - fieldStart) + replacement.length);
  raw.copy(out, 0, 0, fieldStart);
  replacement.copy(out, fieldStart);
  raw.copy(out, fieldStart + replacement.length, fieldEnd);
  out.writeInt32BE(out.length - 1, 1);
  return out;
}

/** Parse: 'P' len name\0 query\0 ... — replaces name. */
export function renameParse(raw: Buffer, name: string): Buffer {
  return rebuild(raw, 5, cstringEnd(raw, 5), name);
}

/** Bind: 'B' len portal\0 statement\0 ... — replaces statement. */
export function renameBindStatement(raw: Buffer, statement: string): Buffer {
  const start = cstringEnd(raw, 5) + 1;
  return rebuild(raw, start, cstringEnd(raw, start), statement);
}

/** Describe or Close: type len 'S'|'P' name\0 — replaces name. */
export function renameTarget(raw: Buffer, name: string): Buffer {
  return rebuild(raw, 6, cstringEnd(raw, 6), name);
}

/** Parse with another statement text (a masked rewrite), keeping its name and parameter types. */
export function replaceParseSql(raw: Buffer, sql: string): Buffer {
  const start = cstringEnd(raw, 5) + 1;
  return rebuild(raw, start, cstringEnd(raw, start), sql);
}

/** A simple Query message carrying `sql`. */
export function encodeQuery(sql: string): Buffer {
  const text = Buffer.from(sql, 'utf8');
  const out = Buffer.allocUnsafe(6 + text.length);
  out[0] = 'Q'.charCodeAt(0);
  out.writeInt32BE(5 + text.length, 1);
  text.copy(out, 5);
  out[out.length - 1] = 0;
  return out;
}

/** Execute with another row limit: 'E' len portal\0 int32 — the limit is the last four bytes. */
export function withRowLimit(raw: Buffer, rows: number): Buffer {
  const out = Buffer.from(raw);
  out.writeInt32BE(rows, out.length - 4);
  return out;
}
