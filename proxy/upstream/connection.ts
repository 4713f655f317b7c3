/**
 * Connections to the real PostgreSQL servers pgward fronts: TCP, TLS as the sslmode asks, the
 * startup message and authentication. Once the server is ready for queries the connection is
 * handed over with nobody receiving its bytes; from then on the proxy reads (through its inlet)
 * and writes it raw.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { serialize } from 'pg-protocol';
import type {
  AuthenticationMD5Password,
  BackendKeyDataMessage,
  BackendMessage,
  DatabaseError,
  ParameterStatusMessage,
  ReadyForQueryMessage,
} from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { scramClientFinal, scramClientFirst, verifyServerFinal, type ScramClientState } from '../../src/crypto/scram-client.js';
import { ScramError } from '../../src/crypto/scram.js';
import type { SslMode } from '../../src/events/databases.js';
import { DISCARD, Inlet, type Receiver } from '../inlet.js';

export interface UpstreamTarget {
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
  /** Plaintext, opened from the sealed secret by the caller. Never part of an error or a live connection. */
  readonly password: string;
  readonly sslMode: SslMode;
  readonly applicationName?: string;
  /** Bounds the whole start-up: TCP, TLS, authentication, up to ReadyForQuery. */
  readonly connectTimeoutMs: number;
  /** More startup parameters (e.g. statement_timeout); they cannot replace the ones above. */
  readonly extraStartupParameters?: Readonly<Record<string, string>>;
}

/** The target without its password, as a live connection keeps it. */
export type UpstreamEndpoint = Omit<UpstreamTarget, 'password'>;

/** What opening a socket to the upstream needs (start-up and cancel requests alike). */
export type TransportTarget = Pick<UpstreamTarget, 'host' | 'port' | 'sslMode' | 'connectTimeoutMs'>;

export interface BackendKey {
  readonly processId: number;
  readonly secretKey: Buffer;
}

export interface UpstreamConnection {
  /** For writing and closing; its bytes and its end are read through `inlet`. */
  readonly socket: net.Socket | tls.TLSSocket;
  /** Handed over with no receiver: the taker sets its own, and clears it when it lets go. */
  readonly inlet: Inlet;
  /** Every ParameterStatus of the start-up (server_version, client_encoding, TimeZone, ...). */
  readonly parameters: ReadonlyMap<string, string>;
  readonly backendKey: BackendKey;
  readonly target: UpstreamEndpoint;
  readonly id: number;
  readonly createdAt: number;
  /** The peer's read replica a relay link runs on (its RelayReady said so, docs/regions.md); undefined on the peer's primary and for every direct connection. */
  readonly peerReplicaId?: string | undefined;
  /** Sends Terminate and closes; the socket is destroyed if the server does not close it promptly. */
  close(): void;
}

export type UpstreamErrorCode =
  | 'CONNECT_FAILED'
  | 'TIMEOUT'
  | 'TLS_REFUSED'
  | 'AUTH_FAILED'
  | 'AUTH_UNSUPPORTED'
  | 'SERVER_ERROR'
  /** The server broke the protocol (unexpected message, bytes where none may be). */
  | 'PROTOCOL_ERROR';

/** What the server said, when it refused with an ErrorResponse. */
export interface UpstreamErrorDetails {
  readonly sqlstate?: string;
  readonly serverMessage?: string;
}

export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
    readonly details: UpstreamErrorDetails = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export const KEEPALIVE_DELAY_MS = 30_000;
const CLOSE_GRACE_MS = 1_000;
/** No message of an exchange this module owns comes near this; a bigger length is a broken stream. */
const MAX_MESSAGE_BYTES = 1 << 20;
const HEADER_BYTES = 5;
/** The messages a server may send from the startup message up to ReadyForQuery. */
const STARTUP_MESSAGES = 'RSKZEN';
/** Set by pgward itself, or not to be set at all (replication turns the backend into a WAL sender). */
const RESERVED_PARAMETERS = new Set(['user', 'database', 'application_name', 'client_encoding', 'replication']);
const REQUIRES_TLS: ReadonlySet<SslMode> = new Set(['require', 'verify-ca', 'verify-full']);
/** Authentication request codes pg-protocol decodes, with the exact length of the fixed-size ones. */
const AUTH_REQUEST_LENGTHS = new Map<number, number | undefined>([
  [0, 8],
  [3, 8],
  [5, 12],
  [10, undefined],
  [11, undefined],
  [12, undefined],
]);
const UNSUPPORTED_METHODS = new Map([
  [2, 'Kerberos V5'],
  [6, 'SCM credentials'],
  [7, 'GSSAPI'],
  [8, 'GSSAPI'],
  [9, 'SSPI'],
]);

let lastId = 0;

/** A new connection's id, unique in the process (direct and relayed connections alike). */
export const nextConnectionId = (): number => ++lastId;

function protocolError(label: string, message: string): UpstreamError {
  return new UpstreamError('PROTOCOL_ERROR', `${label}: ${message}`);
}

/** Class 28 (invalid authorization specification, e.g. 28P01 wrong password) is an authentication failure. */
function serverError(label: string, error: DatabaseError): UpstreamError {
  const sqlstate = error.code;
  const code = sqlstate?.startsWith('28') ? 'AUTH_FAILED' : 'SERVER_ERROR';
  return new UpstreamError(code, `${label}: ${error.message} (SQLSTATE ${sqlstate ?? 'unknown'})`, { sqlstate, serverMessage: error.message });
}

/**
 * Whole backend messages from a socket, decoded by pg-protocol's Parser, for the short exchanges
 * the upstream code owns (start-up, reset). It frames the bytes itself so that it knows, when it is
 * detached, whether anything arrived beyond the last message read.
 */
export class MessageReader implements Receiver {
  readonly #parser = new Parser();
  readonly #messages: BackendMessage[] = [];
  #pending: Buffer = Buffer.alloc(0);
  #failure: Error | undefined;
  #waiter: { resolve: (message: BackendMessage) => void; reject: (error: Error) => void } | undefined;

  /** `expected` lists the type bytes that may arrive; any other is a protocol error. */
  constructor(
    private readonly inlet: Inlet,
    private readonly expected: string,
    private readonly label: string,
  ) {
    inlet.receive(this);
  }

  next(): Promise<BackendMessage> {
    const message = this.#messages.shift();
    if (message) return Promise.resolve(message);
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => (this.#waiter = { resolve, reject }));
  }

  /** Stops receiving; throws if the stream failed or more bytes came than were read. */
  detach(): void {
    this.inlet.receive(undefined);
    if (this.#failure) throw this.#failure;
    if (this.#messages.length > 0 || this.#pending.length > 0) throw protocolError(this.label, 'the server sent data after ReadyForQuery');
  }

  bytes(chunk: Buffer): void {
    if (this.#failure) return;
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    try {
      while (this.#pending.length >= HEADER_BYTES) {
        const size = 1 + this.#pending.readUInt32BE(1);
        if (size < HEADER_BYTES || size > MAX_MESSAGE_BYTES) throw protocolError(this.label, `a message of ${size} bytes`);
        if (this.#pending.length < size) break;
        this.#messages.push(this.#decode(this.#pending.subarray(0, size)));
        this.#pending = this.#pending.subarray(size);
      }
    } catch (error) {
      this.#fail(error as Error);
    }
    this.#wake();
  }

  ended(error: Error | undefined): void {
    this.#fail(
      error
        ? new UpstreamError('CONNECT_FAILED', `${this.label}: ${error.message}`, {}, { cause: error })
        : new UpstreamError('CONNECT_FAILED', `${this.label}: the server closed the connection`),
    );
    this.#wake();
  }

  #fail(error: Error): void {
    this.#failure ??= error;
  }

  #wake(): void {
    const waiter = this.#waiter;
    if (!waiter) return;
    const message = this.#messages.shift();
    if (message) {
      this.#waiter = undefined;
      waiter.resolve(message);
    } else if (this.#failure) {
      this.#waiter = undefined;
      waiter.reject(this.#failure);
    }
  }

  #decode(frame: Buffer): BackendMessage {
    const type = String.fromCharCode(frame[0]!);
    if (!this.expected.includes(type)) throw protocolError(this.label, `unexpected message type ${JSON.stringify(type)}`);
    // pg-protocol throws on authentication methods it does not know, and reads a fixed-size request of the wrong length as AuthenticationOk.
    if (type === 'R') {
      const method = frame.length >= 9 ? frame.readInt32BE(5) : -1;
      const unsupported = UNSUPPORTED_METHODS.get(method);
      if (unsupported) throw new UpstreamError('AUTH_UNSUPPORTED', `${this.label}: the server asks for ${unsupported} authentication, which pgward does not support`);
      if (!AUTH_REQUEST_LENGTHS.has(method)) throw new UpstreamError('AUTH_UNSUPPORTED', `${this.label}: the server asks for authentication method ${method}, which pgward does not support`);
      const length = AUTH_REQUEST_LENGTHS.get(method);
      if (length !== undefined && frame.length !== 1 + length) throw protocolError(this.label, `a malformed authentication request ${method}`);
    }
    let message: BackendMessage | undefined;
    this.#parser.parse(frame, (decoded) => (message = decoded));
    return message!;
  }
}

/** Resolves with the arguments of the first `event`; rejects when the socket fails or closes first. */
export function first(socket: net.Socket, event: string, label: string): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const onEvent = (...args: unknown[]): void => {
      done();
      resolve(args);
    };
    const onError = (error: Error): void => {
      done();
      reject(new UpstreamError('CONNECT_FAILED', `${label}: ${error.message}`, {}, { cause: error }));
    };
    const onClose = (): void => {
      done();
      reject(new UpstreamError('CONNECT_FAILED', `${label}: the connection closed`));
    };
    const done = (): void => {
      socket.off(event, onEvent);
      socket.off('error', onError);
      socket.off('close', onClose);
    };
    socket.on(event, onEvent);
    socket.on('error', onError);
    socket.on('close', onClose);
  });
}

/** Registers a socket of an exchange, to be destroyed if the exchange fails or runs out of time. */
export type Guard = <S extends net.Socket>(socket: S) => S;

/**
 * Runs an exchange with the upstream within `timeoutMs` (and until `signal` aborts): when the time
 * is up the guarded sockets are destroyed and the exchange rejects with TIMEOUT; on any failure
 * they are destroyed too.
 */
export async function bounded<T>(label: string, timeoutMs: number, signal: AbortSignal | undefined, work: (guard: Guard) => Promise<T>): Promise<T> {
  signal?.throwIfAborted();
  const sockets: net.Socket[] = [];
  let interrupted: unknown;
  const interrupt = (reason: unknown): void => {
    interrupted ??= reason;
    for (const socket of sockets) socket.destroy();
  };
  const timer = setTimeout(() => interrupt(new UpstreamError('TIMEOUT', `${label}: no answer within ${timeoutMs} ms`)), timeoutMs);
  const onAbort = (): void => interrupt(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const result = await work((socket) => {
      sockets.push(socket);
      return socket;
    });
    if (interrupted !== undefined) throw interrupted;
    return result;
  } catch (error) {
    for (const socket of sockets) socket.destroy();
    throw interrupted ?? error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** libpq's checks: verify-ca checks the chain, verify-full also the host name; the others encrypt only. */
function tlsOptions(target: TransportTarget, socket: net.Socket): tls.ConnectionOptions {
  const verify = target.sslMode === 'verify-ca' || target.sslMode === 'verify-full';
  return {
    socket,
    host: target.host,
    // SNI, as libpq sends it; not allowed for an IP address.
    ...(net.isIP(target.host) === 0 ? { servername: target.host } : {}),
    rejectUnauthorized: verify,
    ...(target.sslMode === 'verify-full' ? {} : { checkServerIdentity: () => undefined }),
  };
}

/** SSLRequest, then the TLS handshake when the server agrees. */
async function negotiateTls(raw: net.Socket, target: TransportTarget, label: string, guard: Guard): Promise<Inlet> {
  raw.write(serialize.requestSsl());
  const [answer] = (await first(raw, 'data', label)) as [Buffer];
  // Bytes after the one-byte answer would be read as if they came over TLS (CVE-2021-23222).
  if (answer.length !== 1) throw protocolError(label, 'the answer to SSLRequest is not a single byte');
  if (answer[0] === 0x4e) {
    if (REQUIRES_TLS.has(target.sslMode)) throw new UpstreamError('TLS_REFUSED', `${label}: the server does not accept TLS, which sslmode ${target.sslMode} requires`);
    return Inlet.over(raw);
  }
  if (answer[0] !== 0x53) throw protocolError(label, 'unexpected answer to SSLRequest');
  const secure = guard(tls.connect(tlsOptions(target, raw)));
  try {
    await first(secure, 'secureConnect', label);
  } catch (error) {
    throw new UpstreamError('TLS_REFUSED', `${label}: TLS handshake failed: ${(error as Error).message}`, {}, { cause: error });
  }
  return Inlet.over(secure);
}

/**
 * A TCP socket to the upstream, with TLS when the sslmode asks for or prefers it, and the inlet
 * that reads it, with nobody receiving yet. Without TLS negotiation it reads through the shared
 * buffer; a socket that negotiated reads as a stream, which its first byte was read from.
 */
export async function openTransport(target: TransportTarget, label: string, guard: Guard): Promise<Inlet> {
  const plain = target.sslMode === 'disable' ? Inlet.connect(target) : undefined;
  const raw = guard(plain?.socket ?? net.connect({ host: target.host, port: target.port }));
  raw.setNoDelay(true);
  raw.setKeepAlive(true, KEEPALIVE_DELAY_MS);
  await first(raw, 'connect', label);
  return plain ?? negotiateTls(raw, target, label, guard);
}

function startupParameters(target: UpstreamTarget): Record<string, string> {
  const extras = target.extraStartupParameters ?? {};
  for (const name of Object.keys(extras)) {
    if (RESERVED_PARAMETERS.has(name)) throw new RangeError(`the startup parameter ${name} cannot be set as an extra`);
  }
  // serialize.startup adds client_encoding UTF8.
  const parameters = { user: target.user, database: target.database, ...(target.applicationName === undefined ? {} : { application_name: target.applicationName }), ...extras };
  for (const [name, value] of Object.entries(parameters)) {
    if (name === '' || name.includes('\0') || value.includes('\0')) throw new RangeError(`the startup parameter ${JSON.stringify(name)} is empty or contains NUL`);
  }
  return parameters;
}

function md5Response(target: UpstreamTarget, salt: Buffer): string {
  const md5 = (data: string | Buffer): string => createHash('md5').update(data).digest('hex');
  return `md5${md5(Buffer.concat([Buffer.from(md5(target.password + target.user)), salt]))}`;
}

/** Answers the server's authentication requests up to AuthenticationOk. */
async function authenticate(reader: MessageReader, socket: net.Socket, target: UpstreamTarget, label: string): Promise<void> {
  let scram: { state: ScramClientState; expected?: Buffer; verified: boolean } | undefined;
  for (;;) {
    const message = await reader.next();
    switch (message.name) {
      case 'authenticationOk':
        if (scram && !scram.verified) throw new UpstreamError('AUTH_FAILED', `${label}: the server ended SCRAM authentication without proving it knows the password`);
        return;
      case 'authenticationCleartextPassword':
        socket.write(serialize.password(target.password));
        break;
      case 'authenticationMD5Password':
        socket.write(serialize.password(md5Response(target, (message as AuthenticationMD5Password).salt)));
        break;
      case 'authenticationSASL': {
        const { mechanisms } = message as BackendMessage & { mechanisms: string[] };
        if (scram) throw protocolError(label, 'a second SASL authentication request');
        if (!mechanisms.includes('SCRAM-SHA-256')) throw new UpstreamError('AUTH_UNSUPPORTED', `${label}: the server offers only the SASL mechanisms ${mechanisms.join(', ')}`);
        const clientFirst = scramClientFirst();
        scram = { state: clientFirst.state, verified: false };
        socket.write(serialize.sendSASLInitialResponseMessage('SCRAM-SHA-256', clientFirst.message));
        break;
      }
      case 'authenticationSASLContinue': {
        if (!scram || scram.expected) throw protocolError(label, 'an unexpected SASL continuation');
        const { data } = message as BackendMessage & { data: string };
        let final: Awaited<ReturnType<typeof scramClientFinal>>;
        try {
          final = await scramClientFinal(scram.state, data, target.password);
        } catch (error) {
          if (error instanceof ScramError) throw protocolError(label, `SCRAM: ${error.message}`);
          throw error;
        }
        scram.expected = final.expectedServerSignature;
        socket.write(serialize.sendSCRAMClientFinalMessage(final.message));
        break;
      }
      case 'authenticationSASLFinal': {
        if (!scram?.expected || scram.verified) throw protocolError(label, 'an unexpected SASL final message');
        if (!verifyServerFinal(scram.expected, (message as BackendMessage & { data: string }).data)) {
          throw new UpstreamError('AUTH_FAILED', `${label}: the server's SCRAM signature is wrong; it does not know the password`);
        }
        scram.verified = true;
        break;
      }
      case 'error':
        throw serverError(label, message as DatabaseError);
      case 'notice':
        break;
      default:
        throw protocolError(label, `unexpected ${message.name} during authentication`);
    }
  }
}

/** After AuthenticationOk: ParameterStatus and BackendKeyData up to ReadyForQuery, then the reader lets go. */
async function awaitReady(reader: MessageReader, label: string): Promise<{ parameters: Map<string, string>; backendKey: BackendKey }> {
  const parameters = new Map<string, string>();
  let backendKey: BackendKey | undefined;
  for (;;) {
    const message = await reader.next();
    switch (message.name) {
      case 'parameterStatus': {
        const { parameterName, parameterValue } = message as ParameterStatusMessage;
        parameters.set(parameterName, parameterValue);
        break;
      }
      case 'backendKeyData': {
        const { processID, secretKey } = message as BackendKeyDataMessage;
        const key = Buffer.alloc(4);
        key.writeInt32BE(secretKey);
        backendKey = { processId: processID, secretKey: key };
        break;
      }
      case 'readyForQuery': {
        reader.detach();
        const { status } = message as ReadyForQueryMessage;
        if (status !== 'I') throw protocolError(label, `ReadyForQuery with transaction status ${status} after start-up`);
        if (!backendKey) throw protocolError(label, 'the server sent no BackendKeyData, so its queries could not be cancelled');
        return { parameters, backendKey };
      }
      case 'error':
        throw serverError(label, message as DatabaseError);
      case 'notice':
        break;
      default:
        throw protocolError(label, `unexpected ${message.name} after authentication`);
    }
  }
}

/** Terminate, then the end of the stream; destroyed if the other end does not close promptly. */
export function closeGracefully(inlet: Inlet): void {
  const { socket } = inlet;
  if (socket.destroyed || socket.writableEnded) return;
  socket.end(serialize.end());
  // Reading lets the server's end of the stream arrive, which destroys the socket.
  inlet.receive(DISCARD);
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}

/**
 * Opens a connection to the upstream and completes its start-up: TLS per sslmode, the startup
 * message, authentication (SCRAM-SHA-256, MD5, cleartext or trust), up to ReadyForQuery. Rejects
 * with an UpstreamError (or the signal's reason); the password is never part of a message.
 */
export async function connectUpstream(target: UpstreamTarget, options: { signal?: AbortSignal } = {}): Promise<UpstreamConnection> {
  const label = `upstream ${target.user}@${target.host}:${target.port}/${target.database}`;
  const parameters = startupParameters(target);
  return await bounded(label, target.connectTimeoutMs, options.signal, async (guard) => {
    const inlet = await openTransport(target, label, guard);
    const { socket } = inlet;
    const reader = new MessageReader(inlet, STARTUP_MESSAGES, label);
    socket.write(serialize.startup(parameters));
    await authenticate(reader, socket, target, label);
    const ready = await awaitReady(reader, label);
    const { password: _password, ...endpoint } = target;
    return { socket, inlet, ...ready, target: endpoint, id: nextConnectionId(), createdAt: Date.now(), close: () => closeGracefully(inlet) };
  });
}
