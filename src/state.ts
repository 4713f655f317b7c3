import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Config } from './config.js';
import { startEmbeddedPostgres } from './pg/embedded.js';

export interface StateDatabase {
  /** Connection URL of the PostgreSQL that holds the event store (unless EventStoreDB) and the read models. */
  readonly url: string;
  /** Where it came from, for /healthz and the start-up line. */
  readonly source: 'PGWARD_STATE_URL' | 'embedded (started)' | 'embedded (already running)';
  close(): Promise<void>;
}

/** The embedded cluster of another pgward process on this data directory, if one is up. */
async function runningEmbedded(dataDir: string): Promise<string | undefined> {
  const pidFile = join(dataDir, 'pg', 'postmaster.pid');
  const passwordFile = join(dataDir, 'pg-password');
  if (!existsSync(pidFile) || !existsSync(passwordFile)) return undefined;
  const [pid, , , port] = (await readFile(pidFile, 'utf8')).split('\n');
  try {
    process.kill(Number(pid), 0);
  } catch {
    return undefined;
  }
  const password = (await readFile(passwordFile, 'utf8')).trim();
  return `postgresql://pgward:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}

/**
 * Finds the state database: PGWARD_STATE_URL when set; else the embedded PostgreSQL under the data
 * directory, reusing a running one when `reuseRunning` (CLI commands next to `pgward serve`).
 */
export async function openStateDatabase(config: Config, options: { reuseRunning: boolean; onLog?: (line: string) => void }): Promise<StateDatabase> {
  if (config.PGWARD_STATE_URL) return { url: config.PGWARD_STATE_URL, source: 'PGWARD_STATE_URL', close: async () => undefined };
  const dataDir = resolve(config.PGWARD_DATA_DIR);
  const running = await runningEmbedded(dataDir);
  if (running) {
    if (!options.reuseRunning) throw new Error(`another pgward already runs the embedded PostgreSQL in ${dataDir}`);
    return { url: running, source: 'embedded (already running)', close: async () => undefined };
  }
  const embedded = await startEmbeddedPostgres({ dir: dataDir, port: config.PGWARD_EMBEDDED_PG_PORT, onLog: options.onLog });
  return { url: embedded.url, source: 'embedded (started)', close: () => embedded.stop() };
}
