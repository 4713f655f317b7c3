import pg from 'pg';

const RECONNECT_MS = 500;

/** Hears a notification's payload, or undefined when notifications may have been missed. */
export type NotificationCallback = (payload: string | undefined) => void;

/**
 * One LISTEN connection shared by every subscriber, whatever channels they listen to. It connects
 * on the first subscriber, listens to a channel while some subscriber wants it, and reconnects
 * after a failure. A notification wakes only the subscribers of its channel. Whenever
 * notifications may have been missed (a channel newly listened to, a reconnect) it wakes the
 * subscribers concerned, so they read once and miss nothing.
 */
export class NotificationListener {
  private readonly channels = new Map<string, Set<NotificationCallback>>();
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  /** LISTEN and UNLISTEN one at a time, in the order asked: pg queues them, but warns on overlap. */
  private commands: Promise<unknown> = Promise.resolve();

  /** `connection`: a connection string, or the options of the pool whose database to listen on. */
  constructor(private readonly connection: string | pg.ClientConfig) {}

  /** Calls `callback` on each notification of any of `channels`; returns the unregister function. */
  onNotify(channels: readonly string[], callback: NotificationCallback): () => void {
    const unique = [...new Set(channels)];
    for (const channel of unique) {
      const callbacks = this.channels.get(channel);
      if (callbacks) callbacks.add(callback);
      else {
        this.channels.set(channel, new Set([callback]));
        void this.listen(channel);
      }
    }
    void this.ensureConnected();
    return () => {
      for (const channel of unique) {
        const callbacks = this.channels.get(channel);
        callbacks?.delete(callback);
        if (callbacks?.size === 0) {
          this.channels.delete(channel);
          void this.command(`unlisten ${pg.escapeIdentifier(channel)}`).catch(() => undefined);
        }
      }
    };
  }

  private command(sql: string): Promise<unknown> {
    const client = this.client;
    if (!client) return Promise.resolve();
    const next = this.commands.then(() => client.query(sql));
    this.commands = next.catch(() => undefined);
    return next;
  }

  private wake(channel: string, payload?: string): void {
    for (const callback of this.channels.get(channel) ?? []) callback(payload);
  }

  /** Listens on the current connection (a later one listens to every channel anyway), then wakes the channel's subscribers. */
  private async listen(channel: string): Promise<void> {
    if (!this.client) return;
    try {
      await this.command(`listen ${pg.escapeIdentifier(channel)}`);
    } catch {
      // The connection failed: reconnecting listens again and wakes everyone.
      return;
    }
    this.wake(channel);
  }

  private ensureConnected(): Promise<void> {
    if (this.client || this.closed) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const config = typeof this.connection === 'string' ? { connectionString: this.connection } : this.connection;
    const client = new pg.Client({ ...config, application_name: 'pgward-listen', keepAlive: true });
    const lost = (): void => {
      if (this.client === client) this.client = undefined;
      client.removeAllListeners();
      client.on('error', () => undefined);
      void client.end().catch(() => undefined);
      if (!this.closed) this.retry = setTimeout(() => void this.ensureConnected(), RECONNECT_MS);
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message) => this.wake(message.channel, message.payload ?? ''));
    try {
      await client.connect();
      if (this.closed) {
        await client.end();
        return;
      }
      // Channels added from here on are listened to by listen(), those before by the loop below.
      this.client = client;
      this.commands = Promise.resolve();
      await Promise.all([...this.channels.keys()].map((channel) => this.listen(channel)));
    } catch {
      lost();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}
