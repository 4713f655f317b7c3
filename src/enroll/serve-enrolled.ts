import type { AddressInfo } from 'node:net';
import { Admission } from '../../proxy/admission.js';
import { startProxy } from '../../proxy/server.js';
import { loadTls } from '../../proxy/tls.js';
import { instanceId, tlsFiles, type Config } from '../config.js';
import { buildApp, type PartState } from '../http/app.js';
import { closeApp } from '../http/close-app.js';
import { listenOn } from '../listen.js';
import type { Logger } from '../logger.js';
import type { Running } from '../main.js';
import { createMetrics } from '../metrics.js';
import { ChannelClient, ChannelEnded, ChannelRequestFailed } from './channel-client.js';
import { RemoteBus } from './remote-bus.js';
import { RemoteEventStore } from './remote-store.js';
import { dataPlaneKeyring, enrolledProxyId } from './token.js';
import { EnrollmentInfo } from './wire.js';

export interface Enrollment {
  readonly token: string;
  readonly controlPlane: URL;
}

/**
 * `pgward serve --role proxy --enroll <token> --control-plane <url>`: a data plane in the
 * customer's network (docs/self-host.md). The proxy is the one `pgward serve --role proxy` runs;
 * only its two ports differ: its event store and its decision bus are the channel to the control
 * plane, and its keyring is derived from the token. No state database, no bus of its own.
 */
export async function serveEnrolled(config: Config, logger: Logger, enrollment: Enrollment): Promise<Running> {
  const log = logger.child({ role: 'data-plane' });
  const client = new ChannelClient(enrollment.controlPlane, enrollment.token, log);
  const info = EnrollmentInfo.parse(await client.json('GET', '/v1/data-plane/enrollment').catch((error: unknown) => {
    if (error instanceof ChannelRequestFailed || error instanceof ChannelEnded) throw error;
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`cannot reach the control plane at ${enrollment.controlPlane.origin}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  }));
  log.info({ enrollment_id: info.enrollment_id, project_id: info.project_id, control_plane: enrollment.controlPlane.origin }, 'enrolled with the control plane');

  const admission = new Admission();
  client.onEnd((end) => admission.close(`its enrollment token was ${end.reason} (${end.detail})`));
  const metrics = createMetrics('proxy');
  const tls = await loadTls({ ...tlsFiles(config), hosts: [config.PGWARD_PUBLIC_HOST, config.PGWARD_LISTEN_HOST], onGenerated: (what) => log.info({ set: 'PGWARD_TLS_CERT and PGWARD_TLS_KEY to use your own' }, what) });
  const bus = new RemoteBus(client, info.max_message_bytes);
  const proxy = await listenOn('PGWARD_PROXY_PORT', config.PGWARD_LISTEN_HOST, config.PGWARD_PROXY_PORT, () =>
    startProxy({
      store: new RemoteEventStore(client),
      bus,
      // The control plane's ingest is behind: this proxy holds its heaviest agents as the control plane's own proxies do.
      auditBacklog: () => bus.auditBacklog(),
      // Asked over HTTP of a control plane that serves many data planes: five times a second, not twenty.
      auditBackPressureIntervalMs: 200,
      keyring: dataPlaneKeyring(enrollment.token),
      logger: log,
      metrics: metrics.registry,
      host: config.PGWARD_LISTEN_HOST,
      port: config.PGWARD_PROXY_PORT,
      tls,
      region: config.PGWARD_REGION,
      proxyId: enrolledProxyId(info.enrollment_id, instanceId(config)),
      maxMessageBytes: config.PGWARD_MAX_MESSAGE_BYTES,
      loginTimeoutMs: config.PGWARD_LOGIN_TIMEOUT_MS,
      drainTimeoutMs: config.PGWARD_DRAIN_TIMEOUT_MS,
      admission,
      replicas: {
        checkIntervalMs: config.PGWARD_REPLICA_CHECK_MS,
        thresholds: { failuresToEject: config.PGWARD_REPLICA_FAILURES, successesToRestore: config.PGWARD_REPLICA_SUCCESSES, maxLagMs: config.PGWARD_REPLICA_MAX_LAG_MS },
        readYourWritesMs: config.PGWARD_READ_YOUR_WRITES_MS,
      },
    }),
  );
  const health = async (): Promise<Record<string, PartState>> => {
    const closedBy = admission.closedBy();
    return {
      proxy: { ok: true, detail: `listening on ${config.PGWARD_LISTEN_HOST}:${proxy.port}` },
      control_plane: closedBy ? { ok: false, detail: `refusing agents: ${closedBy}` } : { ok: true, detail: `enrolled as ${info.enrollment_id} (project ${info.project_id}) with ${enrollment.controlPlane.origin}` },
    };
  };
  const app = await buildApp({
    logger,
    metrics: metrics.registry,
    observe: metrics.observe,
    health,
  });
  try {
    await listenOn('PGWARD_HTTP_PORT', config.PGWARD_LISTEN_HOST, config.PGWARD_HTTP_PORT, () => app.listen({ host: config.PGWARD_LISTEN_HOST, port: config.PGWARD_HTTP_PORT }));
  } catch (error) {
    await proxy.stop();
    throw error;
  }
  const httpUrl = `http://${config.PGWARD_LISTEN_HOST}:${(app.server.address() as AddressInfo).port}`;
  return {
    httpUrl,
    proxyPort: proxy.port,
    metrics: metrics.registry,
    health,
    async stop() {
      await Promise.all([closeApp(app, config.PGWARD_DRAIN_TIMEOUT_MS), proxy.stop()]);
    },
  };
}
