import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** `counter.labels(value)` once per value: labelling hashes its arguments, too slow for every statement. */
function perLabel(counter: Counter<string>): (value: string) => Counter.Internal {
  const children = new Map<string, Counter.Internal>();
  return (value) => {
    let child = children.get(value);
    if (!child) children.set(value, (child = counter.labels(value)));
    return child;
  };
}

/** The proxy's metrics, registered on the role's registry. */
export function createProxyMetrics(registry: Registry) {
  const statements = new Counter({ name: 'pgward_proxy_statements_total', help: 'Statements by decision event', labelNames: ['event'], registers: [registry] });
  return {
    connections: new Gauge({ name: 'pgward_proxy_connections', help: 'Client connections open now', registers: [registry] }),
    connectionsTotal: new Counter({ name: 'pgward_proxy_connections_total', help: 'Client connections accepted', registers: [registry] }),
    refused: new Counter({ name: 'pgward_proxy_connections_refused_total', help: 'Client connections refused at login', registers: [registry] }),
    logins: new Counter({ name: 'pgward_proxy_logins_total', help: 'Login outcomes', labelNames: ['outcome'], registers: [registry] }),
    /** The statements counter of one decision event. */
    statementsOf: perLabel(statements),
    bytesOut: new Counter({ name: 'pgward_proxy_bytes_out_total', help: 'Bytes sent to clients from upstream', registers: [registry] }),
    latency: new Histogram({
      name: 'pgward_proxy_statement_seconds',
      help: 'Statement latency as the proxy sees it, forward to completion',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5],
      registers: [registry],
    }),
    poolConnections: new Gauge({ name: 'pgward_proxy_upstream_connections', help: 'Upstream connections by database and state', labelNames: ['database', 'state'], registers: [registry] }),
    decisionBuffer: new Gauge({ name: 'pgward_proxy_decision_buffer_depth', help: 'Decisions waiting for the bus', registers: [registry] }),
    decisionDrops: new Gauge({ name: 'pgward_proxy_decisions_dropped', help: 'Decisions dropped because the buffer was full (reported as gap markers)', registers: [registry] }),
  };
}
export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
