/**
 * The floor of `npm run bench:proxy`: a Node TCP pipe with no logic at all (no framing, pooling,
 * policy or audit). Each client gets its own connection to the cluster and bytes are copied both
 * ways. It runs in the bench's process, as pgward does, so the two pay the same event loop.
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import type { Teardown } from './proxy-servers.js';

/** Starts the pipe in front of 127.0.0.1:`upstreamPort`; returns its port. */
export async function startPipe(upstreamPort: number, teardown: Teardown): Promise<number> {
  const open = new Set<Socket>();
  const track = (socket: Socket): void => {
    open.add(socket);
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => open.delete(socket));
  };
  const server = createServer((client) => {
    const upstream = createConnection(upstreamPort, '127.0.0.1');
    track(client);
    track(upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  teardown.add(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}
