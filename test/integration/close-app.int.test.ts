/**
 * closeApp (src/http/close-app.ts), as the control plane and a data plane stop their HTTP servers:
 * a request under way finishes within the drain, and a connection that never sent a request,
 * which Node's close waits for as for one under way, is cut once the drain is over.
 */
import Fastify from 'fastify';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { closeApp } from '../../src/http/close-app.js';

async function listening(): Promise<{ app: ReturnType<typeof Fastify>; port: number }> {
  const app = Fastify();
  app.get('/slow', async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { done: true };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: (app.server.address() as AddressInfo).port };
}

const connected = (port: number): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });

describe('closeApp', () => {
  it('cuts a connection that sent no request once the drain is over', async () => {
    const { app, port } = await listening();
    const silent = await connected(port);
    const ended = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    const started = performance.now();
    await closeApp(app, 200);
    const tookMs = performance.now() - started;
    await ended;
    expect(tookMs).toBeGreaterThanOrEqual(190);
    expect(tookMs).toBeLessThan(2_000);
  });

  it('lets a request under way finish within the drain', async () => {
    const { app, port } = await listening();
    const answer = fetch(`http://127.0.0.1:${port}/slow`).then(async (response) => [response.status, await response.json()] as const);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await closeApp(app, 5_000);
    expect(await answer).toEqual([200, { done: true }]);
  });
});
