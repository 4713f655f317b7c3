/**
 * Requests and notes between `pgward serve`'s supervisor and one of its worker processes, over the
 * child's IPC channel (advanced serialization: byte arrays cross as bytes). Either side asks, the
 * other answers; an answer's rejection rejects the ask. When the channel closes (the worker exited,
 * or the supervisor did) every ask still open is rejected with ChannelClosedError.
 */

/** The side of an IPC channel: a ChildProcess in the supervisor, `process` in the worker. */
export interface Endpoint {
  send?(message: unknown, callback?: (error: Error | null) => void): boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

export class ChannelClosedError extends Error {
  override readonly name = 'ChannelClosedError';
  constructor(reason: string) {
    super(`the channel to the other process is closed: ${reason}`);
  }
}

export class ChannelTimeoutError extends Error {
  override readonly name = 'ChannelTimeoutError';
}

/** An answer's failure, as the asking side sees it. */
export class RemoteError extends Error {
  override readonly name = 'RemoteError';
}

type Wire =
  | { readonly k: 'ask'; readonly id: number; readonly what: string; readonly payload: unknown }
  | { readonly k: 'answer'; readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly k: 'answer'; readonly id: number; readonly ok: false; readonly error: string }
  | { readonly k: 'note'; readonly what: string; readonly payload: unknown };

interface Open {
  resolve(value: unknown): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout | undefined;
}

const isWire = (message: unknown): message is Wire => typeof message === 'object' && message !== null && 'k' in message;

export class Channel {
  private nextId = 1;
  private readonly open = new Map<number, Open>();
  private readonly answers = new Map<string, (payload: never) => unknown>();
  private readonly notes = new Map<string, ((payload: never) => void)[]>();
  private closedBy: string | undefined;
  private readonly listener = (message: unknown): void => this.receive(message);

  constructor(private readonly endpoint: Endpoint) {
    endpoint.on('message', this.listener);
  }

  /** Asks the other side; `timeoutMs` undefined waits as long as the channel is open. */
  ask<T>(what: string, payload?: unknown, timeoutMs?: number): Promise<T> {
    if (this.closedBy !== undefined) return Promise.reject(new ChannelClosedError(this.closedBy));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => this.settle(id, (o) => o.reject(new ChannelTimeoutError(`no answer to ${what} within ${timeoutMs} ms`))), timeoutMs);
      this.open.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      this.post({ k: 'ask', id, what, payload }, (error) => this.settle(id, (o) => o.reject(new ChannelClosedError(`cannot send ${what}: ${error.message}`))));
    });
  }

  answer<P>(what: string, handler: (payload: P) => unknown): void {
    this.answers.set(what, handler as (payload: never) => unknown);
  }

  tell(what: string, payload?: unknown): void {
    this.post({ k: 'note', what, payload });
  }

  on<P>(what: string, listener: (payload: P) => void): void {
    this.notes.set(what, [...(this.notes.get(what) ?? []), listener as (payload: never) => void]);
  }

  /** Rejects every open ask; later asks reject at once. */
  close(reason: string): void {
    if (this.closedBy !== undefined) return;
    this.closedBy = reason;
    this.endpoint.off('message', this.listener);
    for (const id of [...this.open.keys()]) this.settle(id, (o) => o.reject(new ChannelClosedError(reason)));
  }

  private settle(id: number, how: (open: Open) => void): void {
    const open = this.open.get(id);
    if (!open) return;
    this.open.delete(id);
    clearTimeout(open.timer);
    how(open);
  }

  private post(message: Wire, onError?: (error: Error) => void): void {
    if (this.closedBy !== undefined || !this.endpoint.send) return onError?.(new ChannelClosedError(this.closedBy ?? 'no IPC channel'));
    try {
      this.endpoint.send(message, (error) => {
        if (error) onError?.(error);
      });
    } catch (error) {
      onError?.(error as Error);
    }
  }

  private receive(message: unknown): void {
    if (!isWire(message)) return;
    if (message.k === 'answer') {
      this.settle(message.id, (open) => (message.ok ? open.resolve(message.value) : open.reject(new RemoteError(message.error))));
      return;
    }
    if (message.k === 'note') {
      for (const listener of this.notes.get(message.what) ?? []) listener(message.payload as never);
      return;
    }
    const handler = this.answers.get(message.what);
    void Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`nothing answers ${message.what} here`);
        return handler(message.payload as never);
      })
      .then(
        (value) => this.post({ k: 'answer', id: message.id, ok: true, value }),
        (error: unknown) => this.post({ k: 'answer', id: message.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
      );
  }
}
