import { connect, createServer, type Socket } from 'node:net';

export interface SlowLink {
  /** Where clients connect instead of the target. */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * A TCP relay to `target` on a real socket pair per connection, whose client-to-target direction
 * takes `delayMs` (each chunk passed on that much later, in order); the way back is immediate. A
 * slow network hop in front of a real server, for what a client must wait for across it.
 */
export function slowLink(target: { readonly host: string; readonly port: number }, delayMs: number): Promise<SlowLink> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => setTimeout(() => upstream.write(chunk), delayMs));
    upstream.pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (typeof address !== 'object' || !address) return reject(new Error('the slow link has no port'));
      resolve({
        port: address.port,
        close: () =>
          new Promise((closed) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => closed());
          }),
      });
    });
  });
}
