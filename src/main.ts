import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { ANOMALY_WINDOWS } from '../projections/anomaly-windows.js';
import { projectionsFor } from '../projections/index.js';
import { startAnomalyRaiser } from './anomalies/raiser.js';
import { ANCHOR_KEY_NAME, auditKeysFrom, loadAnchor } from './audit/keys.js';
import type { AnchorKeyPair } from './crypto/checkpoint.js';
import { projectionStatus } from '../projections/maintenance.js';
import { ensureReadModels, runProjection, type RunningProjection } from '../projections/runner.js';
import { createMemoryBus } from './bus/memory.js';
import { createMemoryFanout, type Fanout } from './bus/fanout.js';
import { INGEST_DURABLE, type DecisionBus } from './bus/port.js';
import { instanceId, replicaSettings, tlsFiles, type Config } from './config.js';
import { listenOn } from './listen.js';
import { closeApp } from './http/close-app.js';
import { Budgets } from '../proxy/budgets.js';
import { startProxy } from '../proxy/server.js';
import { spentSince } from '../queries/budget-usage.js';
import { loadTls } from '../proxy/tls.js';
import { relayLinks, relayOptions } from '../proxy/relay/options.js';
import { DomainCertificates } from './domains/certificates.js';
import { controlPlane, loadKeyring } from './control-plane.js';
import { buildApp, type PartState } from './http/app.js';
import type { Logger } from './logger.js';
import { createMetrics, instrumentStore } from './metrics.js';
import { createPool } from './pg/pool.js';
import { openStateDatabase, type StateDatabase } from './state.js';
import type { Registry } from 'prom-client';
import { startSweeps } from './sweeps.js';
import { startIngest } from './ingest/ingest.js';
import { PreparedEntries } from './audit/prepared-entries.js';
import { CategoryFeeds } from './store/category-feeds.js';
import { AUDIT_STREAM_PREFIX } from '../projections/audit.js';
import type { EventStore } from './store/port.js';
import { createPostgresEventStore } from './store/postgres.js';
import { parseAllowedNetworks } from './webhooks/networks.js';
import { parseCidrList } from './net/cidr.js';
import { startWebhookDelivery } from './webhooks/service.js';

const SWEEP_INTERVAL_MS = 5_000;

/** Logs a key or certificate generated into the data directory: where it is, and what would replace it. */
export function generatedFile(logger: Logger, what: string, variable: string): (file: string) => void {
  return (file) => logger.info({ file }, `generated ${what} into the data directory (set ${variable} to use your own)`);
}

function auditDeps(config: Config, anchor: AnchorKeyPair) {
  return { keys: auditKeysFrom(config), anchorPublicKey: anchor.publicKey, signer: { keyId: ANCHOR_KEY_NAME, privateKey: anchor.privateKey } };
}

export interface Running {
  /** Where /healthz and /metrics (and the API, in the api role) answer; undefined when serving no HTTP. */
  readonly httpUrl: string | undefined;
  /** The proxy's port, when the proxy role runs. */
  readonly proxyPort: number | undefined;
  /** This process's metrics. */
  readonly metrics: Registry;
  /** The state of this process's parts, as /healthz reports them. */
  health(): Promise<Record<string, PartState>>;
  stop(): Promise<void>;
}

/** How a supervisor (src/workers/) composes one of its processes; `pgward serve --role ...` passes none. */
export interface ServeOptions {
  /** The state database the supervisor opened; else it is opened here (and closed at stop). */
  readonly state?: StateDatabase;
  /** The decision bus; else openBus(config) (and closed at stop). */
  readonly bus?: DecisionBus;
  /** The fan-out of cache invalidations (the supervisor's relay in a worker); else openFanout(config) (and closed at stop). */
  readonly fanout?: Fanout;
  /**
   * false: no HTTP listener (the supervisor's proxy; its metrics are served by the API worker). Else
   * the port (PGWARD_HTTP_PORT by default), and what /metrics and /healthz add to this process's own.
   */
  readonly http?: false | { readonly port?: number; readonly metrics?: (own: Registry) => Registry; readonly health?: () => Promise<Record<string, PartState>> };
}

// The EventStoreDB and NATS clients are loaded only when configured: the embedded default needs neither.
export async function openEventStore(config: Config, stateUrl: string): Promise<EventStore> {
  if (!config.EVENTSTORE_URL) return createPostgresEventStore(stateUrl);
  const { createEventStoreDbStore } = await import('./store/eventstoredb.js');
  return createEventStoreDbStore(config.EVENTSTORE_URL);
}

/** The fan-out result-cache invalidations cross processes on: NATS core pub/sub with NATS configured, else in-process. */
export async function openFanout(config: Config): Promise<Fanout> {
  if (!config.NATS_URL) return createMemoryFanout();
  const { connectNatsFanout } = await import('./bus/nats-fanout.js');
  return connectNatsFanout({ url: config.NATS_URL });
}

export async function openBus(config: Config): Promise<DecisionBus> {
  if (!config.NATS_URL) return createMemoryBus();
  const { connectNatsBus } = await import('./bus/nats.js');
  return connectNatsBus({ url: config.NATS_URL, stream: config.PGWARD_NATS_STREAM, subject: config.PGWARD_NATS_SUBJECT });
}

async function check(work: () => Promise<unknown>, detail?: string): Promise<PartState> {
  try {
    await work();
    return { ok: true, ...(detail ? { detail } : {}) };
  } catch (error) {
    return { ok: false, detail: (error as Error).message };
  }
}

export const Role = z.enum(['api', 'projector', 'proxy', 'ingest']);
export type Role = z.infer<typeof Role>;

/**
 * The composition root of `pgward serve`: the given roles in one process (all of them by default,
 * the embedded default). Every role serves /healthz and /metrics.
 */
export async function serve(config: Config, logger: Logger, roles: ReadonlySet<Role> = new Set(Role.options), options: ServeOptions = {}): Promise<Running> {
  const cleanup: (() => Promise<unknown>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const step of cleanup.reverse()) await step().catch((error: unknown) => logger.error({ err: error }, 'shutdown step failed'));
  };
  let proxyPort: number | undefined;
  let stopProxy: (() => Promise<void>) | undefined;
  try {
    const metrics = createMetrics(roles.size === Role.options.length ? 'serve' : [...roles].join('+'));
    const state = options.state ?? (await openStateDatabase(config, { reuseRunning: false, logger }));
    if (!options.state) {
      cleanup.push(() => state.close());
      logger.info({ state: state.source }, 'state database ready');
    }

    // What the roles need from the configuration is read before anything is written anywhere.
    const anchor = roles.has('ingest') || roles.has('api') ? await loadAnchor(config, generatedFile(logger, 'the audit anchor key', 'PGWARD_AUDIT_ANCHOR_KEY')) : undefined;
    const keyring = roles.has('proxy') || roles.has('api') ? await loadKeyring(config, state) : undefined;
    const tls = roles.has('proxy')
      ? await loadTls({ ...tlsFiles(config), hosts: [config.PGWARD_PUBLIC_HOST, config.PGWARD_LISTEN_HOST], onGenerated: (what) => logger.info({ set: 'PGWARD_TLS_CERT and PGWARD_TLS_KEY to use your own' }, what) })
      : undefined;
    // Both the proxy and the hosted MCP (api) open relay links to the databases of other regions.
    const links = roles.has('proxy') || roles.has('api') ? await relayLinks(config) : undefined;
    const relay = tls && links ? await relayOptions(config, links, tls) : undefined;

    const auditKeys = auditKeysFrom(config);
    // Ingest hands the entries it prepares for its checkpoints to the audit projection, when both run here.
    const preparedEntries = roles.has('ingest') && roles.has('projector') ? new PreparedEntries() : undefined;
    if (preparedEntries) metrics.setHandedOnSource(() => preparedEntries.taken);
    const projections = projectionsFor({ auditKeys, preparedEntries });
    // Every projection runner keeps one connection for its advisory lock; the other ten serve queries and batches.
    const pool = createPool(state.url, { max: 10 + projections.length, applicationName: 'pgward-serve' });
    cleanup.push(() => pool.end());
    const store = instrumentStore(await openEventStore(config, state.url), metrics);
    cleanup.push(() => store.close());
    // ...and the events it appends, so the projections of the audit streams need not read them back (dense positions only).
    const auditFeeds = preparedEntries && store.densePositions ? new CategoryFeeds(AUDIT_STREAM_PREFIX, store) : undefined;
    const bus = options.bus ?? (await openBus(config));
    if (!options.bus) cleanup.push(() => bus.close());
    const fanout = roles.has('proxy') || roles.has('api') ? (options.fanout ?? (await openFanout(config))) : undefined;
    if (fanout && !options.fanout) cleanup.push(() => fanout.close());

    // The anomaly raiser follows the detections of anomaly_windows, woken by each batch that projection commits here.
    const raiser = roles.has('projector') ? startAnomalyRaiser({ store, pool, logger: logger.child({ role: 'projector' }) }) : undefined;
    if (raiser) cleanup.push(() => raiser.stop());
    if (roles.has('projector')) await ensureReadModels(pool, projections);
    const runners: RunningProjection[] = (roles.has('projector') ? projections : []).map((projection) =>
      runProjection({
        store,
        pool,
        projection,
        readModelReady: true,
        feed: auditFeeds?.feedFor(projection.streamPrefixes),
        hooks: {
          onBatch: (name, _count, position) => {
            metrics.projectionPosition.set({ projection: name }, Number(position));
            if (name === ANOMALY_WINDOWS) raiser?.wake();
          },
          onError: (name, error) => {
            metrics.projectionErrors.inc({ projection: name });
            logger.error({ err: error, projection: name }, 'projection batch failed; retrying');
          },
        },
      }),
    );
    cleanup.push(() => Promise.all(runners.map((runner) => runner.stop())));

    let activeRunners = 0;
    for (const runner of runners) void runner.active.then(() => activeRunners++);
    // The lag is the projector's figure: read where it runs, never on a proxy's thread at each scrape.
    if (roles.has('projector')) metrics.setLagSource(async () => Object.fromEntries((await projectionStatus(store, pool, projections)).map((status) => [status.name, status.lag])));

    // Ingest starts before the proxy and stops after it, so decisions the proxy flushes at shutdown still reach the trail.
    if (roles.has('ingest')) {
      const ingest = await startIngest({
        store,
        bus,
        logger: logger.child({ role: 'ingest' }),
        observe: metrics.ingest,
        checkpoints: { every: config.PGWARD_AUDIT_CHECKPOINT_EVERY, keys: auditKeys, anchor: { keyId: ANCHOR_KEY_NAME, privateKey: anchor!.privateKey }, handOn: preparedEntries },
        feed: auditFeeds,
      });
      cleanup.push(() => ingest.stop());
    }

    // One tally for the wire and the hosted MCP of this process: an agent's budget is one budget whichever way it comes in.
    const budgets = new Budgets(
      (scope, day, month) => spentSince(pool, scope, day, month),
      (error, scope) => logger.warn({ err: error, scope }, 'could not read what a budget scope spent; its statements are refused until it can'),
    );
    if (roles.has('proxy')) {
      const proxy = await listenOn('PGWARD_PROXY_PORT', config.PGWARD_LISTEN_HOST, config.PGWARD_PROXY_PORT, () => startProxy({
        store,
        bus,
        auditBacklog: () => bus.backlog(INGEST_DURABLE),
        budgets,
        ...(fanout ? { cacheFanout: fanout } : {}),
        keyring: keyring!,
        logger: logger.child({ role: 'proxy' }),
        metrics: metrics.registry,
        host: config.PGWARD_LISTEN_HOST,
        port: config.PGWARD_PROXY_PORT,
        tls,
        ...(config.PGWARD_DOMAIN_CERT_DIR ? { domainCertificates: new DomainCertificates(config.PGWARD_DOMAIN_CERT_DIR, (domain, error) => logger.warn({ err: error, domain }, 'a custom domain’s certificate is unusable')) } : {}),
        region: config.PGWARD_REGION,
        ...(relay ? { relay } : {}),
        proxyId: instanceId(config),
        maxMessageBytes: config.PGWARD_MAX_MESSAGE_BYTES,
        loginTimeoutMs: config.PGWARD_LOGIN_TIMEOUT_MS,
        drainTimeoutMs: config.PGWARD_DRAIN_TIMEOUT_MS,
        ...(config.PGWARD_PROXY_PROTOCOL_TRUSTED ? { proxyProtocol: { trusted: parseCidrList(config.PGWARD_PROXY_PROTOCOL_TRUSTED) } } : {}),
        replicas: replicaSettings(config),
      }));
      let stopped: Promise<void> | undefined;
      stopProxy = () => (stopped ??= proxy.stop());
      cleanup.push(stopProxy);
      proxyPort = proxy.port;
    }

    if (roles.has('api')) {
      const sweeps = startSweeps({ store, pool, logger, intervalMs: SWEEP_INTERVAL_MS, audit: { bus, publisherId: instanceId(config) } });
      cleanup.push(() => sweeps.stop());
    }

    // Webhook delivery runs with the API (the api worker of `pgward serve`), never on the proxy's thread;
    // of several api processes, one delivers and the others wait on its lock.
    if (roles.has('api')) {
      const webhooks = startWebhookDelivery({
        store,
        pool,
        keyring: keyring!,
        logger: logger.child({ role: 'webhooks' }),
        allowed: parseAllowedNetworks(config.PGWARD_WEBHOOK_ALLOWED_NETWORKS),
        timeoutMs: config.PGWARD_WEBHOOK_TIMEOUT_MS,
        horizonMs: config.PGWARD_WEBHOOK_RETRY_HORIZON_SECONDS * 1000,
        observe: (outcome) => metrics.webhookAttempts.inc({ outcome }),
      });
      cleanup.push(() => webhooks.stop());
    }

    const health = async (): Promise<Record<string, PartState>> => ({
      read_models: await check(() => pool.query('select 1'), state.source),
      event_store: await check(() => store.headPosition(), store.kind),
      bus: { ok: true, detail: bus.kind },
      ...(proxyPort === undefined ? {} : { proxy: { ok: true, detail: `listening on ${config.PGWARD_LISTEN_HOST}:${proxyPort}` } }),
      ...(roles.has('projector')
        ? {
            projector:
              activeRunners === runners.length
                ? { ok: true, detail: `${runners.length} projections running` }
                : { ok: false, detail: `${activeRunners} of ${runners.length} projections running` },
          }
        : {}),
    });
    const http = options.http ?? {};
    if (http === false) return { httpUrl: undefined, proxyPort, metrics: metrics.registry, health, stop: stopAll };

    const app = await buildApp({
      ...(roles.has('api') ? { controlPlane: controlPlane(config, keyring!, store, pool, logger, projections, auditDeps(config, anchor!), bus, budgets, fanout, links) } : {}),
      logger,
      metrics: http.metrics ? http.metrics(metrics.registry) : metrics.registry,
      observe: metrics.observe,
      ...(config.PGWARD_HTTP_TRUSTED_PROXIES ? { trustProxy: parseCidrList(config.PGWARD_HTTP_TRUSTED_PROXIES).map((range) => range.text) } : {}),
      health: async () => ({ ...(await health()), ...(await http.health?.()) }),
    });
    // The HTTP server and the proxy drain together: neither takes new work once pgward is stopping.
    cleanup.push(() => Promise.all([closeApp(app, config.PGWARD_DRAIN_TIMEOUT_MS), stopProxy?.()]));
    const port = http.port ?? config.PGWARD_HTTP_PORT;
    await listenOn('PGWARD_HTTP_PORT', config.PGWARD_LISTEN_HOST, port, () => app.listen({ host: config.PGWARD_LISTEN_HOST, port }));
    const address = app.server.address() as AddressInfo;
    const httpUrl = `http://${config.PGWARD_LISTEN_HOST}:${address.port}`;
    return { httpUrl, proxyPort, metrics: metrics.registry, health, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
