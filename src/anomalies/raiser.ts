/**
 * The raiser: turns the anomaly_windows projection's detections into AnomalyRaised events, in
 * detection order, behind a checkpoint of its own. Each alert's stream and event id derive from
 * its window (anomalyId), and raising a window already raised decides nothing, so a replay, a
 * restart between the append and the checkpoint, or two raisers at once never duplicate an alert.
 * A rule with `disable_credential` then throws the kill-switch, with the alert as its actor.
 */
import type pg from 'pg';
import { anomaly } from '../../commands/anomalies/anomaly.js';
import { disableCredentialFor } from '../../commands/credentials/disable-for-honeytoken.js';
import { DomainError } from '../../commands/domain-error.js';
import { handle } from '../../commands/handle.js';
import { anomalyStream } from '../../projections/anomalies.js';
import { anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { ensureReadModel, LIVE_SCHEMA } from '../../projections/runner.js';
import { qualified } from '../../projections/projection.js';
import type { AnomalySeverity } from '../events/anomalies.js';
import { logEvent } from '../log-events.js';
import { migrate } from '../pg/migrate.js';
import type { EventStore } from '../store/port.js';
import type { Logger } from '../logger.js';

export const RAISER_ACTOR = 'anomaly-detector';
const PAGE = 200;

const checkpointDdl = `
create schema if not exists pgward;
create table if not exists pgward.anomaly_raiser_checkpoint (
  name text primary key,
  position bigint not null,
  anomaly_id text not null,
  updated_at timestamptz not null default now()
);`;

interface DetectionRow {
  anomaly_id: string;
  project_id: string;
  credential_id: string;
  kind: string;
  severity: AnomalySeverity;
  title: string;
  details: Record<string, never>;
  window_start: Date;
  window_end: Date;
  detected_at: Date;
  position: bigint;
  disable_credential: boolean;
}

async function checkpoint(pool: pg.Pool): Promise<{ position: bigint; anomalyId: string }> {
  const { rows } = await pool.query<{ position: bigint; anomaly_id: string }>(`select position, anomaly_id from pgward.anomaly_raiser_checkpoint where name = 'raiser'`);
  return rows[0] ? { position: rows[0].position, anomalyId: rows[0].anomaly_id } : { position: -1n, anomalyId: '' };
}

/** Moves the checkpoint forward only: a raiser that fell behind another never takes it back. */
async function advance(pool: pg.Pool, row: DetectionRow): Promise<void> {
  await pool.query(
    `insert into pgward.anomaly_raiser_checkpoint as c (name, position, anomaly_id) values ('raiser', $1, $2)
     on conflict (name) do update set position = excluded.position, anomaly_id = excluded.anomaly_id, updated_at = now()
     where (c.position, c.anomaly_id) < (excluded.position, excluded.anomaly_id)`,
    [row.position, row.anomaly_id],
  );
}

async function pending(pool: pg.Pool, after: { position: bigint; anomalyId: string }): Promise<DetectionRow[]> {
  const { rows } = await pool.query<DetectionRow>(
    `select * from ${qualified(LIVE_SCHEMA, 'anomaly_detections')} where (position, anomaly_id) > ($1, $2) order by position, anomaly_id limit ${PAGE}`,
    [after.position, after.anomalyId],
  );
  return rows;
}

export interface RaiserOptions {
  readonly store: EventStore;
  readonly pool: pg.Pool;
  readonly logger: Logger;
}

async function raise(options: RaiserOptions, row: DetectionRow): Promise<void> {
  const { store, logger } = options;
  const correlationId = `anomaly:${row.anomaly_id}`;
  const raised = await handle(
    store,
    anomalyStream(row.anomaly_id),
    anomaly,
    {
      kind: 'raise',
      anomaly: {
        anomaly_id: row.anomaly_id,
        project_id: row.project_id,
        credential_id: row.credential_id,
        kind: row.kind,
        severity: row.severity,
        title: row.title,
        details: row.details,
        window_start: row.window_start.toISOString(),
        window_end: row.window_end.toISOString(),
      },
    },
    // Created at the time of the entry that tripped it: the alert's read model is a function of the events.
    { correlationId, actor: RAISER_ACTOR, idempotencyKey: row.anomaly_id, now: () => row.detected_at },
  );
  if (raised.events.length > 0) {
    logEvent(logger, 'anomaly_raised', { anomaly_id: row.anomaly_id, project_id: row.project_id, credential_id: row.credential_id, kind: row.kind, severity: row.severity }, row.title);
  }
  if (!row.disable_credential) return;
  try {
    await disableCredentialFor(store, row.credential_id, { actor: `anomaly:${row.anomaly_id}`, reason: row.title, correlationId });
  } catch (error) {
    // A revoked or unknown credential has nothing left to disable.
    if (!(error instanceof DomainError)) throw error;
  }
}

export interface AnomalyRaiser {
  /** Looks for new detections now (after the anomaly_windows projection committed a batch). */
  wake(): void;
  stop(): Promise<void>;
}

const RETRY_MS = 1_000;

/** Starts the raiser; it runs once at start and whenever woken, and retries after a failure. */
export function startAnomalyRaiser(options: RaiserOptions): AnomalyRaiser {
  const { pool, logger } = options;
  let stopped = false;
  let again = false;
  let running: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;
  const ready = (async () => {
    await migrate(pool, checkpointDdl);
    await ensureReadModel(pool, anomalyWindowsProjection);
  })();

  async function drain(): Promise<void> {
    await ready;
    do {
      again = false;
      for (;;) {
        if (stopped) return;
        const rows = await pending(pool, await checkpoint(pool));
        for (const row of rows) {
          if (stopped) return;
          await raise(options, row);
          await advance(pool, row);
        }
        if (rows.length < PAGE) break;
      }
    } while (again && !stopped);
  }

  function wake(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain()
      .catch((error: unknown) => {
        logger.error({ err: error }, 'raising anomalies failed; retrying');
        again = false;
        retry = setTimeout(wake, RETRY_MS);
      })
      .finally(() => {
        running = undefined;
        if (again) wake();
      });
  }

  wake();
  return {
    wake,
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await running;
      await ready.catch(() => undefined);
    },
  };
}
