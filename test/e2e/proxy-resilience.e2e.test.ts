import { connect, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScramServer } from '../support/embedded.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { metricValue } from '../support/pgward-process.js';

let upstreamServer: Awaited<ReturnType<typeof startScramServer>>;
let gateway: TestGateway;
let agent: AgentSecrets;

beforeAll(async () => {
  upstreamServer = await startScramServer();
  gateway = await startGateway('proxy_resilience', upstreamServer.url);
  agent = await gateway.register('resilient');
});
afterAll(async () => {
  await gateway?.stop().catch(() => undefined);
  await upstreamServer?.stop();
});

function rawConnection(port: number): Promise<{ socket: Socket; received: () => Buffer; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => resolve({ socket, received: () => Buffer.concat(chunks), closed }));
    const closed = new Promise<void>((done) => socket.on('close', () => done()));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
  });
}

function startupPacket(user: string, database: string): Buffer {
  const params = Buffer.from(`user\0${user}\0database\0${database}\0\0`);
  const packet = Buffer.alloc(8 + params.length);
  packet.writeInt32BE(packet.length, 0);
  packet.writeInt32BE(196608, 4);
  params.copy(packet, 8);
  return packet;
}

/** The SQLSTATE of the first ErrorResponse in `reply`. */
function sqlstateOf(reply: Buffer): string | undefined {
  const start = reply.indexOf('E');
  if (start < 0) return undefined;
  for (let at = start + 5; at < reply.length && reply[at] !== 0; ) {
    const end = reply.indexOf(0, at + 1);
    if (reply[at] === 'C'.charCodeAt(0)) return reply.subarray(at + 1, end).toString();
    at = end + 1;
  }
  return undefined;
}

describe('the proxy under malformed input', () => {
  it('answers a startup packet split across writes with the SASL challenge', async () => {
    const { socket, received } = await rawConnection(gateway.proxy.port);
    const packet = startupPacket(agent.credential.id, 'x');
    for (const part of [packet.subarray(0, 3), packet.subarray(3, 11), packet.subarray(11)]) {
      socket.write(part);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received()[0]).toBe('R'.charCodeAt(0));
    expect(received().includes(Buffer.from('SCRAM-SHA-256'))).toBe(true);
    socket.destroy();
  });

  it.each([
    ['a length below 4', Buffer.from([0, 0, 0, 2, 0, 0, 0, 0])],
    ['an oversized startup packet', Buffer.from([0, 1, 0, 0, 0, 3, 0, 0])],
    ['an unknown protocol code', Buffer.from([0, 0, 0, 8, 0x12, 0x34, 0x56, 0x78])],
    ['unencrypted bytes coalesced after an SSL request', Buffer.concat([Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]), startupPacket('x', 'y')])],
  ])('ends the connection with 08P01 for %s, and other sessions keep working', async (_what, bytes) => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    const { socket, received, closed } = await rawConnection(gateway.proxy.port);
    socket.write(bytes);
    await closed;
    expect(sqlstateOf(received())).toBe('08P01');
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await client.end();
  });

  it('survives a client that disconnects in the middle of a message', async () => {
    const { socket } = await rawConnection(gateway.proxy.port);
    socket.end(startupPacket(agent.credential.id, 'x').subarray(0, 10));
    const client = new pg.Client({ connectionString: agent.connection_string });
    await client.connect();
    expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    await client.end();
  });
});

describe('the proxy when the upstream dies', () => {
  it('gives the client an error, not a hang, when the upstream stops mid-query, and serves again after it restarts', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string });
    client.on('error', () => undefined);
    await client.connect();
    const running = client.query('select pg_sleep(30)').then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    await upstreamServer.restart(async () => {
      const error = await running;
      expect(error).toBeInstanceOf(Error);
      expect(Date.now() - started).toBeLessThan(10_000);
      const refused = new pg.Client({ connectionString: agent.connection_string });
      const down = (await refused.connect().then(
        () => undefined,
        (e: unknown) => e,
      )) as { code?: string } | undefined;
      expect(down?.code).toBe('08006');
      expect(metricValue(await gateway.metrics.metrics(), 'pgward_proxy_upstream_unavailable_total', { reason: 'refused' })).toBe(1);
    });
    const again = new pg.Client({ connectionString: agent.connection_string });
    await again.connect();
    expect((await again.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 1000 }]);
    await again.end();
  });
});
