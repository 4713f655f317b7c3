import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Server } from 'node:net';
import type { SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { evolveCredential, type CredentialRow } from '../projections/credentials.js';
import { databaseIdOf, evolveDatabase, type DatabaseRow } from '../projections/databases.js';
import { evolvePolicy, type PolicyRow } from '../projections/policies.js';
import type { DecisionBus } from '../src/bus/port.js';
import type { Keyring } from '../src/crypto/seal.js';
import { encodeEvent } from '../src/events/envelope.js';
import { CredentialUsed } from '../src/events/credentials.js';
import type { EventStore } from '../src/store/port.js';
import { DecisionPublisher } from './decisions.js';
import { loadParser } from './policy/parser.js';
import { createProxyMetrics } from './metrics.js';
import { Session, SessionRegistry } from './session.js';
import { Upstreams } from './upstreams.js';
import { LiveView } from './views/live-view.js';

export interface ProxyOptions {
  readonly store: EventStore;
  readonly bus: DecisionBus;
  readonly keyring: Keyring;
  readonly logger: Logger;
  readonly metrics: Registry;
  readonly host: string;
  readonly port: number;
  readonly tls?: SecureContext;
  readonly region: string;
  readonly proxyId: string;
  readonly maxMessageBytes: number;
  readonly decisionBufferSize?: number;
  readonly upstreamConnectTimeoutMs?: number;
}

export interface RunningProxy {
  readonly port: number;
  stop(): Promise<void>;
}

/** CredentialUsed is written at most this often per credential (it feeds last_used_at). */
const USED_EVERY_MS = 60_000;

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
  const credentials = new LiveView<CredentialRow>(store, {
    streamPrefix: 'credential-',
    keyOf: (event) => event.stream.slice('credential-'.length),
    evolve: evolveCredential,
  });
  const databases = new LiveView<DatabaseRow>(store, { streamPrefix: 'project-', keyOf: databaseIdOf, evolve: evolveDatabase });
  const policies = new LiveView<PolicyRow>(store, { streamPrefix: 'policy-', keyOf: (event) => event.stream.slice('policy-'.length), evolve: evolvePolicy });
  await Promise.all([credentials.start(), databases.start(), policies.start()]);

  const bootEpoch = Math.floor(Date.now() / 1000);
  const decisions = new DecisionPublisher(options.bus, { proxyId: options.proxyId, bootEpoch }, options.decisionBufferSize ?? 10_000, (error) =>
    logger.warn({ err: error }, 'decision bus refused a record; retrying'),
  );
  const upstreams = new Upstreams(databases, options.keyring, { connectTimeoutMs: options.upstreamConnectTimeoutMs ?? 5_000, applicationName: 'pgward' });
  const registry = new SessionRegistry();

  credentials.onChange((credentialId, before, after) => {
    const reason =
      !after || after.status === 'revoked'
        ? 'the credential was revoked'
        : after.status === 'disabled'
          ? 'the credential was disabled'
          : before && after.secret_version !== before.secret_version
            ? 'the credential’s password was rotated'
            : undefined;
    if (reason) for (const session of registry.sessionsOf(credentialId)) session.terminate('auth_failed', reason);
  });

  const lastUsed = new Map<string, number>();
  const recordUse = (credentialId: string): void => {
    const now = Date.now();
    if (now - (lastUsed.get(credentialId) ?? 0) < USED_EVERY_MS) return;
    lastUsed.set(credentialId, now);
    const event = encodeEvent(CredentialUsed, { credential_id: credentialId, used_at: new Date(now).toISOString() }, { event_id: randomUUID(), correlation_id: `proxy:${options.proxyId}`, actor: `proxy:${options.proxyId}`, at: new Date(now).toISOString() });
    store.append(`credential-${credentialId}`, [event], 'exists').catch((error: unknown) => logger.warn({ err: error, credentialId }, 'could not record credential use'));
  };

  const context = {
    credentials,
    policies,
    upstreamFor: (databaseId: string, projectId: string, readOnly: boolean) => upstreams.for(databaseId, projectId, readOnly),
    decisions,
    registry,
    metrics,
    logger,
    identity: { proxyId: options.proxyId, bootEpoch, region: options.region },
    mockSecret: randomBytes(32),
    maxMessageBytes: options.maxMessageBytes,
    onLogin: recordUse,
    ...(options.tls ? { tls: options.tls } : {}),
  };

  const server: Server = createServer({ noDelay: true }, (socket) => new Session(socket, context));
  server.on('error', (error) => logger.error({ err: error }, 'proxy listener failed'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
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
    async stop() {
      clearInterval(statsTimer);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of registry.all()) session.close();
      });
      await decisions.close();
      await upstreams.close();
      await Promise.all([credentials.stop(), databases.stop(), policies.stop()]);
    },
  };
}
