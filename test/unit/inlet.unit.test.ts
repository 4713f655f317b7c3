import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Inlet, type Receiver } from '../../proxy/inlet.js';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A loopback listener whose accepted sockets become inlets (as the proxy's do), and a client connected to it. */
async function acceptedPair(): Promise<{ inlet: Inlet; client: net.Socket }> {
  const accepted = new Promise<Inlet>((resolve) => {
    const server = net.createServer({ pauseOnConnect: true }, (socket) => resolve(Inlet.accept(socket)));
    servers.push(server);
    server.listen(0, '127.0.0.1');
  });
  const server = servers.at(-1)!;
  if (!server.listening) await once(server, 'listening');
  const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  sockets.push(client);
  await once(client, 'connect');
  const inlet = await accepted;
  sockets.push(inlet.socket);
  return { inlet, client };
}

/** A receiver that keeps what it is given. */
function collector(): Receiver & { readonly received: Buffer[]; readonly ends: (Error | undefined)[]; text(): string } {
  const received: Buffer[] = [];
  const ends: (Error | undefined)[] = [];
  return {
    received,
    ends,
    bytes: (chunk) => received.push(chunk),
    ended: (error) => ends.push(error),
    text: () => Buffer.concat(received).toString('utf8'),
  };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('Inlet.accept', () => {
  it('reads an accepted socket through the shared buffer: every byte in order, each read its own copy, and the peer address kept', async () => {
    const { inlet, client } = await acceptedPair();
    const receiver = collector();
    inlet.receive(receiver);
    const expected = Array.from({ length: 200 }, (_, index) => `message ${index};`).join('');
    for (let at = 0; at < expected.length; at += 97) {
      client.write(expected.slice(at, at + 97));
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await until(() => receiver.text().length >= expected.length);
    // Several reads, and the earlier chunks intact: none is a view of the buffer the later reads filled.
    expect(receiver.received.length).toBeGreaterThan(1);
    expect(receiver.text()).toBe(expected);
    expect(inlet.socket.remoteAddress).toBe('127.0.0.1');
    expect(inlet.socket.remotePort).toBe(client.localPort);
  });

  it('hands bytes kept with unshift to the next receiver first, then what the socket reads after them', async () => {
    const { inlet, client } = await acceptedPair();
    const first = collector();
    inlet.receive(first);
    client.write('HEADER|startup');
    await until(() => first.text() === 'HEADER|startup');
    // As the PROXY protocol gate does: the header consumed, the rest kept for the session's receiver.
    inlet.unshift(Buffer.from('startup'));
    const second = collector();
    inlet.receive(second);
    expect(second.text()).toBe('startup');
    client.write('|query');
    await until(() => second.text() === 'startup|query');
    expect(first.text()).toBe('HEADER|startup');
  });

  it('writes back to the client on the same socket', async () => {
    const { inlet, client } = await acceptedPair();
    inlet.receive(collector());
    inlet.socket.write('hello');
    const [reply] = (await once(client, 'data')) as [Buffer];
    expect(reply.toString()).toBe('hello');
  });

  it('holds what the client sends while paused and delivers it on resume', async () => {
    const { inlet, client } = await acceptedPair();
    const receiver = collector();
    inlet.receive(receiver);
    inlet.pause();
    client.write('held');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.received).toEqual([]);
    inlet.resume();
    await until(() => receiver.text() === 'held');
  });

  it('reports the client closing as an end without error', async () => {
    const { inlet, client } = await acceptedPair();
    const receiver = collector();
    inlet.receive(receiver);
    client.end();
    await until(() => receiver.ends.length > 0);
    expect(receiver.ends[0]).toBeUndefined();
  });

  it('closes the socket when bytes arrive while nobody receives', async () => {
    const { inlet, client } = await acceptedPair();
    client.write('unexpected');
    await once(client, 'close');
    expect(inlet.socket.destroyed).toBe(true);
  });

  it('lets the listener close without waiting for the accepted socket it gave away', async () => {
    const { inlet } = await acceptedPair();
    inlet.receive(collector());
    const server = servers.pop()!;
    await new Promise((resolve) => server.close(resolve));
    expect(server.listening).toBe(false);
    expect(inlet.socket.destroyed).toBe(false);
  });
});
