import { Counter, Gauge, type Registry } from 'prom-client';
import { TallyHistogram } from '../src/tally-histogram.js';

/** A count kept in a plain number on the statement path and added to its counter when scraped. */
export class Tally {
  value = 0;

  inc(by = 1): void {
    this.value += by;
  }
}

/**
 * `counter.labels(value).inc()` validates and hashes on every call, microseconds per statement; so
 * each label value gets a tally, and the counter takes what the tallies hold when it is scraped.
 */
function tallied(config: { name: string; help: string; labelName: string; registry: Registry }): (value: string) => Tally {
  const tallies = new Map<string, Tally>();
  new Counter({
    name: config.name,
    help: config.help,
    labelNames: [config.labelName],
    registers: [config.registry],
    collect() {
      for (const [value, tally] of tallies) {
        if (tally.value === 0) continue;
        this.inc({ [config.labelName]: value }, tally.value);
        tally.value = 0;
      }
    },
  });
  return (value) => {
    let tally = tallies.get(value);
    if (!tally) tallies.set(value, (tally = new Tally()));
    return tally;
  };
}

/** A counter without labels, tallied likewise. */
function talliedTotal(config: { name: string; help: string; registry: Registry }): Tally {
  const tally = new Tally();
  new Counter({
    name: config.name,
    help: config.help,
    registers: [config.registry],
    collect() {
      if (tally.value === 0) return;
      this.inc(tally.value);
      tally.value = 0;
    },
  });
  return tally;
}

/** A gauge kept in a plain number on the statement path and set from it when scraped. */
function talliedGauge(config: { name: string; help: string; registry: Registry }): Tally {
  const tally = new Tally();
  new Gauge({
    name: config.name,
    help: config.help,
    registers: [config.registry],
    collect() {
      this.set(tally.value);
    },
  });
  return tally;
}

/** The proxy's metrics, registered on the role's registry. */
export function createProxyMetrics(registry: Registry) {
  return {
    connections: new Gauge({ name: 'pgward_proxy_connections', help: 'Client connections open now', registers: [registry] }),
    connectionsTotal: new Counter({ name: 'pgward_proxy_connections_total', help: 'Client connections accepted', registers: [registry] }),
    refused: new Counter({ name: 'pgward_proxy_connections_refused_total', help: 'Client connections refused at login', registers: [registry] }),
    logins: new Counter({ name: 'pgward_proxy_logins_total', help: 'Login outcomes', labelNames: ['outcome'], registers: [registry] }),
    upstreamUnavailable: new Counter({
      name: 'pgward_proxy_upstream_unavailable_total',
      help: 'Logins and statements answered without an upstream connection, by why (the upstream failure reason)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    /** The statements counter of one decision event. */
    statementsOf: tallied({ name: 'pgward_proxy_statements_total', help: 'Statements by decision event', labelName: 'event', registry }),
    bytesOut: talliedTotal({ name: 'pgward_proxy_bytes_out_total', help: 'Bytes sent to clients from upstream', registry }),
    latency: new TallyHistogram({
      name: 'pgward_proxy_statement_seconds',
      help: 'Statement latency as the proxy sees it, forward to completion',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5],
      registers: [registry],
    }),
    poolConnections: new Gauge({ name: 'pgward_proxy_upstream_connections', help: 'Upstream connections by database and state', labelNames: ['database', 'state'], registers: [registry] }),
    decisionBuffer: new Gauge({ name: 'pgward_proxy_decision_buffer_depth', help: 'Decisions waiting for the bus', registers: [registry] }),
    auditLag: new Gauge({ name: 'pgward_proxy_audit_lag_seconds', help: 'How long the oldest decision ingest had not acknowledged had been on the bus, at the last sample', registers: [registry] }),
    auditBackPressure: new Gauge({ name: 'pgward_proxy_audit_backpressure', help: 'Whether the proxy has stopped reading its clients until ingest catches up (1) or not (0)', registers: [registry] }),
    auditBackPressureEngaged: new Counter({ name: 'pgward_proxy_audit_backpressure_engaged_total', help: 'Times the proxy stopped reading its clients until ingest caught up', registers: [registry] }),
    decisionDrops: new Gauge({ name: 'pgward_proxy_decisions_dropped', help: 'Decisions dropped because the buffer was full (reported as gap markers)', registers: [registry] }),
    replicaHealthy: new Gauge({ name: 'pgward_proxy_replica_healthy', help: 'Whether a read replica is in rotation (1) or not (0)', labelNames: ['database', 'replica'], registers: [registry] }),
    replicaLag: new Gauge({ name: 'pgward_proxy_replica_lag_seconds', help: 'A read replica’s replay lag at its last probe', labelNames: ['database', 'replica'], registers: [registry] }),
    replicaProbes: new Counter({ name: 'pgward_proxy_replica_probes_total', help: 'Health probes of read replicas by outcome (ok, stale, unreachable)', labelNames: ['outcome'], registers: [registry] }),
    replicaTransitions: new Counter({ name: 'pgward_proxy_replica_transitions_total', help: 'Read replicas entering (in) and leaving (out) rotation', labelNames: ['to'], registers: [registry] }),
    /** The result cache's lookups of one outcome. */
    cacheLookupsOf: tallied({ name: 'pgward_proxy_cache_lookups_total', help: 'Result cache lookups by outcome (hit, stale, miss, bypass)', labelName: 'outcome', registry }),
    cacheColdSkips: talliedTotal({ name: 'pgward_proxy_cache_cold_skips_total', help: 'Statements of cold shapes run past the result cache without a lookup (also counted as bypass)', registry }),
    cacheEvictions: talliedTotal({ name: 'pgward_proxy_cache_evictions_total', help: 'Result cache entries evicted for room (max_entries or the byte bound)', registry }),
    cacheBytes: talliedGauge({ name: 'pgward_proxy_cache_bytes', help: 'Bytes the result cache holds', registry }),
    relayLinks: new Gauge({ name: 'pgward_relay_links', help: 'Relay links this proxy serves as the peer, open now, by the origin’s region (docs/regions.md)', labelNames: ['peer_region'], registers: [registry] }),
    /** The relayed bytes counter of one direction (to_upstream, to_origin). */
    relayBytesOf: tallied({ name: 'pgward_relay_bytes_total', help: 'Bytes relayed between origins and this proxy’s upstream connections, by direction', labelName: 'direction', registry }),
    relayRefused: new Counter({ name: 'pgward_relay_refused_total', help: 'Relay links refused, by reason (bad_proof, bad_hello, wrong_region, unknown_database, no_upstream)', labelNames: ['reason'], registers: [registry] }),
    routed: new Counter({ name: 'pgward_proxy_routed_statements_total', help: 'Statements of auto_read_routing databases by where they were sent (primary, replica)', labelNames: ['target'], registers: [registry] }),
  };
}
export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
