import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { EventStore } from './store/port.js';

/** The metrics every role exposes on /metrics. */
export function createMetrics(role: string) {
  const registry = new Registry();
  let lagSource: (() => Promise<Record<string, number>>) | undefined;
  registry.setDefaultLabels({ role });
  collectDefaultMetrics({ register: registry });
  return {
    registry,
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
