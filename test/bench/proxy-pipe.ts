/**
 * The floor of `npm run bench:proxy`: a Node TCP pipe with no logic at all (no framing, pooling,
 * policy or audit). Each client gets its own connection to the cluster and bytes are copied both
 * ways. It reads its sockets as pgward does (proxy/inlet.ts: `onread` into a shared buffer, no
 * Readable stream) and runs in the bench's process, as pgward does, so the two pay the same event
 * loop and the difference between them is pgward's logic.
 */
import { createServer, type AddressInfo } from 'node:net';
import { Inlet } from '../../proxy/inlet.js';
import type { Teardown } from './proxy-servers.js';

/** Starts the pipe in front of 127.0.0.1:`upstreamPort`; returns its port. */
export async function startPipe(upstreamPort: number, teardown: Teardown): Promise<number> {
  const open = new Set<Inlet>();
  const join = (from: Inlet, to: Inlet): void => {
    open.add(from);
    from.socket.setNoDelay(true);
    from.receive({
      bytes: (chunk) => to.socket.write(chunk),
      ended: () => {
        open.delete(from);
        to.socket.destroy();
      },
    });
  };
  const server = createServer({ pauseOnConnect: true }, (accepted) => {
    const client = Inlet.accept(accepted);
    const upstream = Inlet.connect({ host: '127.0.0.1', port: upstreamPort });
    join(client, upstream);
    join(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  teardown.add(
    () =>
      new Promise<void>((resolve) => {
        for (const inlet of open) inlet.socket.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}
