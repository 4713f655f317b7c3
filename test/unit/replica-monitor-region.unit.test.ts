import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { DatabaseRow, ReplicaRow } from '../../projections/databases.js';
import { createProxyMetrics } from '../../proxy/metrics.js';
import { DEFAULT_HEALTH_THRESHOLDS } from '../../proxy/replica-health.js';
import { ReplicaMonitor } from '../../proxy/replica-monitor.js';
import type { UpstreamTarget } from '../../proxy/upstream/connection.js';

const database = (pool_region: string) => ({ database_id: 'db_1', status: 'active', auto_read_routing: true, pool_region }) as DatabaseRow;
const replica = { replica_id: 'rep_1', database_id: 'db_1', host: '127.0.0.1', port: 1, ssl_mode: 'disable' } as ReplicaRow;

/** A monitor of one database with one replica; `probed` counts the probes it starts. */
function monitorOf(row: DatabaseRow): { monitor: ReplicaMonitor; probed: () => number } {
  let probes = 0;
  // Nothing listens on port 1: a probe fails at once, as unreachable.
  const targetOf = (): UpstreamTarget => {
    probes++;
    return { host: '127.0.0.1', port: 1, database: 'shop', user: 'app', password: 'unused', sslMode: 'disable', connectTimeoutMs: 1_000 };
  };
  const options = { intervalMs: 60_000, thresholds: DEFAULT_HEALTH_THRESHOLDS, connectTimeoutMs: 1_000, targetOf, metrics: createProxyMetrics(new Registry()), logger: pino({ level: 'silent' }), region: 'a' };
  const monitor = new ReplicaMonitor({ values: () => [replica].values() }, { get: () => row }, options);
  return { monitor, probed: () => probes };
}

describe('read routing and regions (docs/regions.md#read-routing)', () => {
  it('routes the reads of a database that asks for it, of this region or relayed to another (where the peer picks the replica)', () => {
    for (const region of ['', 'a', 'b']) expect(monitorOf(database(region)).monitor.routes('db_1')).toBe(true);
    expect(monitorOf({ ...database(''), auto_read_routing: false }).monitor.routes('db_1')).toBe(false);
  });

  it('probes the replicas of a database of this region only: a relayed one’s are its peer’s to probe', () => {
    const here = monitorOf(database('a'));
    const relayed = monitorOf(database('b'));
    here.monitor.start();
    relayed.monitor.start();
    here.monitor.stop();
    relayed.monitor.stop();
    expect(here.probed()).toBe(1);
    expect(relayed.probed()).toBe(0);
  });
});
