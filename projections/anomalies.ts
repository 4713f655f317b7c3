import { AnomalyAcknowledged, AnomalyRaised, AnomalyResolved, type AnomalySeverity } from '../src/events/anomalies.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type AnomalyStatus = 'open' | 'acknowledged' | 'resolved';

export type AnomalyRow = {
  anomaly_id: string;
  project_id: string;
  credential_id: string | null;
  kind: string;
  severity: AnomalySeverity;
  title: string;
  status: AnomalyStatus;
  details: Record<string, unknown>;
  window_start: string | null;
  window_end: string | null;
  created_at: string;
  acknowledged_at: string | null;
  acknowledged_by: string | null;
  resolved_at: string | null;
  resolved_by: string | null;
  revision: number;
};

export const ANOMALY_STREAM_PREFIX = 'anomaly-';

export function anomalyStream(anomalyId: string): string {
  return `${ANOMALY_STREAM_PREFIX}${anomalyId}`;
}

export function evolveAnomaly(row: AnomalyRow | undefined, event: RecordedEvent): AnomalyRow | null {
  switch (event.type) {
    case AnomalyRaised.type: {
      const { data, metadata } = decodeWith(AnomalyRaised, event);
      return {
        ...data,
        status: 'open',
        created_at: metadata.at,
        acknowledged_at: null,
        acknowledged_by: null,
        resolved_at: null,
        resolved_by: null,
        revision: event.revision,
      };
    }
    case AnomalyAcknowledged.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(AnomalyAcknowledged, event);
      return { ...row, status: 'acknowledged', acknowledged_at: metadata.at, acknowledged_by: data.acknowledged_by, revision: event.revision };
    }
    case AnomalyResolved.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(AnomalyResolved, event);
      return { ...row, status: 'resolved', resolved_at: metadata.at, resolved_by: data.resolved_by, revision: event.revision };
    }
    default:
      return row ?? null;
  }
}

/** The alerts (spec §2.9), one row per `anomaly-<id>` stream. */
export const anomaliesProjection = rowProjection<AnomalyRow>({
  name: 'anomalies',
  streamPrefixes: [ANOMALY_STREAM_PREFIX],
  table: {
    name: 'anomalies',
    key: 'anomaly_id',
    columnNames: [
      'anomaly_id', 'project_id', 'credential_id', 'kind', 'severity', 'title', 'status', 'details', 'window_start', 'window_end', 'created_at',
      'acknowledged_at', 'acknowledged_by', 'resolved_at', 'resolved_by', 'revision',
    ],
    columns: `anomaly_id text primary key, project_id text not null, credential_id text, kind text not null, severity text not null, title text not null,
      status text not null, details jsonb not null, window_start timestamptz, window_end timestamptz, created_at timestamptz not null,
      acknowledged_at timestamptz, acknowledged_by text, resolved_at timestamptz, resolved_by text, revision integer not null`,
    orderBy: 'anomaly_id',
    indexes: ['project_id, created_at desc, anomaly_id desc'],
  },
  keyOf: (event) => (event.stream.startsWith(ANOMALY_STREAM_PREFIX) ? event.stream.slice(ANOMALY_STREAM_PREFIX.length) : undefined),
  evolve: evolveAnomaly,
});
