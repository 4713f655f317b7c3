import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RequestObserver } from './http/plugins/request-metrics.js';
import type { IngestObserver } from './ingest/ingest.js';
import type { ToolCallObserver } from './mcp/tool.js';
import type { EventStore } from './store/port.js';

/** Seconds, for requests and tool calls: a health check's milliseconds up to a statement's MCP limit of 30 s. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Gap reasons as label values; a reason this version does not know is `other` (the bus carries any). */
const GAP_REASONS: ReadonlySet<string> = new Set(['proxy_buffer_full', 'sequence_hole']);

/** HTTP requests and MCP tool calls, as the app reports them (src/http/plugins/request-metrics.ts, src/mcp/tool.ts). */
function servedMetrics(registry: Registry) {
  const requests = new Counter({ name: 'pgward_http_requests_total', help: 'HTTP requests answered, by route template, method and status code', labelNames: ['route', 'method', 'status'], registers: [registry] });
  const requestSeconds = new Histogram({
    name: 'pgward_http_request_duration_seconds',
    help: 'Time from receiving an HTTP request to its response written, by route template, method and status code',
    labelNames: ['route', 'method', 'status'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const toolCalls = new Counter({ name: 'pgward_mcp_tool_calls_total', help: 'MCP tool calls, by server (agent, management), tool and outcome (ran, refused, error)', labelNames: ['server', 'tool', 'outcome'], registers: [registry] });
  const toolCallSeconds = new Histogram({
    name: 'pgward_mcp_tool_call_duration_seconds',
    help: 'Time an MCP tool call took, by server, tool and outcome',
    labelNames: ['server', 'tool', 'outcome'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const request: RequestObserver = ({ route, method, status, seconds }) => {
    const labels = { route, method, status: String(status) };
    requests.inc(labels);
    requestSeconds.observe(labels, seconds);
  };
  const toolCall =
    (server: 'agent' | 'management'): ToolCallObserver =>
    ({ tool, outcome, seconds }) => {
      const labels = { server, tool, outcome };
      toolCalls.inc(labels);
      toolCallSeconds.observe(labels, seconds);
    };
  return { request, toolCall };
}

/** What ingest reports: the bus records it handled, the gaps it appended, the checkpoints it could not sign. */
function ingestMetrics(registry: Registry): IngestObserver {
  const records = new Counter({ name: 'pgward_ingest_records_total', help: 'Bus records ingest handled: appended, dropped (unreadable) or failed (delivered again)', labelNames: ['outcome'], registers: [registry] });
  const gaps = new Counter({ name: 'pgward_audit_gaps_total', help: 'Gap markers appended to audit trails, by reason', labelNames: ['reason'], registers: [registry] });
  const lost = new Counter({ name: 'pgward_audit_gap_decisions_total', help: 'Decisions the appended gap markers say were lost, by reason', labelNames: ['reason'], registers: [registry] });
  const checkpointFailures = new Counter({ name: 'pgward_audit_checkpoint_failures_total', help: 'Audit checkpoints that could not be signed when due (each is tried again)', registers: [registry] });
  for (const outcome of ['appended', 'dropped', 'failed']) records.inc({ outcome }, 0);
  return {
    record: (outcome) => records.inc({ outcome }),
    gap(reason, count) {
      const label = { reason: GAP_REASONS.has(reason) ? reason : 'other' };
      gaps.inc(label);
      lost.inc(label, count);
    },
    checkpointFailed: () => checkpointFailures.inc(),
  };
}

/** The metrics every role exposes on /metrics. */
export function createMetrics(role: string) {
  const registry = new Registry();
  let lagSource: (() => Promise<Record<string, number>>) | undefined;
  registry.setDefaultLabels({ role });
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    /** For buildApp: every answered request and MCP tool call. */
    observe: servedMetrics(registry),
    /** For startIngest. */
    ingest: ingestMetrics(registry),
    appendedEvents: new Counter({
      name: 'pgward_event_store_appended_events_total',
      help: 'Events appended to the event store',
      registers: [registry],
    }),
    appendFailures: new Counter({
      name: 'pgward_event_store_append_failures_total',
      help: 'Appends refused or failed, by error code',
      labelNames: ['code'],
      registers: [registry],
    }),
    appendSeconds: new Histogram({
      name: 'pgward_event_store_append_seconds',
      help: 'Latency of one append (one batch)',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    projectionPosition: new Gauge({
      name: 'pgward_projection_position',
      help: 'Global position of the last event each projection applied',
      labelNames: ['projection'],
      registers: [registry],
    }),
    projectionLag: new Gauge({
      name: 'pgward_projection_lag_events',
      help: 'Events of each projection’s own streams beyond its checkpoint, read at scrape time',
      labelNames: ['projection'],
      registers: [registry],
      async collect() {
        if (!lagSource) return;
        for (const [projection, lag] of Object.entries(await lagSource())) this.set({ projection }, lag);
      },
    }),
    /** Where the lag gauge reads from at each scrape. */
    setLagSource(source: () => Promise<Record<string, number>>) {
      lagSource = source;
    },
    projectionErrors: new Counter({
      name: 'pgward_projection_errors_total',
      help: 'Batches a projection failed to apply (retried)',
      labelNames: ['projection'],
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'pgward_webhook_attempts_total',
      help: 'Webhook delivery attempts, by outcome: delivered, retrying, failed (given up after the retry horizon)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;

/** Wraps a store so every append is counted and timed; every other member passes through untouched. */
export function instrumentStore<S extends EventStore>(store: S, metrics: Metrics): S {
  const append: EventStore['append'] = async (stream, events, expected) => {
    const stop = metrics.appendSeconds.startTimer();
    try {
      const result = await store.append(stream, events, expected);
      metrics.appendedEvents.inc(events.length);
      return result;
    } catch (error) {
      metrics.appendFailures.inc({ code: (error as { code?: string }).code ?? 'UNKNOWN' });
      throw error;
    } finally {
      stop();
    }
  };
  return new Proxy(store, {
    get(target, property) {
      if (property === 'append') return append;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
