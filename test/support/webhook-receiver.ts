import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { freePort } from './free-port.js';

export interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
}

export interface Envelope {
  id: string;
  type: string;
  project_id: string;
  occurred_at: string;
  data: Record<string, unknown>;
}

/** A real HTTP receiver on 127.0.0.1: records every request; `answer` decides each response. */
export interface WebhookReceiver {
  readonly url: string;
  readonly port: number;
  readonly received: Received[];
  /** Decides each response (200 by default); may delay it. */
  answer: (request: Received, response: ServerResponse) => void | Promise<void>;
  /** Stops listening: deliveries meet a refused connection. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(path = '/hooks'): Promise<WebhookReceiver> {
  const port = await freePort();
  const received: Received[] = [];
  let server: Server | undefined;
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}${path}`,
    port,
    received,
    answer: (_request, response) => void response.writeHead(200).end('ok'),
    async down() {
      const closing = server;
      server = undefined;
      if (!closing) return;
      closing.closeAllConnections();
      await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
    async up() {
      if (server) return;
      const listening = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const got = { headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
          received.push(got);
          void Promise.resolve(receiver.answer(got, response)).catch(() => response.destroy());
        });
      });
      await new Promise<void>((resolve) => listening.listen(port, '127.0.0.1', resolve));
      server = listening;
    },
    close: () => receiver.down(),
  };
  await receiver.up();
  return receiver;
}

/** Verifies a delivery with the standardwebhooks package and returns its envelope; throws when it does not verify. */
export function verified(received: Received, secret: string): Envelope {
  const headers = Object.fromEntries(Object.entries(received.headers).map(([key, value]) => [key, String(value)]));
  return new Webhook(secret).verify(received.body, headers) as Envelope;
}
