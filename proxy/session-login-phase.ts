import type { CredentialRow } from '../projections/credentials.js';
import type { AuditEventKind } from '../src/events/audit.js';
import { logEvent } from '../src/log-events.js';
import { encodeAuthenticationSasl, type ErrorFields } from './protocol/backend.js';
import { ProtocolViolation } from './protocol/errors.js';
import type { FrontendMessage, StartupMessage } from './protocol/frontend.js';
import { masksWithHash } from './policy/hash-key.js';
import { addressRefusal, IP_RULES_RULE } from './ip-rules.js';
import type { SessionAudit } from './session-audit.js';
import { ADMISSION_RULE, admissionRefusal } from './admission.js';
import { AUTH_FAILED, ScramExchange, unusable } from './session-login.js';
import type { SessionContext } from './session-host.js';
import type { CatalogLease } from './upstream/catalog-snapshot.js';
import type { UpstreamConnection } from './upstream/connection.js';
import { classifyUpstreamFailure, upstreamRule } from './upstream/failure.js';
import { noConnection, type UpstreamHandle } from './upstreams.js';

/** What a completed login hands its session: from then on the session owns all of it. */
export interface CompletedLogin {
  readonly credential: CredentialRow;
  readonly handle: UpstreamHandle;
  readonly catalog: CatalogLease;
  readonly server: UpstreamConnection;
  /** The SCRAM server-final message, sent with the rest of the login's reply. */
  readonly serverFinal: string;
}

/** What the login phase needs of its session. */
export interface LoginHost {
  readonly id: string;
  readonly context: SessionContext;
  readonly audit: SessionAudit;
  /** Where the client connects from, as the project's IP rules see it. */
  readonly clientAddress: string;
  /** Asked after every wait: the client may have gone meanwhile. */
  closed(): boolean;
  /** Writes to the client's socket (plain, or TLS once the client asked for it). */
  write(bytes: Buffer): void;
  fatal(fields: ErrorFields): void;
  loggedIn(login: CompletedLogin): void;
}

/**
 * The login of a connection as a state machine: the StartupMessage names the user, a SCRAM-SHA-256
 * exchange proves the password (against a stable fake verifier for unknown users, so they fail
 * only at the proof), then the credential's database, its catalog and a first upstream connection
 * are taken. Every refusal is audited and answered FATAL; a client that stalls is cut off after
 * the context's login timeout. What the phase holds while it waits (the catalog lease) it gives
 * back when the session closes before the login completed.
 */
export class LoginPhase {
  private state: 'startup' | 'sasl-initial' | 'sasl-final' | 'connecting' | 'done' = 'startup';
  private startupMessage: StartupMessage | undefined;
  private scram: ScramExchange | undefined;
  /** The credential the StartupMessage's user names, once looked up. */
  credential: CredentialRow | undefined;
  /** Leased while the login takes an upstream connection; the session's once the login completes. */
  private catalog: CatalogLease | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly host: LoginHost) {
    this.timer = setTimeout(() => this.timedOut(), host.context.loginTimeoutMs).unref();
  }

  /** Whether the client's next message answers the SASL exchange. */
  get exchanging(): boolean {
    return this.state === 'sasl-initial' || this.state === 'sasl-final';
  }

  async startup(startup: StartupMessage): Promise<void> {
    this.startupMessage = startup;
    const user = startup.parameters.get('user') ?? '';
    this.credential = user ? await this.host.context.credentials.getOrRead(user, `credential-${user}`) : undefined;
    if (this.host.closed()) return;
    this.scram = new ScramExchange(this.credential, user, this.host.context.mockSecret);
    this.host.write(encodeAuthenticationSasl(['SCRAM-SHA-256']));
    this.state = 'sasl-initial';
  }

  respond(message: FrontendMessage): Promise<void> | void {
    if (message.kind !== 'AuthResponse') return this.host.fatal({ severity: 'FATAL', code: '08P01', message: 'expected a SASL response' });
    try {
      if (this.state === 'sasl-initial') {
        const first = this.scram!.first(message.body);
        if (!first) return this.refuse('auth_failed', 'unsupported SASL mechanism');
        this.state = 'sasl-final';
        this.host.write(first);
        return;
      }
      const serverFinal = this.scram!.final(message.body);
      // Refused whatever the proof, with the answer a wrong password gets: a refused address learns nothing, not even whether the password was right.
      const addressRefused = this.credential && addressRefusal(this.host.context.ipRules, this.credential, this.host.clientAddress);
      if (addressRefused) return this.refuse('auth_failed', addressRefused, { rule: IP_RULES_RULE });
      if (serverFinal === undefined) return this.refuse('auth_failed', 'wrong password or unknown user');
      this.state = 'connecting';
      return this.connect(serverFinal);
    } catch (error) {
      if (error instanceof ProtocolViolation) return this.host.fatal({ severity: 'FATAL', code: error.code, message: error.message });
      return this.refuse('auth_failed', (error as Error).message);
    }
  }

  /** The session closed: what the login still holds goes back. */
  abandon(): void {
    clearTimeout(this.timer);
    this.catalog?.release();
    this.catalog = undefined;
  }

  private async connect(serverFinal: string): Promise<void> {
    const { context } = this.host;
    const credential = this.credential;
    if (!credential) return this.refuse('auth_failed', 'unknown user');
    const refusal = unusable(credential);
    if (refusal) return this.refuse(refusal.event, refusal.reason);
    const closedBy = context.admission?.closedBy();
    if (closedBy) return this.refuse('auth_failed', closedBy, { rule: ADMISSION_RULE, reply: admissionRefusal(closedBy) });
    await context.budgets.prepare(credential);
    const handle = await context.upstreamFor(credential);
    if (this.host.closed()) return;
    const requested = this.startupMessage?.parameters.get('database') ?? credential.pg_username;
    if (!handle || requested !== handle.database.name) return this.refuse('auth_failed', `database ${requested} is not the credential's database`);
    // Read first at the database's first login; a failed read refuses statements (catalog.unavailable), not the login.
    const catalog = await context.catalogs.lease(handle);
    if (this.host.closed()) return catalog.release();
    this.catalog = catalog;
    // The project's hash key is read (or made) before the first statement needs it; failing that, hash-masked statements are refused until it is at hand.
    if (masksWithHash(context.policies.get(credential.policy_profile_id))) {
      await context.hashKeys.load(credential.project_id).catch((error: unknown) => context.logger.warn({ err: error, session: this.host.id }, 'could not read the project’s hash key; statements a hash mask applies to are refused until it is at hand'));
      if (this.host.closed()) return;
    }
    let server: UpstreamConnection;
    try {
      server = await handle.pool.acquire({ owner: credential.credential_id });
    } catch (error) {
      const failure = classifyUpstreamFailure(error);
      return this.refuse('auth_failed', failure.message, { rule: upstreamRule(failure), reply: noConnection(failure, 'FATAL', context.metrics) });
    }
    // The client left while the login waited: the connection goes back, not to a session nobody will close again.
    if (this.host.closed()) return void handle.pool.release(server, { reset: false });
    clearTimeout(this.timer);
    this.catalog = undefined;
    this.state = 'done';
    this.host.loggedIn({ credential, handle, catalog, server, serverFinal });
  }

  /** Refuses the login, audited under `rule` (auth.<event> by default), answering `reply` (28P01 by default). */
  private refuse(event: AuditEventKind, why: string, options: { rule?: string; reply?: ErrorFields } = {}): void {
    const { context } = this.host;
    context.metrics.logins.inc({ outcome: event });
    context.metrics.refused.inc();
    const rule = options.rule ?? `auth.${event}`;
    const projectId = this.credential?.project_id ?? context.fallbackProjectId;
    if (projectId) {
      this.host.audit.publish(this.credential, { event, projectId, sql: '', kind: '', rule, reason: why, rows: 0, bytes: 0, latencyUs: null, ts: new Date().toISOString() });
    }
    const who = { session: this.host.id, source: 'wire', credential_id: this.credential?.credential_id ?? null, project_id: projectId ?? null, rule, reason: why };
    if (event === 'credential_expired') logEvent(context.logger, 'credential_expired', { ...who, during: 'login' }, 'login refused: the credential expired');
    else logEvent(context.logger, 'login_refused', who, 'login refused');
    this.host.fatal(options.reply ?? AUTH_FAILED);
  }

  private timedOut(): void {
    if (this.state === 'done' || this.host.closed()) return;
    const { context } = this.host;
    context.metrics.logins.inc({ outcome: 'timeout' });
    context.metrics.refused.inc();
    context.logger.info({ session: this.host.id, state: this.state }, 'login timed out');
    this.host.fatal({ severity: 'FATAL', code: '57014', message: `canceling authentication due to timeout: the login did not complete within ${context.loginTimeoutMs / 1000} s` });
  }
}
