import pg from 'pg';

const RECONNECT_MS = 500;

/**
 * One LISTEN connection shared by every subscriber of a channel. It connects on the first
 * subscriber and reconnects after a failure; after a reconnect it wakes everyone, since
 * notifications sent while it was down are lost.
 */
export class NotificationListener {
  private readonly callbacks = new Set<() => void>();
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
  ) {}

  onNotify(callback: () => void): () => void {
    this.callbacks.add(callback);
    void this.ensureConnected();
    return () => this.callbacks.delete(callback);
  }

  private wakeAll(): void {
    for (const callback of this.callbacks) callback();
  }

  private ensureConnected(): Promise<void> {
    if (this.client || this.closed) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, application_name: 'pgward-listen' });
    const lost = (): void => {
      if (this.client === client) this.client = undefined;
      client.removeAllListeners();
      client.on('error', () => undefined);
      void client.end().catch(() => undefined);
      if (!this.closed) this.retry = setTimeout(() => void this.ensureConnected(), RECONNECT_MS);
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', () => this.wakeAll());
    try {
      await client.connect();
      await client.query(`listen ${pg.escapeIdentifier(this.channel)}`);
      if (this.closed) {
        await client.end();
        return;
      }
      this.client = client;
      this.wakeAll();
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
