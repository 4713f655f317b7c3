/**
 * The one reader of a socket: a client's, or an upstream connection's. The socket reads all the
 * time and hands its bytes, and its end, to whichever receiver its holder set. An upstream
 * connection's is the start-up or reset exchange, the pool while the connection is idle, a session
 * while it runs statements: handing a connection over swaps the receiver, no listener is added or
 * removed, the socket is not paused and resumed. Bytes that arrive while nobody receives break the
 * connection, since a server at ReadyForQuery has nothing to say.
 *
 * Plain TCP sockets read into one buffer that every inlet shares, copied out at once (the `onread`
 * option): no 64 KB allocation and no Readable stream per read. TLS sockets come as a stream.
 */
import net from 'node:net';

export interface Receiver {
  bytes(chunk: Buffer): void;
  /** The socket failed (with the error) or closed. */
  ended(error: Error | undefined): void;
}

/** Each callback reads it whole before the next read, so one buffer serves every socket. */
const SHARED_READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** For a connection that is closing: whatever still comes is of no interest. */
export const DISCARD: Receiver = { bytes: () => undefined, ended: () => undefined };

export class Inlet {
  #receiver: Receiver | undefined;
  #paused = false;
  /** Bytes read before the next receiver was set, handed to it first (what followed a PROXY protocol header). */
  #pending: Buffer | undefined;

  private constructor(readonly socket: net.Socket) {
    socket.on('error', (error: Error) => this.#receiver?.ended(error));
    socket.on('close', () => this.#receiver?.ended(undefined));
  }

  /** A TCP connection read through the shared buffer. */
  static connect(options: { readonly host: string; readonly port: number }): Inlet {
    const inlet: Inlet = new Inlet(net.connect({ host: options.host, port: options.port, onread: Inlet.#sharedReads(() => inlet) }));
    return inlet;
  }

  /**
   * An accepted TCP connection read through the shared buffer. Node offers `onread` only to sockets
   * it creates, so the accepted socket (from a server that pauses on connect: it has read nothing)
   * gives its handle to a new socket that reads that way, and is then destroyed without it.
   */
  static accept(accepted: net.Socket): Inlet {
    const holder = accepted as unknown as { _handle: unknown };
    const handle = holder._handle;
    holder._handle = null;
    accepted.destroy();
    const options = { handle, readable: true, writable: true, onread: Inlet.#sharedReads(() => inlet) } as net.SocketConstructorOpts;
    const inlet: Inlet = new Inlet(new net.Socket(options));
    return inlet;
  }

  /** The `onread` option of a socket read through the shared buffer, delivering to its inlet. */
  static #sharedReads(inlet: () => Inlet): net.OnReadOpts {
    return {
      buffer: SHARED_READ_BUFFER,
      callback: (size: number, buffer: Uint8Array): boolean => {
        // allocUnsafe takes small sizes from Node's pool: about 1 µs less than Buffer.copyBytesFrom.
        const chunk = Buffer.allocUnsafe(size);
        chunk.set(buffer.subarray(0, size));
        inlet().#deliver(chunk);
        return true;
      },
    };
  }

  /** A socket read as a stream (TLS, or a plain socket that started as one). */
  static over(socket: net.Socket): Inlet {
    const inlet = new Inlet(socket);
    socket.on('data', (chunk: Buffer) => inlet.#deliver(chunk));
    socket.resume();
    return inlet;
  }

  /** Whether a receiver is set: a connection handed back with one still set was not let go. */
  get receiving(): boolean {
    return this.#receiver !== undefined;
  }

  /** Sets (or, with undefined, clears) who gets the bytes; a new receiver finds the socket reading. */
  receive(receiver: Receiver | undefined): void {
    this.#receiver = receiver;
    if (!receiver) return;
    this.resume();
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending) receiver.bytes(pending);
  }

  /** Keeps `bytes` for the next receiver set, before anything the socket reads after them. */
  unshift(bytes: Buffer): void {
    if (bytes.length > 0) this.#pending = bytes;
  }

  /** Stops reading until resume: the receiver cannot pass more on yet. */
  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.socket.resume();
  }

  #deliver(chunk: Buffer): void {
    const receiver = this.#receiver;
    if (receiver) receiver.bytes(chunk);
    else this.socket.destroy();
  }
}
