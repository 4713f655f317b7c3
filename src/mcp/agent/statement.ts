import { serialize } from 'pg-protocol';
import type { CommandCompleteMessage, DatabaseError, DataRowMessage, ReadyForQueryMessage, RowDescriptionMessage } from 'pg-protocol/dist/messages.js';
import { MessageReader, type UpstreamConnection } from '../../../proxy/upstream/connection.js';

/** One statement to run upstream, in its own transaction. */
export interface StatementRun {
  readonly sql: string;
  /** Bound as text ($1, $2, ...); null is SQL NULL. */
  readonly params: readonly (string | null)[];
  /** BEGIN READ ONLY, or a read-write transaction. */
  readonly readOnly: boolean;
  /** Rows kept at most; one more is fetched to tell whether the result was cut. */
  readonly maxRows: number;
  /** statement_timeout for this transaction (SET LOCAL), in milliseconds. */
  readonly timeoutMs: number;
  /**
   * When given, the transaction commits only if this says so of the statement's command tag, and is
   * rolled back otherwise (a write over max_affected_rows, any write under write_mode rollback).
   */
  readonly commitIf?: (command: string) => boolean;
}

/**
 * Bytes of rows one result keeps at most: an agent's call is answered from memory (twice over, as
 * text and as structured content), so a result is bounded in bytes as max_rows bounds it in rows.
 */
export const MAX_RESULT_BYTES = 16 * 1024 * 1024;

export interface StatementResult {
  readonly columns: readonly { readonly name: string; readonly typeOid: number }[];
  /** Values in PostgreSQL's text format, null for NULL; at most maxRows. */
  readonly rows: readonly (readonly (string | null)[])[];
  readonly truncated: boolean;
  /** It was cut at MAX_RESULT_BYTES (rather than, or as well as, at maxRows). */
  readonly cutAtBytes: boolean;
  /** The command tag (`SELECT 3`, `UPDATE 1`); '' when the result was cut before it. */
  readonly command: string;
  /** The statement ran and its transaction was rolled back, as `commitIf` asked. */
  readonly rolledBack: boolean;
  /** Bytes of the data rows kept. */
  readonly bytes: number;
}

/** The upstream refused the statement (an ErrorResponse): its SQLSTATE and message, as PostgreSQL wrote them. */
export class StatementFailed extends Error {
  override readonly name = 'StatementFailed';
  readonly code = 'UPSTREAM_STATEMENT_FAILED';
  constructor(
    readonly sqlstate: string,
    message: string,
    readonly detail: string | undefined,
    readonly hint: string | undefined,
  ) {
    super(message);
  }
}

/** Every message an extended-protocol exchange of ours may bring; COPY is not among them. */
const EXPECTED = '123CDEINSTZnsA';

function execute(sql: string, values: readonly (string | null)[], rows = 0): Buffer[] {
  return [serialize.parse({ text: sql, types: [] }), serialize.bind({ values: [...values] }), ...(rows > 0 ? [serialize.describe({ type: 'P' })] : []), serialize.execute({ rows })];
}

/**
 * Runs one statement on a connection the caller holds, in one round trip: BEGIN (READ ONLY),
 * SET LOCAL statement_timeout, the statement with at most maxRows + 1 rows fetched, COMMIT, Sync.
 * A failure rolls back and throws StatementFailed; the connection is then idle again. Any other
 * error (the stream broke) leaves the connection unusable: the caller destroys it.
 */
export async function runStatement(connection: UpstreamConnection, run: StatementRun): Promise<StatementResult> {
  const label = `upstream ${connection.target.host}:${connection.target.port}/${connection.target.database}`;
  const reader = new MessageReader(connection.inlet, EXPECTED, label);
  const begin = run.readOnly ? 'BEGIN READ ONLY' : 'BEGIN';
  const setup = [...execute(begin, []), ...execute(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(run.timeoutMs))}`, [])];
  // Under commitIf the transaction is still open at ReadyForQuery, and ended by what it says.
  const commit = run.commitIf ? [] : execute('COMMIT', []);
  connection.socket.write(Buffer.concat([...setup, ...execute(run.sql, run.params, run.maxRows + 1), ...commit, serialize.sync()]));

  const executes = ['begin', 'timeout', 'statement', 'commit'];
  let step = 0;
  let columns: StatementResult['columns'] = [];
  const rows: (string | null)[][] = [];
  let suspended = false;
  let cutAtBytes = false;
  let command = '';
  let bytes = 0;
  let failure: DatabaseError | undefined;
  for (;;) {
    const message = await reader.next();
    switch (message.name) {
      case 'rowDescription':
        columns = (message as RowDescriptionMessage).fields.map((field) => ({ name: field.name, typeOid: field.dataTypeID }));
        break;
      case 'dataRow':
        // Past the bound no further row is kept, so what the agent gets is a prefix of the result.
        if (cutAtBytes || bytes + message.length > MAX_RESULT_BYTES) cutAtBytes = true;
        else {
          rows.push((message as DataRowMessage).fields as (string | null)[]);
          bytes += message.length;
        }
        break;
      case 'portalSuspended':
        suspended = true;
        step++;
        break;
      case 'commandComplete':
        if (executes[step] === 'statement') command = (message as CommandCompleteMessage).text;
        step++;
        break;
      case 'emptyQuery':
        step++;
        break;
      case 'error':
        failure = message as DatabaseError;
        break;
      case 'readyForQuery': {
        const open = (message as ReadyForQueryMessage).status !== 'I';
        const keep = open && !failure && run.commitIf !== undefined && run.commitIf(command);
        // A COMMIT that fails (a deferred constraint) fails the statement, as the pipelined COMMIT would.
        if (open) failure = (await endTransaction(connection, reader, keep ? 'COMMIT' : 'ROLLBACK')) ?? failure;
        reader.detach();
        if (failure) throw new StatementFailed(failure.code ?? 'XX000', failure.message, failure.detail, failure.hint);
        const rolledBack = run.commitIf !== undefined && !keep;
        return { columns, rows: rows.slice(0, run.maxRows), truncated: suspended || rows.length > run.maxRows || cutAtBytes, cutAtBytes, command, bytes, rolledBack };
      }
      default:
        break;
    }
  }
}

/** Ends the open transaction; the error it met, if any. */
async function endTransaction(connection: UpstreamConnection, reader: MessageReader, how: 'COMMIT' | 'ROLLBACK'): Promise<DatabaseError | undefined> {
  connection.socket.write(serialize.query(how));
  let failure: DatabaseError | undefined;
  for (let message = await reader.next(); message.name !== 'readyForQuery'; message = await reader.next()) {
    if (message.name === 'error') failure = message as DatabaseError;
  }
  return failure;
}
