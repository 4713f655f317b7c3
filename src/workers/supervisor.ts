/**
 * `pgward serve` without --role: the proxy in this process, everything else in worker processes it
 * supervises, so the proxy's event loop does proxy work only.
 *
 *   supervisor (this process): embedded PostgreSQL, the in-process decision bus, the proxy and its live views
 *   worker `pipeline`: ingest and the projections (ingest hands its prepared entries to the audit projection)
 *   worker `api`: REST, the management MCP, the hosted agent MCP, sweeps, webhook delivery; /healthz and /metrics of every process
 *
 * A worker that exits or stalls is started again with backoff (pgward_worker_restarts_total); the
 * proxy keeps serving meanwhile, its decisions waiting on the bus. SIGINT/SIGTERM/SIGHUP drain the
 * API and the proxy together (no new work; what is under way may finish within
 * PGWARD_DRAIN_TIMEOUT_MS; the proxy's last decisions reach the bus), then stop ingest and the
 * projections, then the bus, the embedded PostgreSQL last.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { loadAnchor } from '../audit/keys.js';
import { serveBusOver } from '../bus/channel.js';
import { createMemoryFanout } from '../bus/fanout.js';
import { serveFanoutOver } from '../bus/fanout-channel.js';
import type { Config } from '../config.js';
import { loadKeyring } from '../control-plane.js';
import type { PartState } from '../http/app.js';
import type { Logger } from '../logger.js';
import { ensureFree } from '../listen.js';
import { generatedFile, openBus, serve, type Running } from '../main.js';
import { openStateDatabase } from '../state.js';
import type { Channel } from './channel.js';
import { PIPELINE_NODE_OPTIONS, WorkerProcess, type WorkerOptions, type WorkerSpec } from './worker-process.js';
import type { MetricsJson } from './whole-registry.js';

/** How long the API worker waits for another process's metrics or health before leaving it out. */
const ASK_TIMEOUT_MS = 2_000;

export const WORKERS: readonly WorkerSpec[] = [
  { name: 'pipeline', roles: ['ingest', 'projector'], execArgv: PIPELINE_NODE_OPTIONS },
  { name: 'api', roles: ['api'] },
];

/** What a worker asks the supervisor for at start-up: the state database it opened. */
export interface StateAnswer {
  readonly url: string;
  readonly source: 'PGWARD_STATE_URL' | 'embedded (started)' | 'embedded (already running)';
}

export interface Supervised extends Running {
  /** The worker processes' ids by name, for tests and the benchmark; undefined while one restarts. */
  workerPids(): Record<string, number | undefined>;
}

export async function superviseServe(config: Config, logger: Logger, options: WorkerOptions = {}): Promise<Supervised> {
  const cleanup: (() => Promise<unknown>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const step of cleanup.reverse()) await step().catch((error: unknown) => logger.error({ err: error }, 'shutdown step failed'));
  };
  try {
    // A taken port ends the start before anything starts: found only once the workers ran, their stop had to wait for them.
    for (const [variable, port] of [['PGWARD_PROXY_PORT', config.PGWARD_PROXY_PORT], ['PGWARD_HTTP_PORT', config.PGWARD_HTTP_PORT]] as const) {
      await ensureFree(variable, config.PGWARD_LISTEN_HOST, port);
    }
    const state = await openStateDatabase(config, { reuseRunning: false, logger });
    cleanup.push(() => state.close());
    logger.info({ state: state.source }, 'state database ready');
    // The key files are created here, before two workers could race to create them.
    await loadAnchor(config, generatedFile(logger, 'the audit anchor key', 'PGWARD_AUDIT_ANCHOR_KEY'));
    await loadKeyring(config, state);

    const bus = await openBus(config);
    cleanup.push(() => bus.close());
    // Without NATS the supervisor relays cache invalidations between its proxy and the workers; with it, each connects itself.
    const fanout = config.NATS_URL ? undefined : createMemoryFanout();

    const registry = new Registry();
    registry.setDefaultLabels({ role: 'supervisor' });
    const restarts = new Counter({ name: 'pgward_worker_restarts_total', help: 'Worker processes started again after they exited or stalled', labelNames: ['worker'], registers: [registry] });
    const workers: WorkerProcess[] = [];
    new Gauge({
      name: 'pgward_worker_up',
      help: 'Whether each worker process is running and ready (1) or being restarted (0)',
      labelNames: ['worker'],
      registers: [registry],
      collect() {
        for (const worker of workers) this.set({ worker: worker.spec.name }, worker.live ? 1 : 0);
      },
    });
    for (const spec of WORKERS) restarts.inc({ worker: spec.name }, 0);

    let proxy: Running | undefined = undefined;
    const others = (asker: string) => workers.filter((worker) => worker.spec.name !== asker);
    const allMetrics = async (asker: string): Promise<MetricsJson[]> => {
      const remote = await Promise.all(others(asker).map((worker) => worker.live?.ask<MetricsJson>('metrics', undefined, ASK_TIMEOUT_MS).catch(() => undefined)));
      return [await registry.getMetricsAsJSON(), ...(proxy ? [await proxy.metrics.getMetricsAsJSON()] : []), ...remote.filter((m) => m !== undefined)];
    };
    const allHealth = async (asker: string): Promise<Record<string, PartState>> => {
      let parts: Record<string, PartState> = proxy ? await proxy.health() : { proxy: { ok: false, detail: 'the proxy is starting' } };
      for (const worker of others(asker)) {
        const remote = await worker.live?.ask<Record<string, PartState>>('health', undefined, ASK_TIMEOUT_MS).catch((error: unknown) => ({ [worker.spec.name]: { ok: false as const, detail: (error as Error).message } }));
        parts = { ...parts, ...(remote ?? { [worker.spec.name]: { ok: false, detail: `worker ${worker.spec.name} is restarting` } }) };
      }
      return parts;
    };

    const bridges = new Map<Channel, { detach(): Promise<void> }>();
    const relays = new Map<Channel, { detach(): void }>();
    const hooks = {
      attach(channel: Channel) {
        channel.answer('state', (): StateAnswer => ({ url: state.url, source: state.source }));
        channel.answer<string>('all.metrics', allMetrics);
        channel.answer<string>('all.health', allHealth);
        // With NATS configured, workers connect to it themselves.
        if (!config.NATS_URL) bridges.set(channel, serveBusOver(bus, channel));
        if (fanout) relays.set(channel, serveFanoutOver(fanout, channel));
      },
      async detach(channel: Channel) {
        relays.get(channel)?.detach();
        relays.delete(channel);
        const bridge = bridges.get(channel);
        bridges.delete(channel);
        if (bridge) await bridge.detach();
        else channel.close('the worker exited');
      },
      onRestart(name: string) {
        restarts.inc({ worker: name });
      },
    };
    for (const spec of WORKERS) workers.push(new WorkerProcess(spec, logger, hooks, options));
    const [pipeline, api] = workers as [WorkerProcess, WorkerProcess];
    // Ingest and the projections start before the proxy and stop after it; the API starts last, so
    // its /healthz answers 200 only once everything runs.
    cleanup.push(() => pipeline.stop());
    await pipeline.start();
    proxy = await serve(config, logger, new Set(['proxy']), { state, bus, ...(fanout ? { fanout } : {}), http: false });
    // The API and the proxy drain together: neither takes new work once pgward is stopping.
    cleanup.push(() => Promise.all([api.stop(), proxy!.stop()]));
    await api.start();

    return {
      httpUrl: api.httpUrl,
      proxyPort: proxy.proxyPort,
      metrics: registry,
      health: () => allHealth(''),
      stop: stopAll,
      workerPids: () => Object.fromEntries(workers.map((worker) => [worker.spec.name, worker.live ? worker.pid : undefined])),
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
