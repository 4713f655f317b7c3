/**
 * A steady load of agents through pgward's proxy, for the e2e tests that break something mid-load:
 * each client runs one statement after another (extended protocol) until stopped, and what
 * succeeded is counted with when it did.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { Login } from './pgward-process.js';

export interface AgentLoad {
  /** Statements that succeeded, with when each did (Date.now()). */
  readonly done: number[];
  readonly failures: string[];
  stop(): Promise<void>;
}

/**
 * `clients` agents on `proxyPort`, each reading one row of public.items (ids 1 to 100) and pausing
 * `pauseMs` between statements: these tests are about what is lost, not speed, and a backlog
 * must drain on a busy machine.
 */
export async function startAgentLoad(proxyPort: number, login: Login, clients: number, pauseMs: number): Promise<AgentLoad> {
  const done: number[] = [];
  const failures: string[] = [];
  let running = true;
  const connected = await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new pg.Client({ host: '127.0.0.1', port: proxyPort, ...login, ssl: false });
      client.on('error', (error) => failures.push(error.message));
      await client.connect();
      return client;
    }),
  );
  const loops = connected.map(async (client, c) => {
    for (let i = 0; running; i++) {
      try {
        const result = await client.query('select id, label from public.items where id = $1', [((c * 31 + i) % 100) + 1]);
        if (result.rows.length !== 1) failures.push(`expected one row, got ${result.rows.length}`);
        else done.push(Date.now());
      } catch (error) {
        failures.push((error as Error).message);
      }
      await delay(pauseMs);
    }
  });
  return {
    done,
    failures,
    async stop() {
      running = false;
      await Promise.all(loops);
      await Promise.all(connected.map((client) => client.end()));
    },
  };
}
