import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { DatabaseRow, ReplicaRow } from '../../projections/databases.js';
import { createProxyMetrics } from '../../proxy/metrics.js';
import { DEFAULT_HEALTH_THRESHOLDS } from '../../proxy/replica-health.js';
import { ReplicaMonitor } from '../../proxy/replica-monitor.js';

const database = (pool_region: string) => ({ database_id: 'db_1', status: 'active', auto_read_routing: true, pool_region }) as DatabaseRow;

function monitorOf(row: DatabaseRow): ReplicaMonitor {
  const options = { intervalMs: 1_000, thresholds: DEFAULT_HEALTH_THRESHOLDS, connectTimeoutMs: 1_000, targetOf: () => { throw new Error('no probe expected'); }, metrics: createProxyMetrics(new Registry()), logger: pino({ level: 'silent' }), region: 'a' };
  return new ReplicaMonitor({ values: () => ([] as ReplicaRow[]).values() }, { get: () => row }, options);
}

describe('read routing and regions (docs/regions.md)', () => {
  it('routes the reads of a database of this region, and never those of a database relayed to another', () => {
    expect(monitorOf(database('')).routes('db_1')).toBe(true);
    expect(monitorOf(database('a')).routes('db_1')).toBe(true);
    expect(monitorOf(database('b')).routes('db_1')).toBe(false);
  });
});
