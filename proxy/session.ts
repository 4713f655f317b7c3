import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { CredentialRow } from '../projections/credentials.js';
import type { AuditEventKind } from '../src/events/audit.js';
import { logEvent } from '../src/log-events.js';
import { Inlet, type Receiver } from './inlet.js';
import { ResponsePipeline } from './pipeline.js';
import { masksColumns, sessionValuesOf } from './policy/hook.js';
import type { SessionValues } from './policy/row-filters.js';
import { PortalRows } from './portal-rows.js';
import { preparedStatements } from './prepared.js';
import { encodeErrorResponse, encodeGssEncResponse, encodeReadyForQuery, encodeSslResponse, type ErrorFields, type TransactionStatus } from './protocol/backend.js';
import { ProtocolViolation } from './protocol/errors.js';
import { decodeFrontendMessage, FrontendFramer, type FrontendFrame, type FrontendMessage } from './protocol/frontend.js';
import { SessionReads } from './replica-routing.js';
import { UpstreamAccess } from './session-acquire.js';
import { SessionAudit } from './session-audit.js';
import { ExtendedProtocol } from './session-extended.js';
import { SessionFlow } from './session-flow.js';
import { GuardedWrites } from './session-guarded.js';
import { SessionHolds } from './session-holds.js';
import { SimpleQuery } from './session-simple.js';
import type { Protocol, ServerExpectation, SessionContext, SessionHost } from './session-host.js';
import { loginReply } from './session-login.js';
import { LoginPhase, type CompletedLogin } from './session-login-phase.js';
import { SessionStatements } from './session-statements.js';
import { UpstreamHold } from './session-upstream.js';
import { agentErrorEdit, StatementDeadline, statementTimeoutMs } from './statement-deadline.js';
import { StatementGate } from './statement-gate.js';
import { SessionResults } from './cache/session-results.js';
import type { CatalogLease } from './upstream/catalog-snapshot.js';
import type { UpstreamConnection } from './upstream/connection.js';
import { normalAddress } from '../src/net/cidr.js';

/** TCP keepalive on client connections: a peer that vanished without a FIN is found and its session closed. */
const CLIENT_KEEPALIVE_MS = 60_000;

let sessionCounter = 0;

/**
 * What a client may send while one of its messages waits (for an upstream connection, say) before
 * its socket is no longer read. Below it the socket is not paused and resumed around each wait: a
 * client that waits for its answer sends nothing meanwhile, and pausing would cost two calls into
 * the event loop per wait.
 */
const AWAIT_BUFFER_BYTES = 1024 * 1024;

/**
 * One client connection: startup (TLS, GSSENC, cancel), SCRAM-SHA-256 against the credential's
 * verifier, then statements forwarded to a pooled upstream connection. In transaction pooling the
 * upstream is returned to the pool whenever the client is idle outside a transaction; a client
 * that prepares named statements or changes session state keeps its upstream (pinned) so that
 * state stays where its statements run. The session is the state machine and its wiring: the
 * login (session-login-phase.ts), simple queries (session-simple.ts) and the extended protocol
 * (session-extended.ts) are modules of their own, as are the policy gate, connection acquiring,
 * guarded writes and approval holds they share (docs/architecture.md lists them).
 */
export class Session implements SessionHost {
  readonly id: string;
  /** The client's address: the socket's peer, or what a trusted proxy's PROXY header said (proxy/proxy-protocol-gate.ts). */
  readonly clientAddress: string;
  /** The client's socket and its reader: plain, or TLS once the client asked for it. */
  private client: Inlet;
  private socket: Socket;
  private readonly framer: FrontendFramer;
  private readonly processId: number;
  /** When the client connected: its connection is recorded as opened then (docs/http-api.md, connection_seconds). */
  private readonly connectedAt = new Date().toISOString();
  private readonly secretKey = randomBytes(4);
  private state: 'login' | 'ready' | 'closed' = 'login';
  /** Whether the audit's back-pressure holds this client's reading (followAuditHold). */
  private heldForAudit = false;
  /** Until the login completes (session-login-phase.ts). */
  private login: LoginPhase | undefined;
  private busy = false;
  private expiresAtMs = Number.POSITIVE_INFINITY;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** A message is being handled asynchronously (waiting for an upstream connection, say): what the client sends meanwhile waits in the framer. */
  private awaiting = false;
  private heldWhileAwaiting = false;
  // What follows is the statement modules' view of the session (SessionHost, session-host.ts).
  credential: CredentialRow | undefined;
  sessionValues: SessionValues | undefined;
  catalog: CatalogLease | undefined;
  schemaChanged = false;
  pinned = false;
  unsynced = false;
  skipUntilSync = false;
  undoAtSync = false;
  status: TransactionStatus = 'I';
  /** The upstream pool and the connection this session holds, if any. */
  readonly upstream: UpstreamHold;
  readonly pipeline: ResponsePipeline;
  /** The client's prepared statements and portals. */
  readonly statements = new SessionStatements();
  /** Rows each portal and cursor has handed the client while a row cap applies. */
  readonly portalRows = new PortalRows();
  readonly audit: SessionAudit;
  readonly flow = new SessionFlow({ client: () => this.client, server: () => this.upstream.server, closed: () => this.closed });
  private readonly deadline = new StatementDeadline({
    expired: (limitMs) => {
      this.context.logger.info({ session: this.id, limitMs }, 'statement timeout: cancelling upstream');
      void this.cancelRunningQuery();
    },
    stuck: (limitMs) =>
      this.fatal({ severity: 'FATAL', code: '57014', message: `terminating the session: a statement ran past this credential’s statement timeout (${limitMs} ms) and did not stop when cancelled; read results as they arrive, or narrow the query` }),
  });
  private readonly gate: StatementGate;
  private readonly reads: SessionReads;
  private readonly results: SessionResults;
  private readonly access: UpstreamAccess;
  private readonly guarded: GuardedWrites;
  private readonly extended: ExtendedProtocol;
  private readonly holds: SessionHolds;
  private readonly simple: SimpleQuery;

  constructor(
    client: Inlet,
    readonly context: SessionContext,
    peer?: string,
  ) {
    this.id = `${context.identity.proxyId}.${context.identity.bootEpoch}.${++sessionCounter}`;
    this.client = client;
    this.socket = client.socket;
    this.upstream = new UpstreamHold(this.serverReceiver, this.statements);
    this.clientAddress = normalAddress(peer ?? client.socket.remoteAddress ?? '');
    this.audit = new SessionAudit(context, this.id, this.clientAddress);
    this.framer = new FrontendFramer({ maxMessageBytes: context.maxMessageBytes });
    this.pipeline = new ResponsePipeline(
      (pieces) => this.flow.writeClient(pieces),
      {
        completed: (statement) => this.audit.completed(this.credential!, statement, this.deadline.cancelledAtMs),
        prepareFailed: (name) => {
          if (this.upstream.server) preparedStatements(this.upstream.server).delete(name);
        },
        ready: (status) => {
          this.status = status;
          // A write's answer waits until its invalidation left the process: the agent's next read elsewhere misses.
          const flushed = this.results.cache.ready(status);
          if (flushed) this.flow.deferClient(flushed);
          this.reads.ready();
          if (status === 'I' && this.schemaChanged) {
            this.schemaChanged = false;
            this.catalog?.changed();
          }
        },
        seesReadyFirst: () => this.results.cache.invalidatesAtReady,
      },
      // Asked only when a server chunk carries an error.
      () => agentErrorEdit(masksColumns(this.context.policies.get(this.credential?.policy_profile_id ?? '')), this.deadline.cancelledAtMs),
    );
    this.reads = new SessionReads(context.readRouting, () => this.credential?.credential_id);
    this.results = new SessionResults(this);
    this.gate = new StatementGate(this, this.reads, this.results);
    this.access = new UpstreamAccess(this, this.reads);
    this.guarded = new GuardedWrites(this, this.gate, this.access);
    this.holds = new SessionHolds(this, this.gate, this.access);
    this.extended = new ExtendedProtocol(this, this.gate, this.access, this.guarded, this.results, this.holds);
    this.simple = new SimpleQuery(this, this.gate, this.guarded, this.holds, this.results);
    this.processId = context.registry.add(this);
    context.metrics.connections.inc();
    context.metrics.connectionsTotal.inc();
    this.login = new LoginPhase({
      id: this.id,
      context,
      audit: this.audit,
      clientAddress: this.clientAddress,
      closed: () => this.closed,
      write: (bytes) => void this.socket.write(bytes),
      fatal: (fields) => this.fatal(fields),
      loggedIn: (login) => this.loggedIn(login),
    });
    this.attach(client);
    this.followAuditHold();
  }

  /** Read through a getter: the state changes across awaits, which narrowing cannot see. */
  get closed(): boolean {
    return this.state === 'closed';
  }

  private attach(client: Inlet): void {
    this.client = client;
    this.socket = client.socket;
    client.socket.setNoDelay(true);
    client.socket.setKeepAlive(true, CLIENT_KEEPALIVE_MS);
    client.receive(this.clientReceiver);
    this.flow.adopt(client);
  }

  /**
   * The audit's back-pressure (audit-backpressure.ts): a logged-in client whose credential it holds
   * is not read, and what it sent already is not handled, while ingest catches up. A login (or a
   * cancel request) is read, as it runs no statement, unless its address's refused logins are what
   * ingest is behind on.
   */
  followAuditHold(): void {
    const hold = this.context.auditBackPressure;
    if (!hold || this.state === 'closed') return;
    // Not logged in yet: held only while this address's refused logins flood.
    const held = this.state === 'ready' ? hold.holds(this.credential?.credential_id) : hold.holdsAddress(this.clientAddress);
    if (held === this.heldForAudit) return;
    this.heldForAudit = held;
    if (held) return this.flow.holdReading();
    this.flow.releaseReading();
    if (!this.busy) void this.drain();
  }

  private readonly clientReceiver: Receiver = {
    bytes: (chunk) => this.onData(chunk),
    ended: () => this.close(),
  };

  private onData(chunk: Buffer): void {
    this.framer.push(chunk);
    if (!this.busy) void this.drain();
    else if (this.awaiting && !this.heldWhileAwaiting && this.framer.bufferedBytes > AWAIT_BUFFER_BYTES) {
      this.heldWhileAwaiting = true;
      this.flow.holdReading();
    }
  }

  private async drain(): Promise<void> {
    this.busy = true;
    try {
      for (;;) {
        // Held for the audit: the messages already read (pipelined, up to the framer's bound) wait too.
        if (this.state === 'closed' || this.heldForAudit) return;
        let frame: FrontendFrame | undefined;
        try {
          frame = this.framer.next();
        } catch (error) {
          if (error instanceof ProtocolViolation) return this.fatal({ severity: 'FATAL', code: error.code, message: error.message });
          throw error;
        }
        if (!frame) return;
        const pending = this.handle(frame);
        if (pending) {
          // What is already forwarded goes now: the wait may be long, and what it waits for may need it.
          this.flow.flush();
          this.awaiting = true;
          await pending;
          this.awaiting = false;
          if (this.heldWhileAwaiting) {
            this.heldWhileAwaiting = false;
            this.flow.releaseReading();
          }
        }
      }
    } catch (error) {
      // A frame whose body does not decode (a query string with bytes after its terminator, say).
      if (error instanceof ProtocolViolation) return this.fatal({ severity: 'FATAL', code: error.code, message: error.message });
      this.context.logger.error({ err: error, session: this.id }, 'session failed');
      this.fatal({ severity: 'FATAL', code: 'XX000', message: 'internal error in the gateway; the connection is closed' });
    } finally {
      this.busy = false;
      this.flow.flush();
    }
  }

  private handle(frame: FrontendFrame): Promise<void> | void {
    if (frame.kind === 'SSLRequest') return this.startTls();
    if (frame.kind === 'GSSENCRequest') return void this.socket.write(encodeGssEncResponse(false));
    if (frame.kind === 'CancelRequest') return this.cancelOther(frame.processId, frame.secretKey);
    if (frame.kind === 'StartupMessage') {
      return this.login ? this.login.startup(frame) : this.fatal({ severity: 'FATAL', code: '08P01', message: 'unexpected startup message after authentication' });
    }
    const message = frame.type === 'P' ? this.statements.decodeParse(frame) : decodeFrontendMessage(frame);
    if (this.state === 'ready') return this.onMessage(message);
    if (this.login?.exchanging) return this.login.respond(message);
    return this.fatal({ severity: 'FATAL', code: '08P01', message: `unexpected message ${frame.type} before authentication` });
  }

  private startTls(): void {
    if (!this.context.tls || this.socket instanceof TLSSocket) return void this.socket.write(encodeSslResponse(false));
    if (this.framer.bufferedBytes > 0) return this.fatal({ severity: 'FATAL', code: '08P01', message: 'received unencrypted data after SSL request' });
    this.socket.write(encodeSslResponse(true));
    const plain = this.client;
    plain.receive(undefined);
    this.attach(Inlet.over(new TLSSocket(plain.socket, { isServer: true, secureContext: this.context.tls, ...(this.context.sni ? { SNICallback: this.context.sni } : {}) })));
  }

  private async cancelOther(processId: number, secretKey: Buffer): Promise<void> {
    const target = this.context.registry.session(processId);
    if (target && target.matchesKey(secretKey)) await target.cancelRunningQuery();
    this.close();
  }

  matchesKey(secretKey: Buffer): boolean {
    return secretKey.length === this.secretKey.length && secretKey.equals(this.secretKey);
  }

  async cancelRunningQuery(): Promise<void> {
    this.holds.end('cancel');
    const server = this.upstream.server;
    const handle = this.upstream.handle;
    if (server && handle && this.pipeline.awaitingServer) await handle.cancel(server);
  }

  /** The login completed: the session takes its credential, upstream and catalog, and answers the client. */
  private loggedIn({ credential, handle, catalog, server, serverFinal }: CompletedLogin): void {
    this.login = undefined;
    this.credential = credential;
    this.sessionValues = sessionValuesOf(credential);
    this.upstream.handle = handle;
    this.catalog = catalog;
    this.useServer(server);
    this.audit.loggedIn(credential, this.connectedAt);
    this.context.registry.bind(this, credential.credential_id);
    this.expiresAtMs = credential.expires_at ? Date.parse(credential.expires_at) : Number.POSITIVE_INFINITY;
    this.context.onLogin?.(credential.credential_id);
    this.scheduleExpiry(credential);
    this.state = 'ready';
    this.followAuditHold();
    this.context.metrics.logins.inc({ outcome: 'ok' });
    this.socket.write(loginReply(serverFinal, server.parameters, this.processId, this.secretKey));
    this.releaseIfIdle();
  }

  private scheduleExpiry(credential: CredentialRow): void {
    if (!credential.expires_at) return;
    const delay = Date.parse(credential.expires_at) - Date.now();
    // setTimeout caps at 2^31-1 ms; a later expiry is caught by the per-statement check.
    if (delay < 2 ** 31 - 1) this.expiryTimer = setTimeout(() => this.terminate('credential_expired', 'the credential expired'), Math.max(0, delay)).unref();
  }

  /** Ends the session because its credential may no longer be used (kill-switch, revocation, rotation, expiry). */
  terminate(event: AuditEventKind, reason: string): void {
    if (this.state === 'closed') return;
    if (this.credential && event === 'credential_expired') {
      this.audit.publish(this.credential, { event, projectId: this.credential.project_id, sql: '', kind: '', rule: 'credential.expired', reason, rows: 0, bytes: 0, latencyUs: null, ts: new Date().toISOString() });
      logEvent(this.context.logger, 'credential_expired', { session: this.id, source: 'wire', credential_id: this.credential.credential_id, project_id: this.credential.project_id, rule: 'credential.expired', reason, during: 'session' }, 'session ended: the credential expired');
    }
    this.fatal({ severity: 'FATAL', code: '57P01', message: `terminating connection: ${reason}` });
  }

  useServer(server: UpstreamConnection): void {
    this.upstream.use(server);
    this.flow.tookUp(server);
  }

  private readonly serverReceiver: Receiver = {
    bytes: (chunk) => this.onServerData(chunk),
    ended: () => this.onServerClosed(),
  };

  private onServerClosed(): void {
    if (this.state === 'closed') return;
    if (this.upstream.parked) return this.upstream.dropParked();
    // Gone, or broken: the pool drops it and frees its place (it would count it in use for ever).
    const server = this.upstream.detach();
    if (server) this.upstream.handle!.pool.destroy(server);
    this.pipeline.abandon();
    this.fatal({ severity: 'FATAL', code: '08006', message: 'the connection to the upstream database was lost during the query' });
  }

  private onServerData(chunk: Buffer): void {
    if (this.state === 'closed') return;
    // A parked connection owes nothing: whatever it sends (a termination notice, most likely) means it is gone.
    if (this.upstream.parked) return this.upstream.dropParked();
    this.context.metrics.bytesOut.inc(chunk.length);
    let scanned;
    try {
      scanned = this.upstream.scanner!.scan(chunk);
    } catch {
      return this.onServerClosed();
    }
    this.pipeline.onServerChunk(chunk, scanned, this.upstream.scanner!.inErrorResponse);
    if (this.deadline.running && !this.pipeline.awaitingServer) this.deadline.stop();
    this.releaseIfIdle();
  }

  /**
   * In transaction pooling, hands the upstream back when nothing is pending and no transaction is
   * open: parked (kept attached until another session needs it), or released when others wait.
   */
  releaseIfIdle(): void {
    if (this.upstream.parked || this.pinned || this.status !== 'I' || this.unsynced || !this.pipeline.empty) return;
    this.upstream.handBack();
  }

  forward(raw: Buffer): void {
    this.upstream.unpark();
    this.flow.forward(this.upstream.server!.socket, raw, this.busy);
  }

  private onMessage(message: FrontendMessage): Promise<void> | void {
    // Disable, revoke and rotation end the session when their events arrive; expiry is checked here, before every message.
    if (Date.now() >= this.expiresAtMs) return this.terminate('credential_expired', 'the credential expired');
    if (this.skipUntilSync && message.kind !== 'Sync' && message.kind !== 'Terminate') return;
    switch (message.kind) {
      case 'Query':
        return this.simple.query(message.sql, message.raw);
      case 'Parse':
        return this.extended.parse(message);
      case 'Bind':
        return this.extended.bind(message);
      case 'Describe':
        return this.extended.describe(message);
      case 'Execute':
        return this.extended.execute(message);
      case 'Close':
        return this.extended.close(message);
      case 'Sync':
        return this.extended.sync(message.raw);
      // A parked connection has nothing in flight: a Flush asks it for nothing, and PostgreSQL ignores copy
      // messages outside COPY. Taking it up for them would keep it from the pool until the next statement ends.
      case 'Flush':
        return this.upstream.server && !this.upstream.parked ? this.forward(message.raw) : undefined;
      case 'CopyData':
      case 'CopyDone':
      case 'CopyFail':
        return this.upstream.server && !this.upstream.parked ? this.forward(message.raw) : undefined;
      case 'Terminate':
        // What the client sent before it is sent on (PostgreSQL runs every message before a Terminate); a
        // connection with anything in flight is then dropped by close, never handed on.
        this.flow.flush();
        return this.close();
      case 'FunctionCall':
        return this.refuse({ severity: 'ERROR', code: '0A000', message: 'the fastpath function call protocol is not supported by the gateway; call the function in a query' }, 'simple');
      case 'AuthResponse':
        return this.fatal({ severity: 'FATAL', code: '08P01', message: 'unexpected password message after authentication' });
    }
  }

  /** Answers a request with an error in order; in the extended protocol the rest of the batch is then skipped until Sync. */
  refuse(error: ErrorFields, protocol: Protocol): void {
    const bytes = encodeErrorResponse(error);
    if (protocol === 'simple') this.pipeline.expect({ kind: 'synthetic', reply: () => Buffer.concat([bytes, encodeReadyForQuery(this.status)]) });
    else {
      this.skipUntilSync = true;
      this.pipeline.expect({ kind: 'synthetic', reply: bytes });
    }
  }

  send(raw: Buffer, expectation: ServerExpectation): void {
    if (expectation.prepares) preparedStatements(this.upstream.server!).add(expectation.prepares);
    if (expectation.statement) {
      const handle = this.upstream.handle!;
      expectation.statement.replicaId = handle.replicaId ?? this.upstream.server!.peerReplicaId;
      expectation.statement.relayedTo = handle.relayedTo;
    }
    // Every field present, so each expectation has one shape.
    this.pipeline.expect({ kind: 'server', ends: expectation.ends, suppress: expectation.suppress ?? false, statement: expectation.statement, prepares: expectation.prepares, rewrite: expectation.rewrite, tap: expectation.tap });
    if (!this.deadline.running) this.deadline.start(statementTimeoutMs(this.context.policies.get(this.credential!.policy_profile_id), this.upstream.handle!.database.query_timeout_ms));
    this.forward(raw);
  }

  toServer(raw: Buffer, expectation: ServerExpectation): Promise<void> | void {
    if (!expectation.synced && expectation.ends !== 'Z') this.unsynced = true;
    // Query and Sync are owed a ReadyForQuery; any other message belongs to an extended-protocol batch.
    return this.access.withServer(() => this.send(raw, expectation), expectation.ends === 'Z' ? 'simple' : 'extended', () => expectation.statement);
  }

  private fatal(fields: ErrorFields): void {
    if (this.state === 'closed') return;
    if (!this.socket.destroyed) this.socket.end(encodeErrorResponse(fields));
    this.close();
  }

  /** Nothing is under way: no statement awaits its reply, and no transaction is open. */
  private get idle(): boolean {
    return this.status === 'I' && !this.unsynced && this.pipeline.empty;
  }

  /**
   * At shutdown: ends the session with 57P01, unless it is logged in and a statement or transaction
   * of it is under way and `force` is false. True when it ended.
   */
  endForShutdown(force: boolean): boolean {
    if (!force && this.state === 'ready' && (this.busy || !this.idle)) return false;
    this.fatal({ severity: 'FATAL', code: '57P01', message: 'terminating connection: pgward is shutting down' });
    return true;
  }

  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.holds.end('closed');
    clearTimeout(this.expiryTimer);
    this.login?.abandon();
    this.catalog?.release();
    this.deadline.close();
    this.context.metrics.connections.dec();
    this.context.registry.remove(this, this.processId, this.credential?.credential_id);
    this.audit.ended();
    const idle = this.idle;
    const working = this.pipeline.awaitingServer;
    // Statements sent upstream whose end the session will not see are audited now (as when the upstream is lost): they may have run.
    this.pipeline.abandon();
    // Nothing more goes upstream: the connection is about to belong to the pool again, or to nobody.
    this.flow.discardOutgoing();
    this.upstream.end(idle, this.pinned, working);
    if (!this.socket.destroyed) this.socket.destroy();
  }
}
