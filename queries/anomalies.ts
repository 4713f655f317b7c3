import type pg from 'pg';
import type { AnomalyRow, AnomalyStatus } from '../projections/anomalies.js';

export interface AnomalyFilters {
  readonly status?: AnomalyStatus;
  readonly kind?: string;
  readonly severity?: string;
  readonly credential_id?: string;
}

/** Where a page starts: after this alert, newest first. */
export interface AnomalyCursor {
  readonly created_at: string;
  readonly anomaly_id: string;
}

export async function findAnomaly(db: pg.Pool, projectId: string, anomalyId: string): Promise<AnomalyRow | undefined> {
  const { rows } = await db.query<{ row: AnomalyRow }>(`select to_jsonb(a) as row from rm.anomalies a where project_id = $1 and anomaly_id = $2`, [projectId, anomalyId]);
  return rows[0]?.row;
}

/** A project's alerts, newest first (created_at, then id, descending), filtered. */
export async function listAnomalies(db: pg.Pool, projectId: string, filters: AnomalyFilters, after: AnomalyCursor | undefined, limit: number): Promise<AnomalyRow[]> {
  const { rows } = await db.query<{ row: AnomalyRow }>(
    `select to_jsonb(a) as row from rm.anomalies a
      where project_id = $1 and ($2::text is null or status = $2) and ($3::text is null or kind = $3) and ($4::text is null or severity = $4)
        and ($5::text is null or credential_id = $5) and ($6::timestamptz is null or (created_at, anomaly_id) < ($6, $7))
      order by created_at desc, anomaly_id desc limit $8`,
    [projectId, filters.status ?? null, filters.kind ?? null, filters.severity ?? null, filters.credential_id ?? null, after?.created_at ?? null, after?.anomaly_id ?? null, limit],
  );
  return rows.map((r) => r.row);
}
