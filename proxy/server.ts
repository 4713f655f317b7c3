import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import type { SecureContext } from 'node:tls';
import type { DomainCertificates } from '../src/domains/certificates.js';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { disableForHoneytoken } from '../commands/credentials/disable-for-honeytoken.js';
import type { CredentialRow } from '../projections/credentials.js';
import type { Plan } from '../src/events/organizations.js';
import { plans } from '../src/plans.js';
import type { ConsumerBacklog, DecisionSink } from '../src/bus/port.js';
import type { Keyring } from '../src/crypto/seal.js';
import { encodeEvent } from '../src/events/envelope.js';
import { CredentialUsed } from '../src/events/credentials.js';
import type { ProxyStore } from '../src/store/port.js';
import { estimateOnPool } from './approval-estimate.js';
import { lostToRestart, onRequest } from './approval-hold.js';
import { Budgets, sessionBudgets, type SpentSource } from './budgets.js';
import { DecisionPublisher } from './decisions.js';
import { LiveHoneytokens } from './honeytokens.js';
import { HashKeys } from './hash-keys.js';
import { loadParser } from './policy/parser.js';
import { createProxyMetrics } from './metrics.js';
import { cacheMetricsOf, purgeOnRequest, ResultCaches } from './cache/caches.js';
import type { Fanout } from '../src/bus/fanout.js';
import { Inlet } from './inlet.js';
import { endRefusedSessions } from './ip-rules.js';
import { throughProxyProtocol, type ProxyProtocolOptions } from './proxy-protocol-gate.js';
import { SessionRegistry } from './session-registry.js';
import { Session } from './session.js';
import { Upstreams, type UpstreamHandle } from './upstreams.js';
import { logEvent } from '../src/log-events.js';
import { CATALOG_TIMING, CatalogSnapshots } from './upstream/catalog-snapshot.js';
import { UpstreamError } from './upstream/connection.js';
import { classifyUpstreamFailure, failureLogFields } from './upstream/failure.js';
import { upstreamChoice } from './views/policy-roles.js';
import { sandboxBranchOf } from './sandbox.js';
import { proxyViews } from './views/proxy-views.js';
import { DEFAULT_HEALTH_THRESHOLDS, type HealthThresholds } from './replica-health.js';
import { RecentWrites } from './recent-writes.js';
import { ReplicaMonitor } from './replica-monitor.js';
import { endSessionsOnClose, type Admission } from './admission.js';
import { AuditBackPressure, type BackPressureLimits } from './audit-backpressure.js';
import { DEFAULT_READ_YOUR_WRITES_MS } from './replica-routing.js';
import type { LinkPeer } from './relay/link.js';
import { startRelayListener, type RunningRelayListener } from './relay/listener.js';
import { relayOrigin } from './relay/options.js';
import { relayTargets } from './relay/targets.js';
import { listenOn } from '../src/listen.js';

export interface ProxyOptions {
  readonly store: ProxyStore;
  readonly bus: DecisionSink;
  readonly keyring: Keyring;
  readonly logger: Logger;
  readonly metrics: Registry;
  readonly host: string;
  readonly port: number;
  readonly tls?: SecureContext;
  /** Custom domains' certificates, served by SNI (PGWARD_DOMAIN_CERT_DIR, docs/domains.md). */
  readonly domainCertificates?: Pick<DomainCertificates, 'sniCallback'>;
  readonly region: string;
  readonly proxyId: string;
  readonly maxMessageBytes: number;
  /** How long a client may take from connecting to a completed login (PGWARD_LOGIN_TIMEOUT_MS). */
  readonly loginTimeoutMs: number;
  /** How long stop() lets statements under way finish before it ends their sessions (PGWARD_DRAIN_TIMEOUT_MS); 0 by default. */
  readonly drainTimeoutMs?: number;
  readonly decisionBufferSize?: number;
  readonly upstreamConnectTimeoutMs?: number;
  /** What a budget scope spent this period according to the audit trail; without it budgets count from the proxy's start. */
  readonly spent?: SpentSource;
  /** The process's budget tallies, shared with its hosted MCP so that both count against one figure; else the proxy keeps its own, from `spent`. */
  readonly budgets?: Budgets;
  /** Whether this proxy may serve agents at all (an enrolled data plane whose token was revoked may not): proxy/admission.ts. */
  readonly admission?: Admission;
  /**
   * Ingest's backlog on the bus (its durable consumer's), for the audit's back-pressure
   * (audit-backpressure.ts); without it the proxy never waits for ingest.
   */
  readonly auditBacklog?: () => Promise<ConsumerBacklog | undefined>;
  readonly auditBackPressureLimits?: BackPressureLimits;
  /** How often the backlog is asked while the proxy makes decisions (50 ms unless given). */
  readonly auditBackPressureIntervalMs?: number;
  /** Read replicas' health probes and read routing (docs/replicas.md); defaults otherwise. */
  readonly replicas?: Partial<ReplicaOptions>;
  /** Accept PROXY protocol v2 headers from these peers (PGWARD_PROXY_PROTOCOL_TRUSTED); without it no header is parsed. */
  readonly proxyProtocol?: ProxyProtocolOptions;
  /** Where result-cache invalidations are shared with the other processes' caches (the hosted MCP's, other proxies'): docs/cache.md. */
  readonly cacheFanout?: Fanout;
  /** Relay links to and from the data planes of other regions (docs/regions.md); without it a database of another region is refused (region.no_peer). */
  readonly relay?: RelayOptions;
  /** The application_name of this proxy's upstream connections; `pgward` by default. */
  readonly upstreamApplicationName?: string;
}

export interface RelayOptions {
  /** PGWARD_REGION_PEERS, CA files read. */
  readonly peers: ReadonlyMap<string, LinkPeer>;
  /** PGWARD_RELAY_SECRET then PGWARD_RELAY_SECRET_PREVIOUS: the origin signs with the first, the peer accepts either. */
  readonly secrets: readonly Buffer[];
  /** PGWARD_RELAY_PORT and the relay certificate: this proxy accepts links as the peer of its region. */
  readonly listen?: { readonly host: string; readonly port: number; readonly tls: SecureContext };
}

export interface ReplicaOptions {
  /** How often each replica of an auto_read_routing database is probed (PGWARD_REPLICA_CHECK_MS). */
  readonly checkIntervalMs: number;
  readonly thresholds: HealthThresholds;
  /** How long after a statement that may write a session's reads stay on the primary (PGWARD_READ_YOUR_WRITES_MS). */
  readonly readYourWritesMs: number;
}

export interface RunningProxy {
  readonly port: number;
  /** The relay listener's port, when it listens. */
  readonly relayPort?: number;
  stop(): Promise<void>;
}

/** CredentialUsed is written at most this often per credential (it feeds last_used_at). */
const USED_EVERY_MS = 60_000;
/** How often a draining proxy looks for sessions whose statement ended. */
const DRAIN_POLL_MS = 50;

/** Ends each session once it has no statement under way; at `deadline` (ms since the epoch) the rest too. */
async function drainSessions(registry: SessionRegistry, deadline: number, logger: Logger): Promise<void> {
  for (;;) {
    const busy = registry.all().filter((session) => !session.endForShutdown(false));
    if (busy.length === 0) return;
    if (Date.now() >= deadline) {
      logger.warn({ sessions: busy.length }, 'ended sessions still running a statement at the drain deadline');
      for (const session of busy) session.endForShutdown(true);
      return;
    }
    await delay(DRAIN_POLL_MS);
  }
}

/**
 * The proxy role: a TCP listener speaking the PostgreSQL protocol, in-memory views of credentials
 * and databases fed by the event store, pools of upstream connections, and the decision publisher.
 * Credentials that are disabled, revoked or rotated end their live sessions as soon as the event
 * arrives.
 */
export async function startProxy(options: ProxyOptions): Promise<RunningProxy> {
  const { store, logger } = options;
  await loadParser();
  const metrics = createProxyMetrics(options.metrics);
  const { credentials, databases, replicas, policies, honeytokens: honeytokenRows, policyRoles, projects, organizations, approvals, ipRules, branches, cacheControls, all: views } = proxyViews(store);
  await Promise.all(views.map((view) => view.start()));

  const bootEpoch = Math.floor(Date.now() / 1000);
  const decisions = new DecisionPublisher(options.bus, { proxyId: options.proxyId, bootEpoch }, options.decisionBufferSize ?? 10_000, (error) =>
    logger.warn({ err: error }, 'decision bus refused a record; retrying'),
  );
  // Wire sessions of an earlier run of this proxy are gone: the statements they held end failed, never run.
  for (const lost of lostToRestart(approvals.values(), { proxyId: options.proxyId, bootEpoch })) {
    void onRequest({ store }, lost.approvalId, { kind: 'fail', sqlstate: '57P01', message: lost.message }, `proxy:${options.proxyId}`).catch((error: unknown) =>
      logger.warn({ err: error, approval: lost.approvalId }, 'could not record a held statement lost to a restart'),
    );
  }
  const connectTimeoutMs = options.upstreamConnectTimeoutMs ?? 5_000;
  const upstreams = new Upstreams(databases, options.keyring, {
    connectTimeoutMs,
    applicationName: options.upstreamApplicationName ?? 'pgward',
    logger,
    relay: relayOrigin(options.region, options.proxyId, options.relay),
  });
  const replicaOptions = { checkIntervalMs: 2_000, thresholds: DEFAULT_HEALTH_THRESHOLDS, readYourWritesMs: DEFAULT_READ_YOUR_WRITES_MS, ...options.replicas };
  const monitor = new ReplicaMonitor(replicas, databases, {
    intervalMs: replicaOptions.checkIntervalMs,
    thresholds: replicaOptions.thresholds,
    connectTimeoutMs: options.upstreamConnectTimeoutMs ?? 5_000,
    // Probed as the database's registered user, in a read-only transaction.
    targetOf: (database, replica) => upstreams.replicaTarget(database, replica, true),
    metrics,
    logger,
    region: options.region,
  });
  monitor.start();
  const registry = new SessionRegistry();
  const auditBackPressure = options.auditBacklog
    ? new AuditBackPressure(
        options.auditBacklog,
        {
          changed: (change, held) => {
            if (change === 'engaged') metrics.auditBackPressureEngaged.inc();
            if (change !== 'released') logger.info({ change, credentials: held.credentials, everyone: held.everyone }, 'ingest is behind: holding the clients of the credentials that cause it');
            for (const session of registry.all()) {
              try {
                session.followAuditHold();
              } catch (error) {
                logger.error({ err: error, session: session.id }, 'a session could not follow the audit hold');
              }
            }
          },
          sampled: (oldestAgeMs, holding) => {
            metrics.auditLag.set((oldestAgeMs ?? 0) / 1000);
            metrics.auditBackPressure.set(holding ? 1 : 0);
          },
          failed: (error) => logger.error({ err: error }, 'a sample of the audit back-pressure failed; sampling goes on'),
        },
        options.auditBackPressureLimits,
        options.auditBackPressureIntervalMs,
      )
    : undefined;
  auditBackPressure?.start();
  const catalogs = new CatalogSnapshots(CATALOG_TIMING, (databaseId, error) =>
    // An upstream error's message already holds its cause's: logged as classified, not as an error chain that repeats it.
    logger.warn({ database: databaseId, ...(error instanceof UpstreamError ? failureLogFields(classifyUpstreamFailure(error)) : { err: error }) }, 'could not read the upstream catalog; its statements are refused once the last snapshot is too old'),
  );

  credentials.onChange((credentialId, before, after) => {
    const reason =
      !after || after.status === 'revoked'
        ? 'the credential was revoked'
        : after.status === 'disabled'
          ? 'the credential was disabled'
          : before && after.secret_version !== before.secret_version
            ? 'the credential’s password was rotated'
            : undefined;
    if (!reason) return;
    const sessions = [...registry.sessionsOf(credentialId)];
    for (const session of sessions) session.terminate('auth_failed', reason);
    if (sessions.length > 0) logEvent(logger, 'sessions_closed', { credential_id: credentialId, project_id: after?.project_id ?? before?.project_id ?? null, sessions: sessions.length, reason }, 'closed the live sessions of a credential that may no longer be used');
  });

  endRefusedSessions({ ipRules, credentials }, (credentialId) => registry.sessionsOf(credentialId), logger);

  const lastUsed = new Map<string, number>();
  const recordUse = (credentialId: string): void => {
    const now = Date.now();
    if (now - (lastUsed.get(credentialId) ?? 0) < USED_EVERY_MS) return;
    lastUsed.set(credentialId, now);
    const event = encodeEvent(CredentialUsed, { credential_id: credentialId, used_at: new Date(now).toISOString() }, { event_id: randomUUID(), correlation_id: `proxy:${options.proxyId}`, actor: `proxy:${options.proxyId}`, at: new Date(now).toISOString() });
    store.append(`credential-${credentialId}`, [event], 'exists').catch((error: unknown) => logger.warn({ err: error, credentialId }, 'could not record credential use'));
  };

  // A tripped honeytoken that says so disables the credential; the credential view then ends its sessions.
  const honeytokens = new LiveHoneytokens(honeytokenRows, (credential, honeytoken) => {
    disableForHoneytoken(store, credential.credential_id, honeytoken.honeytoken_id, `proxy:${options.proxyId}`).catch((error: unknown) =>
      logger.warn({ err: error, credentialId: credential.credential_id, honeytokenId: honeytoken.honeytoken_id }, 'could not disable a credential that tripped a honeytoken'),
    );
  });

  const budgets = sessionBudgets(
    options.budgets ?? new Budgets(options.spent, (error, scope) => logger.warn({ err: error, scope }, 'could not read what a budget scope spent; its statements are refused until it can')),
    (projectId) => {
      const orgId = projects.get(projectId)?.org_id;
      const org = orgId === undefined ? undefined : organizations.get(orgId);
      return org ? { id: org.org_id, plan: org.plan, terms: plans[org.plan as Plan] } : undefined;
    },
  );

  const hashKeys = new HashKeys(store, options.keyring, `proxy:${options.proxyId}`);
  // A policy that starts masking with hash: its project's key is read before its sessions' next statements need it.
  policies.onChange((_, __, after) => void hashKeys.forPolicy(after, (error) => logger.warn({ err: error, project_id: after?.project_id }, 'could not read a project’s hash key')));

  const upstreamFor = (credential: CredentialRow): Promise<UpstreamHandle | undefined> => {
    const policy = policies.get(credential.policy_profile_id);
    const choice = upstreamChoice(policy, policyRoles.get(credential.policy_profile_id), credential.database_id);
    return upstreams.for(credential.database_id, credential.project_id, choice.readOnly, choice.role, sandboxBranchOf(policy, branches.values(), credential.database_id));
  };
  const resultCaches = new ResultCaches((databaseId: string) => databases.get(databaseId)?.cache_config, cacheMetricsOf(metrics));
  purgeOnRequest(cacheControls, resultCaches);
  const recentWrites = new RecentWrites(replicaOptions.readYourWritesMs);
  // The fan-out's notes of writes made elsewhere (the hosted MCP, other proxies) open their credentials' windows here too.
  const unshare = options.cacheFanout && resultCaches.share(options.cacheFanout, (credentialId) => recentWrites.wrote(credentialId));
  const context = {
    credentials,
    budgets,
    policies,
    honeytokens,
    hashKeys,
    // A read-only policy provisioned on the credential's database runs as its own upstream role.
    upstreamFor,
    readRouting: { routes: (databaseId: string) => monitor.routes(databaseId), next: (databaseId: string) => monitor.next(databaseId), writes: recentWrites, metrics },
    catalogs,
    decisions,
    registry,
    metrics,
    logger,
    identity: { proxyId: options.proxyId, bootEpoch, region: options.region },
    mockSecret: randomBytes(32),
    maxMessageBytes: options.maxMessageBytes,
    loginTimeoutMs: options.loginTimeoutMs,
    onLogin: recordUse,
    approvals: { store, approvals, estimate: estimateOnPool },
    resultCaches,
    cacheControls,
    ipRules,
    ...(options.admission ? { admission: options.admission } : {}),
    ...(auditBackPressure ? { auditBackPressure } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.tls && options.domainCertificates ? { sni: options.domainCertificates.sniCallback } : {}),
  };

  if (options.admission) endSessionsOnClose(options.admission, registry, logger);

  // Paused on connect: the session reads the client through an inlet (Inlet.accept), never through the stream.
  const { proxyProtocol } = options;
  const server: Server = createServer({ noDelay: true, pauseOnConnect: true }, (socket) =>
    proxyProtocol
      ? throughProxyProtocol(Inlet.accept(socket), { proxyProtocol, loginTimeoutMs: options.loginTimeoutMs, logger, metrics }, (inlet, clientAddress) => new Session(inlet, context, clientAddress))
      : new Session(Inlet.accept(socket), context),
  );
  let relayListener: RunningRelayListener | undefined;
  const stopParts = async (): Promise<void> => {
    await relayListener?.stop();
    monitor.stop();
    auditBackPressure?.stop();
    await decisions.close();
    catalogs.close();
    await upstreams.close();
    await Promise.all(views.map((view) => view.stop()));
  };
  const relayListen = options.relay?.listen;
  try {
    if (relayListen) {
      relayListener = await listenOn('PGWARD_RELAY_PORT', relayListen.host, relayListen.port, () =>
        startRelayListener({
          ...relayListen,
          region: options.region,
          secrets: options.relay!.secrets,
          handshakeTimeoutMs: connectTimeoutMs,
          resolve: relayTargets(upstreams, { policyRoles, branches }),
          readFrom: (primary) => {
            const databaseId = primary.database.database_id;
            const replica = monitor.routes(databaseId) ? monitor.next(databaseId) : undefined;
            return replica ? primary.onReplica(replica) : undefined;
          },
          metrics,
          logger,
        }),
      );
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
  } catch (error) {
    await stopParts();
    throw error;
  }
  server.on('error', (error) => logger.error({ err: error }, 'proxy listener failed'));
  const statsTimer = setInterval(() => {
    const stats = decisions.stats();
    metrics.decisionBuffer.set(stats.depth);
    metrics.decisionDrops.set(stats.dropped);
    for (const pool of upstreams.stats()) {
      metrics.poolConnections.set({ database: pool.database, state: 'idle' }, pool.idle);
      metrics.poolConnections.set({ database: pool.database, state: 'in_use' }, pool.inUse);
      metrics.poolConnections.set({ database: pool.database, state: 'waiting' }, pool.waiting);
    }
  }, 1_000).unref();

  return {
    port: (server.address() as AddressInfo).port,
    ...(relayListener ? { relayPort: relayListener.port } : {}),
    async stop() {
      clearInterval(statsTimer);
      const drainMs = options.drainTimeoutMs ?? 0;
      if (drainMs > 0) logger.info({ sessions: registry.all().length, drain_timeout_ms: drainMs }, 'proxy draining: no new connections, statements under way may finish');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      await drainSessions(registry, Date.now() + drainMs, logger);
      await closed;
      unshare?.();
      await stopParts();
    },
  };
}
