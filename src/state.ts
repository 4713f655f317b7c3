import { resolve } from 'node:path';
import type { Config } from './config.js';
import { listenOn } from './listen.js';
import type { Logger } from './logger.js';
import { runningCluster, startEmbeddedPostgres } from './pg/embedded.js';

export interface StateDatabase {
  /** Connection URL of the PostgreSQL that holds the event store (unless EventStoreDB) and the read models. */
  readonly url: string;
  /** Where it came from, for /healthz and the start-up line. */
  readonly source: 'PGWARD_STATE_URL' | 'embedded (started)' | 'embedded (already running)';
  close(): Promise<void>;
}

/**
 * Finds the state database: PGWARD_STATE_URL when set; else the embedded PostgreSQL under the data
 * directory, reusing a running one when `reuseRunning` (CLI commands next to `pgward serve`). A
 * start stops a server left running by a pgward that was killed, and says so in the log.
 */
export async function openStateDatabase(config: Config, options: { reuseRunning: boolean; logger?: Logger }): Promise<StateDatabase> {
  if (config.PGWARD_STATE_URL) return { url: config.PGWARD_STATE_URL, source: 'PGWARD_STATE_URL', close: async () => undefined };
  const dataDir = resolve(config.PGWARD_DATA_DIR);
  const running = options.reuseRunning ? await runningCluster(dataDir) : undefined;
  if (running) return { url: running.url, source: 'embedded (already running)', close: async () => undefined };
  const { logger } = options;
  const port = config.PGWARD_EMBEDDED_PG_PORT;
  const embedded = await listenOn('PGWARD_EMBEDDED_PG_PORT', '127.0.0.1', port, () =>
    startEmbeddedPostgres({
      dir: dataDir,
      port,
      onLog: (line) => logger?.debug({ postgres: line.trim() }, 'embedded postgres'),
      onOrphanStopped: (orphan) =>
        logger?.warn(
          { event: 'embedded_postgres_recovered', data_dir: dataDir, postgres_pid: orphan.pid, owner_pid: orphan.ownerPid },
          'stopped the embedded PostgreSQL left running by a pgward that is gone',
        ),
    }),
  );
  return { url: embedded.url, source: 'embedded (started)', close: () => embedded.stop() };
}
