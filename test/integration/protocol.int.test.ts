import { once } from 'node:events';
import { createRequire } from 'node:module';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import type { BackendMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BackendScanner,
  commandTag,
  encodeAuthenticationOk,
  encodeBackendKeyData,
  encodeBindComplete,
  encodeCommandComplete,
  encodeDataRow,
  encodeErrorResponse,
  encodeParameterStatus,
  encodeParseComplete,
  encodeReadyForQuery,
  encodeRowDescription,
  encodeSslResponse,
  type ScannedMessage,
} from '../../proxy/protocol/backend.js';
import { ProtocolViolation } from '../../proxy/protocol/errors.js';
import { decodeFrontendMessage, FrontendFramer, type FrontendFrame } from '../../proxy/protocol/frontend.js';
import { startScramServer } from '../support/embedded.js';

interface PgScramClient {
  response: string;
}
interface PgSasl {
  startSession(mechanisms: string[]): PgScramClient;
  continueSession(session: PgScramClient, password: string, serverData: string): Promise<void>;
  finalizeSession(session: PgScramClient, serverData: string): void;
}
const sasl = createRequire(import.meta.url)('pg/lib/crypto/sasl.js') as PgSasl;

interface Turn {
  readonly messages: ScannedMessage[];
  readonly chunks: Buffer[];
}

/** Scans what the server sends until a message satisfies `until`. */
function turn(socket: Socket, scanner: BackendScanner, until: (message: ScannedMessage) => boolean): Promise<Turn> {
  return new Promise((resolve, reject) => {
    const messages: ScannedMessage[] = [];
    const chunks: Buffer[] = [];
    const finish = (error?: Error): void => {
      socket.off('data', onData).off('close', onClose);
      if (error) reject(error);
      else resolve({ messages, chunks });
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      try {
        const scanned = scanner.scan(chunk);
        messages.push(...scanned);
        if (scanned.some(until)) finish();
      } catch (error) {
        finish(error as Error);
      }
    };
    const onClose = (): void => finish();
    socket.on('data', onData).on('close', onClose);
  });
}

const readyFor = (message: ScannedMessage): boolean => message.kind === 'ReadyForQuery';

/** The same bytes through node-postgres's parser: what a client receives when the proxy forwards them as they came. */
function pgParse(chunks: readonly Buffer[]): BackendMessage[] {
  const parser = new Parser();
  const messages: BackendMessage[] = [];
  for (const chunk of chunks) parser.parse(chunk, (message) => messages.push(message));
  return messages;
}

function rowCount(messages: readonly ScannedMessage[]): number {
  return messages.reduce((sum, message) => sum + (message.kind === 'Run' && message.type === 'D' ? message.count : 0), 0);
}

function expectSameAsPgParser({ messages, chunks }: Turn): void {
  const parsed = pgParse(chunks);
  expect(rowCount(messages)).toBe(parsed.filter((message) => message.name === 'dataRow').length);
  expect(messages.filter((message) => message.kind !== 'Run').map((message) => message.bytes)).toEqual(parsed.filter((message) => message.name !== 'dataRow').map((message) => message.length + 1));
}

describe('BackendScanner against a real PostgreSQL', () => {
  let server: Awaited<ReturnType<typeof startScramServer>>;
  beforeAll(async () => {
    server = await startScramServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('follows SCRAM, session start, a large result, errors and transaction status', async () => {
    const url = new URL(server.url);
    const socket = connect(Number(url.port), url.hostname);
    await once(socket, 'connect');
    const scanner = new BackendScanner();
    try {
      socket.write(serialize.startup({ user: decodeURIComponent(url.username), database: url.pathname.slice(1) }));
      const challenge = await turn(socket, scanner, (m) => m.kind === 'Authentication');
      expect(challenge.messages).toMatchObject([{ kind: 'Authentication', code: 10 }]);
      const session = sasl.startSession(['SCRAM-SHA-256']);
      socket.write(serialize.sendSASLInitialResponseMessage('SCRAM-SHA-256', session.response));
      const first = await turn(socket, scanner, (m) => m.kind === 'Authentication');
      const serverFirst = first.messages[0];
      if (serverFirst?.kind !== 'Authentication' || serverFirst.code !== 11) throw new Error('expected AuthenticationSASLContinue');
      await sasl.continueSession(session, decodeURIComponent(url.password), serverFirst.data.toString('utf8'));
      socket.write(serialize.sendSCRAMClientFinalMessage(session.response));

      const start = await turn(socket, scanner, readyFor);
      const kinds = start.messages.map((m) => m.kind);
      expect(kinds.slice(0, 2)).toEqual(['Authentication', 'Authentication']);
      expect(kinds.at(-1)).toBe('ReadyForQuery');
      expect(start.messages).toContainEqual(expect.objectContaining({ kind: 'ParameterStatus', name: 'client_encoding', value: 'UTF8' }));
      expect(start.messages).toContainEqual(expect.objectContaining({ kind: 'BackendKeyData', secretKey: expect.any(Buffer) }));
      expect(start.messages.at(-1)).toMatchObject({ kind: 'ReadyForQuery', status: 'I' });
      expectSameAsPgParser(start);

      socket.write(serialize.query("select g, repeat('x', 200) from generate_series(1, 20000) g"));
      const rows = await turn(socket, scanner, readyFor);
      expect(rowCount(rows.messages)).toBe(20_000);
      expect(rows.messages.filter((m) => m.kind !== 'Run').map((m) => [m.kind, m.type])).toEqual([['Other', 'T'], ['CommandComplete', 'C'], ['ReadyForQuery', 'Z']]);
      expect(commandTag(rows.messages.find((m) => m.kind === 'CommandComplete')!)).toBe('SELECT 20000');
      expectSameAsPgParser(rows);

      socket.write(serialize.query('begin; select 1/0'));
      const failed = await turn(socket, scanner, readyFor);
      expect(failed.messages.find((m) => m.kind === 'ErrorResponse')).toMatchObject({ error: { severity: 'ERROR', code: '22012', message: 'division by zero' } });
      expect(failed.messages.at(-1)).toMatchObject({ kind: 'ReadyForQuery', status: 'E' });

      socket.write(serialize.query('rollback'));
      expect((await turn(socket, scanner, readyFor)).messages.at(-1)).toMatchObject({ status: 'I' });

      socket.write(
        Buffer.concat([
          serialize.parse({ text: 'select $1::int + 1 as n' }),
          serialize.bind({ values: ['41'] }),
          serialize.describe({ type: 'P' }),
          serialize.execute(),
          serialize.sync(),
        ]),
      );
      const extended = await turn(socket, scanner, readyFor);
      expect(extended.messages.map((m) => m.type)).toEqual(['1', '2', 'T', 'D', 'C', 'Z']);
      expect(pgParse(extended.chunks)).toContainEqual(expect.objectContaining({ name: 'dataRow', fields: ['42'] }));
    } finally {
      socket.end(serialize.end());
    }
  });
});

/**
 * A minimal server built from the framer and encoders: it answers a query with its own text and an
 * extended query with its parameters, so a real client checks both directions.
 */
function echoServer(): Server {
  return createServer((socket) => {
    const framer = new FrontendFramer({ maxMessageBytes: 1024 * 1024 });
    let params: (Buffer | null)[] = [];
    const reply = (frame: FrontendFrame): void => {
      if (frame.kind === 'SSLRequest') {
        socket.write(encodeSslResponse(false));
        return;
      }
      if (frame.kind === 'StartupMessage') {
        socket.write(Buffer.concat([encodeAuthenticationOk(), encodeParameterStatus('server_version', '17.0'), encodeParameterStatus('client_encoding', 'UTF8'), encodeBackendKeyData(1, Buffer.alloc(4, 7)), encodeReadyForQuery('I')]));
        return;
      }
      if (frame.kind !== 'Message') {
        socket.end();
        return;
      }
      const message = decodeFrontendMessage(frame);
      switch (message.kind) {
        case 'Query':
          socket.write(Buffer.concat([encodeRowDescription([{ name: 'sql', typeOid: 25 }]), encodeDataRow([message.sql]), encodeCommandComplete('SELECT 1'), encodeReadyForQuery('I')]));
          break;
        case 'Parse':
          socket.write(encodeParseComplete());
          break;
        case 'Bind':
          params = [...message.params];
          socket.write(encodeBindComplete());
          break;
        case 'Describe':
          socket.write(encodeRowDescription(params.map((_, index) => ({ name: `p${index + 1}`, typeOid: 25 }))));
          break;
        case 'Execute':
          socket.write(Buffer.concat([encodeDataRow(params), encodeCommandComplete('SELECT 1')]));
          break;
        case 'Sync':
          socket.write(encodeReadyForQuery('I'));
          break;
        case 'Terminate':
          socket.end();
          break;
        default:
          socket.end(encodeErrorResponse({ severity: 'FATAL', code: '0A000', message: `${message.kind} is not supported` }));
      }
    };
    socket.on('data', (chunk: Buffer) => {
      framer.push(chunk);
      try {
        for (let frame = framer.next(); frame !== undefined; frame = framer.next()) reply(frame);
      } catch (error) {
        if (!(error instanceof ProtocolViolation)) throw error;
        socket.end(encodeErrorResponse({ severity: 'FATAL', code: error.code, message: error.message }));
      }
    });
  });
}

describe('framer and encoders with a real client', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = echoServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.close();
    await once(server, 'close');
  });

  it('serves node-postgres over the simple and extended protocols', async () => {
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'agent', database: 'app' });
    await client.connect();
    try {
      expect((await client.query("select 'ünïcode' -- comment")).rows).toEqual([{ sql: "select 'ünïcode' -- comment" }]);
      expect((await client.query('select $1, $2, $3', ['42', null, 'x'.repeat(70_000)])).rows).toEqual([{ p1: '42', p2: null, p3: 'x'.repeat(70_000) }]);
    } finally {
      await client.end();
    }
  });

  it('ends a connection that sends a malformed message with 08P01 and leaves the others working', async () => {
    const healthy = new pg.Client({ host: '127.0.0.1', port, user: 'agent', database: 'app' });
    await healthy.connect();
    const rogue = connect(port, '127.0.0.1');
    await once(rogue, 'connect');
    try {
      const scanner = new BackendScanner();
      rogue.write(serialize.startup({ user: 'agent' }));
      await turn(rogue, scanner, readyFor);
      rogue.write(Buffer.from([0x51, 0, 0, 0, 3]));
      const ending = await turn(rogue, scanner, (m) => m.kind === 'ErrorResponse');
      expect(ending.messages).toMatchObject([{ kind: 'ErrorResponse', error: { severity: 'FATAL', code: '08P01' } }]);
      if (!rogue.closed) await once(rogue, 'close');
      expect((await healthy.query('select 1')).rows).toEqual([{ sql: 'select 1' }]);
    } finally {
      rogue.destroy();
      await healthy.end();
    }
  });
});
