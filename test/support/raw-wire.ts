/**
 * A client that logs in with node-postgres (SCRAM) and then speaks the protocol by hand: any
 * sequence of frontend messages (several Executes of one portal, pipelined batches without Sync)
 * and every reply in order, condensed to one line each.
 */
import type { Socket } from 'node:net';
import pg from 'pg';
import { parse, serialize } from 'pg-protocol';

export { serialize };

/**
 * One reply: `T` RowDescription, `D <n>` a run of n DataRows, `C <tag>`, `s` PortalSuspended,
 * `N <message>` a NOTICE, `E <sqlstate> <message>`, `Z <status>`, and the extended protocol's `1`, `2`, `3`, `n`, `I`.
 */
export type Reply = string;

const CODES: Readonly<Record<string, string>> = { parseComplete: '1', bindComplete: '2', closeComplete: '3', noData: 'n', emptyQuery: 'I', portalSuspended: 's', rowDescription: 'T' };

export class RawWire {
  private replies: Reply[] = [];
  /** The first column of every DataRow since the login, in order. */
  readonly values: string[] = [];
  private ready = 0;
  private waiter: (() => void) | undefined;

  private constructor(private readonly socket: Socket) {
    parse(socket, (message) => this.onMessage(message as unknown as Record<string, unknown> & { name: string }));
  }

  /** Logs in as `connectionString`'s user, then takes the connection over. */
  static async open(connectionString: string): Promise<RawWire> {
    const client = new pg.Client({ connectionString });
    client.on('error', () => undefined);
    await client.connect();
    const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
    socket.removeAllListeners('data');
    return new RawWire(socket);
  }

  private onMessage(message: Record<string, unknown> & { name: string }): void {
    const last = this.replies.at(-1);
    if (message.name === 'dataRow') {
      const fields = message.fields as (string | null)[];
      this.values.push(String(fields[0]));
      const run = /^D (\d+)$/.exec(last ?? '');
      if (run) this.replies[this.replies.length - 1] = `D ${Number(run[1]) + 1}`;
      else this.replies.push('D 1');
      return;
    }
    if (message.name === 'commandComplete') this.replies.push(`C ${String(message.text)}`);
    else if (message.name === 'notice') this.replies.push(`N ${String(message.message)}`);
    else if (message.name === 'error') this.replies.push(`E ${String(message.code)} ${String(message.message)}`);
    else if (message.name === 'readyForQuery') this.replies.push(`Z ${String(message.status)}`);
    else this.replies.push(CODES[message.name] ?? message.name);
    if (message.name === 'readyForQuery') {
      this.ready += 1;
      this.waiter?.();
    }
  }

  /** Sends `messages` in one write and collects the replies until `readies` ReadyForQuery have come. */
  async turn(messages: readonly Buffer[], readies = 1): Promise<Reply[]> {
    const target = this.ready + readies;
    this.replies = [];
    this.socket.write(Buffer.concat(messages));
    const deadline = Date.now() + 10_000;
    while (this.ready < target) {
      if (Date.now() > deadline) throw new Error(`no ReadyForQuery within 10 s; replies so far: ${JSON.stringify(this.replies)}`);
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 50);
      });
    }
    return this.replies;
  }

  /** A simple query. */
  query(sql: string): Promise<Reply[]> {
    return this.turn([serialize.query(sql)]);
  }

  close(): void {
    this.socket.end(serialize.end());
  }
}
