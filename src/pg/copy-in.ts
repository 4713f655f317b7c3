/**
 * `COPY … FROM STDIN` in text format, for bulk inserts on a client inside a transaction. PostgreSQL
 * reads each field with its column's input function, as it reads a text parameter, but without the
 * array literals an `insert … select from unnest(…)` sends, parses and unpacks through a function
 * scan. node-postgres takes the statement as a Submittable, the extension point its cursors use.
 */
import type pg from 'pg';

/** A field of COPY's text format: backslash, newline, carriage return and tab are the characters it escapes. */
const NEEDS_ESCAPE = /[\\\n\r\t]/;
const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A value as a field of COPY's text format, read back by the column's input function as `String(value)`; null is `\N`. */
export function copyField(value: string | number | boolean | null): string {
  if (value === null) return '\\N';
  const text = String(value);
  return NEEDS_ESCAPE.test(text) ? text.replace(/[\\\n\r\t]/g, (c) => ESCAPES[c]!) : text;
}

/** The connection methods of the copy sub-protocol, which pg's types leave out. */
interface CopyConnection extends pg.Connection {
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
}

/** One `COPY … FROM STDIN` with all of its data in one message; node-postgres calls the handlers as the server answers. */
class CopyIn implements pg.Submittable {
  private rowCount = 0;
  private settled = false;

  constructor(
    private readonly sql: string,
    private readonly data: Buffer,
    private readonly resolve: (rows: number) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  submit(connection: pg.Connection): void {
    connection.query(this.sql);
  }

  handleCopyInResponse(connection: CopyConnection): void {
    connection.sendCopyFromChunk(this.data);
    connection.endCopyFrom();
  }

  handleCommandComplete(message: { text: string }): void {
    this.rowCount = Number(message.text.slice(message.text.lastIndexOf(' ') + 1));
  }

  /** A server error (the client then takes the next query when the server is ready) or a lost connection. */
  handleError(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(error);
  }

  handleReadyForQuery(): void {
    if (this.settled) return;
    this.settled = true;
    this.resolve(this.rowCount);
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/** Runs `sql` (a `COPY … FROM STDIN`) with `data` as its text-format rows; resolves to the number of rows copied. */
export function copyIn(client: pg.ClientBase, sql: string, data: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    client.query(new CopyIn(sql, data, resolve, reject));
  });
}
