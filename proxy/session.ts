import { randomBytes, randomInt } from 'node:crypto';
import { serialize } from 'pg-protocol';
import type { Socket } from 'node:net';
import { TLSSocket, type SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import type { AuditEventKind } from '../src/events/audit.js';
import type { SessionBudgets } from './budgets.js';
import type { DecisionPublisher } from './decisions.js';
import type { ProxyMetrics } from './metrics.js';
import { masksColumns, sessionValuesOf, statementKind, type Honeytokens, type StatementDecision } from './policy/hook.js';
import type { SessionValues } from './policy/row-filters.js';
import { decideWithCatalog, type CatalogLease, type CatalogSnapshots } from './upstream/catalog-snapshot.js';
import {
  encodeCloseComplete,
  encodeCommandComplete,
  encodeErrorResponse,
  encodeGssEncResponse,
  encodeParseComplete,
  encodeReadyForQuery,
  encodeSslResponse,
  type ErrorFields,
  type TransactionStatus,
} from './protocol/backend.js';
import { ProtocolViolation } from './protocol/errors.js';
import { encodeQuery, renameBindStatement, renameTarget, withRowLimit } from './protocol/rename.js';
import { capRewrite, cappedQuery, executedUnderCap, onReply } from './row-cap.js';
import { PortalRows } from './portal-rows.js';
import { DRIVER_METADATA } from './policy/catalog.js';
import { ResponsePipeline, type Rewrite, type Statement } from './pipeline.js';
import { forgetPrepared, preparedStatements } from './prepared.js';
import { decodeFrontendMessage, FrontendFramer, type Bind, type FrontendFrame, type FrontendMessage } from './protocol/frontend.js';
import { cancelAbandoned } from './upstream/cancel.js';
import type { UpstreamConnection } from './upstream/connection.js';
import { Inlet, type Receiver } from './inlet.js';
import { SessionFlow } from './session-flow.js';
import { noConnection, type UpstreamHandle } from './upstreams.js';
import { classifyUpstreamFailure, upstreamFailure, upstreamRule, type UpstreamFailure } from './upstream/failure.js';
import { logEvent } from '../src/log-events.js';
import type { SessionRegistry } from './session-registry.js';
import { agentErrorEdit, StatementDeadline, statementTimeoutMs } from './statement-deadline.js';
import { SessionAudit, statementOf, type Allowed, type StatementRefusal } from './session-audit.js';
import { parseToRun, policyChanged, SessionStatements } from './session-statements.js';
import { loginReply } from './session-login.js';
import { LoginPhase, type CompletedLogin } from './session-login-phase.js';
import { UpstreamHold } from './session-upstream.js';
import { SessionReads, type ReadRouting } from './replica-routing.js';
import { errorsHidden, FLUSH, guardedReplies, guardedSimpleEnd, guardedSimpleWrite, settledOf, simpleEndReplies, undoneSync, type GuardedOutcome } from './guarded-write.js';
import { rollbackInTransaction, writeGuardOf, type WriteGuard } from './policy/write-guard.js';
import type { LiveView } from './views/live-view.js';
import { boundParams, type BoundParams } from './approval-extended.js';
import { holdFor, type ApprovalServices, type Hold } from './approval-hold.js';
import { holdOnWire } from './approval-wire.js';
import type { HashKeys } from './hash-keys.js';
import type { HashKey } from './policy/hash-key.js';

/** What every session shares: the views, the upstream pools, the decision publisher, the proxy's identity. */
export interface SessionContext {
  readonly credentials: LiveView<CredentialRow>;
  readonly policies: LiveView<PolicyRow>;
  readonly upstreamFor: (credential: CredentialRow) => Promise<UpstreamHandle | undefined>;
  /** Reads of auto_read_routing databases go to their healthy replicas (replica-routing.ts). */
  readonly readRouting?: ReadRouting;
  /** The upstream catalog snapshots every decision is made on. */
  readonly catalogs: CatalogSnapshots;
  readonly honeytokens: Honeytokens;
  /** Each project's key for `hash` masks. */
  readonly hashKeys: HashKeys;
  readonly budgets: SessionBudgets;
  readonly decisions: DecisionPublisher;
  readonly registry: SessionRegistry;
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
  readonly identity: { readonly proxyId: string; readonly bootEpoch: number; readonly region: string };
  /** Seeds the stable fake SCRAM salts of unknown users. */
  readonly mockSecret: Buffer;
  readonly tls?: SecureContext;
  readonly maxMessageBytes: number;
  /** How long a client may take from connecting to a completed login (PostgreSQL's authentication_timeout). */
  readonly loginTimeoutMs: number;
  /** The project a refused connection that resolved no credential is audited under. */
  readonly fallbackProjectId?: string;
  /** Called after every successful login (feeds last_used_at). */
  readonly onLogin?: (credentialId: string) => void;
  /** Where held statements are recorded and their decisions followed; without it a held statement is refused. */
  readonly approvals?: ApprovalServices;
}

/** Ends an extended batch upstream (holdExecute). */
const SYNC = serialize.sync();

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
 * state stays where its statements run.
 */
export class Session {
  readonly id: string;
  /** The client's socket and its reader: plain, or TLS once the client asked for it. */
  private client: Inlet;
  private socket: Socket;
  private readonly framer: FrontendFramer;
  private readonly processId = randomInt(1, 2 ** 31 - 1);
  private readonly secretKey = randomBytes(4);
  private state: 'login' | 'ready' | 'closed' = 'login';
  /** Until the login completes (session-login-phase.ts). */
  private login: LoginPhase | undefined;
  private busy = false;
  private credential: CredentialRow | undefined;
  /** What the credential's row filters may name (`pgward.credential_id()`), set at login. */
  private sessionValues: SessionValues | undefined;
  private catalog: CatalogLease | undefined;
  /** DDL was sent: the catalog is read again once the session is out of its transaction. */
  private schemaChanged = false;
  /** The upstream pool and the connection this session holds, if any. */
  private readonly upstream: UpstreamHold;
  private readonly reads: SessionReads;
  private pinned = false;
  private expiresAtMs = Number.POSITIVE_INFINITY;
  private unsynced = false;
  /** After the proxy refused a message of an extended-protocol batch, the rest is dropped until Sync, as PostgreSQL does. */
  private skipUntilSync = false;
  /** A guarded write of this extended batch must be undone: its transaction is failed before the batch's Sync. */
  private undoAtSync = false;
  private status: TransactionStatus = 'I';
  private readonly pipeline: ResponsePipeline;
  /** The client's prepared statements and portals. */
  private readonly statements = new SessionStatements();
  /** Rows each portal and cursor has handed the client while a row cap applies. */
  private readonly portalRows = new PortalRows();
  private expiryTimer: NodeJS.Timeout | undefined;
  private readonly audit: SessionAudit;
  /** Ends the wait of a statement held for approval: the client cancelled it, or the session or its policy changed. */
  private holdWait: AbortController | undefined;
  /** The Binds of portals whose statement the approval rules hold: its Execute is held, bound to their parameters. */
  private readonly heldBinds = new Map<string, Bind>();
  /** A message is being handled asynchronously (waiting for an upstream connection, say): what the client sends meanwhile waits in the framer. */
  private awaiting = false;
  private heldWhileAwaiting = false;
  private readonly flow = new SessionFlow({ client: () => this.client, server: () => this.upstream.server, closed: () => this.closed });
  private readonly deadline = new StatementDeadline({
    expired: (limitMs) => {
      this.context.logger.info({ session: this.id, limitMs }, 'statement timeout: cancelling upstream');
      void this.cancelRunningQuery();
    },
    stuck: (limitMs) =>
      this.fatal({ severity: 'FATAL', code: '57014', message: `terminating the session: a statement ran past this credential’s statement timeout (${limitMs} ms) and did not stop when cancelled; read results as they arrive, or narrow the query` }),
  });

  constructor(
    client: Inlet,
    private readonly context: SessionContext,
  ) {
    this.id = `${context.identity.proxyId}.${context.identity.bootEpoch}.${++sessionCounter}`;
    this.client = client;
    this.socket = client.socket;
    this.upstream = new UpstreamHold(this.serverReceiver, this.statements);
    this.reads = new SessionReads(context.readRouting);
    this.audit = new SessionAudit(context, this.id, (client.socket.remoteAddress ?? '').replace(/^::ffff:/, ''));
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
          if (status === 'I' && this.schemaChanged) {
            this.schemaChanged = false;
            this.catalog?.changed();
          }
        },
      },
      // Asked only when a server chunk carries an error.
      () => agentErrorEdit(masksColumns(this.context.policies.get(this.credential?.policy_profile_id ?? '')), this.deadline.cancelledAtMs),
    );
    context.registry.add(this, this.processId);
    context.metrics.connections.inc();
    context.metrics.connectionsTotal.inc();
    this.login = new LoginPhase({
      id: this.id,
      context,
      audit: this.audit,
      closed: () => this.closed,
      write: (bytes) => void this.socket.write(bytes),
      fatal: (fields) => this.fatal(fields),
      loggedIn: (login) => this.loggedIn(login),
    });
    this.attach(client);
  }

  /** Read through a getter: the state changes across awaits, which narrowing cannot see. */
  private get closed(): boolean {
    return this.state === 'closed';
  }


  private attach(client: Inlet): void {
    this.client = client;
    this.socket = client.socket;
    client.socket.setNoDelay(true);
    client.socket.setKeepAlive(true, CLIENT_KEEPALIVE_MS);
    client.receive(this.clientReceiver);
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
        if (this.state === 'closed') return;
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
    this.attach(Inlet.over(new TLSSocket(plain.socket, { isServer: true, secureContext: this.context.tls })));
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
    this.holdWait?.abort('cancel');
    const server = this.upstream.server;
    const handle = this.upstream.handle;
    if (server && handle && this.pipeline.awaitingServer) await handle.cancel(server);
  }

  /** The policy's decision on `sql` for this session, on its database's catalog snapshot. */
  private decideOn(sql: string, credential: CredentialRow, policy: PolicyRow | undefined, protocol: 'simple' | 'extended'): StatementDecision {
    return decideWithCatalog(sql, { credential, policy, protocol, honeytokens: this.context.honeytokens, hashKey: this.hashKeyOf(policy), sessionValues: this.sessionValues }, this.catalog!.current());
  }

  /** The project's hash key for a decision under `policy`, when the policy needs it and it is at hand. */
  private hashKeyOf(policy: PolicyRow | undefined): HashKey | undefined {
    return this.context.hashKeys.forPolicy(policy, (error) => this.context.logger.warn({ err: error, session: this.id }, 'could not read the project’s hash key; statements a hash mask applies to are refused until it is at hand'));
  }

  /** The login completed: the session takes its credential, upstream and catalog, and answers the client. */
  private loggedIn({ credential, handle, catalog, server, serverFinal }: CompletedLogin): void {
    this.login = undefined;
    this.credential = credential;
    this.sessionValues = sessionValuesOf(credential);
    this.upstream.handle = handle;
    this.catalog = catalog;
    this.useServer(server);
    this.audit.loggedIn(credential);
    this.context.registry.bind(this, credential.credential_id);
    this.expiresAtMs = credential.expires_at ? Date.parse(credential.expires_at) : Number.POSITIVE_INFINITY;
    this.context.onLogin?.(credential.credential_id);
    this.scheduleExpiry(credential);
    this.state = 'ready';
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

  private useServer(server: UpstreamConnection): void {
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
  private releaseIfIdle(): void {
    if (this.upstream.parked || this.pinned || this.status !== 'I' || this.unsynced || !this.pipeline.empty) return;
    this.upstream.handBack();
  }

  /**
   * Runs `work` with an upstream connection: at once when one is held or idle, else once one is
   * acquired. When none can be had the message is refused as `protocol` says: in an extended batch
   * the rest is then skipped until Sync, so the client gets one error and one ReadyForQuery. The
   * statement `audited` names (one that would have run, or a Parse) is audited as not run, with why.
   */
  private withServer(work: () => void, protocol: 'simple' | 'extended', audited?: () => Statement | undefined): Promise<void> | void {
    this.reads.place(this.upstream, audited !== undefined);
    if (this.upstream.server) {
      this.upstream.unpark();
      return work();
    }
    // A change to the database (password, host, pool settings) closed the pool this session started on.
    if (this.upstream.handle!.pool.isClosed) return this.withNewPool(work, protocol, audited);
    const owner = this.credential!.credential_id;
    const idle = this.upstream.handle!.pool.tryAcquire(owner);
    if (idle) {
      this.useServer(idle);
      return work();
    }
    return this.upstream.handle!.pool.acquire({ owner }).then(
      (server) => {
        if (this.closed) return void this.upstream.handle!.pool.release(server, { reset: false });
        this.useServer(server);
        work();
      },
      // A replica that gave no connection: the message goes again, to the primary (its read was placed already).
      (error: unknown) => (this.upstream.handle!.replicaId === undefined || this.closed ? this.refuseUnrun(classifyUpstreamFailure(error), protocol, audited) : this.withServer(work, protocol, audited)),
    );
  }

  /** No upstream connection for a message: refused with the failure's SQLSTATE and wording; the statement it would have run audited as not run. */
  private refuseUnrun(failure: UpstreamFailure, protocol: 'simple' | 'extended', audited: (() => Statement | undefined) | undefined): void {
    const credential = this.credential!;
    const statement = audited?.();
    const rule = upstreamRule(failure);
    if (statement) this.audit.notRun(credential, statement, rule, failure.message);
    logEvent(this.context.logger, 'upstream_unavailable', { session: this.id, credential_id: credential.credential_id, database: credential.database_id, rule, retryable: failure.retryable }, 'no upstream connection for a statement');
    this.refuse(noConnection(failure, 'ERROR', this.context.metrics), protocol);
  }

  private async withNewPool(work: () => void, protocol: 'simple' | 'extended', audited?: () => Statement | undefined): Promise<void> {
    const handle = await this.context.upstreamFor(this.credential!);
    if (this.closed) return;
    if (!handle || handle.pool.isClosed) return this.refuseUnrun(upstreamFailure('not_registered', `database ${this.credential!.database_id} is not active`), protocol, audited);
    this.upstream.handle = handle;
    this.catalog?.moved(handle);
    return this.withServer(work, protocol, audited);
  }

  private forward(raw: Buffer): void {
    this.upstream.unpark();
    this.flow.forward(this.upstream.server!.socket, raw, this.busy);
  }

  private onMessage(message: FrontendMessage): Promise<void> | void {
    // Disable, revoke and rotation end the session when their events arrive; expiry is checked here, before every message.
    if (Date.now() >= this.expiresAtMs) return this.terminate('credential_expired', 'the credential expired');
    if (this.skipUntilSync && message.kind !== 'Sync' && message.kind !== 'Terminate') return;
    switch (message.kind) {
      case 'Query':
        return this.onQuery(message.sql, message.raw);
      case 'Parse':
        return this.onParse(message.name, message.sql, message.paramTypes, message.raw);
      case 'Bind': {
        const prepared = this.preparedStatement(message.statement);
        if (!prepared) return;
        const current = this.stillAllowed(message.statement, prepared);
        if (!current) return;
        this.statements.portals.set(message.portal, current);
        if (holdFor(this.context.policies.get(this.credential!.policy_profile_id), current.decision)) this.heldBinds.set(message.portal, message);
        else this.heldBinds.delete(message.portal);
        const made = this.rowCap(current.decision) === undefined ? undefined : onReply('2', this.portalRows.made(message.portal));
        return this.withStatement(message.statement, message.raw, renameBindStatement, '2', made);
      }
      case 'Describe':
        if (message.target !== 'S') return this.toServer(message.raw, { ends: 'Tn' });
        return this.preparedStatement(message.name) ? this.withStatement(message.name, message.raw, renameTarget, 'Tn') : undefined;
      case 'Execute':
        return this.onExecute(message.portal, message.maxRows, message.raw);
      case 'Close':
        if (message.target === 'S' && message.name !== '') {
          this.statements.named.delete(message.name);
          this.unsynced = true;
          return this.pipeline.expect({ kind: 'synthetic', reply: encodeCloseComplete });
        }
        if (message.target === 'P') {
          this.statements.portals.delete(message.name);
          this.heldBinds.delete(message.name);
        }
        return this.toServer(message.raw, { ends: '3', rewrite: message.target === 'P' && this.rowCap(undefined) !== undefined ? onReply('3', this.portalRows.closed(message.name)) : undefined });
      case 'Sync':
        this.skipUntilSync = false;
        this.unsynced = false;
        if (this.undoAtSync) {
          // A guarded write of this batch is undone: its transaction fails, and this Sync rolls it back.
          this.undoAtSync = false;
          return this.toServer(undoneSync(message.raw), { ends: 'Z', synced: true, rewrite: errorsHidden });
        }
        if (!this.upstream.server && !this.pipeline.awaitingServer) return this.pipeline.expect({ kind: 'synthetic', reply: () => encodeReadyForQuery(this.status) });
        return this.toServer(message.raw, { ends: 'Z', synced: true });
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
  private refuse(error: ErrorFields, protocol: 'simple' | 'extended'): void {
    const bytes = encodeErrorResponse(error);
    if (protocol === 'simple') this.pipeline.expect({ kind: 'synthetic', reply: () => Buffer.concat([bytes, encodeReadyForQuery(this.status)]) });
    else {
      this.skipUntilSync = true;
      this.pipeline.expect({ kind: 'synthetic', reply: () => bytes });
    }
  }

  private onParse(name: string, sql: string, paramTypes: readonly number[], raw: Buffer): Promise<void> | void {
    const known = name === '' ? undefined : this.statements.named.get(name);
    if (known && known.sql !== sql) {
      return this.refuse({ severity: 'ERROR', code: '42P05', message: `prepared statement "${name}" already exists` }, 'extended');
    }
    const decision = this.decide(sql, 'extended');
    if (!decision) {
      // As PostgreSQL's failed Parse, a refused one leaves no unnamed statement behind.
      if (name === '') this.statements.unnamed = undefined;
      return;
    }
    const parse = parseToRun(raw, sql, decision);
    if (name === '') {
      this.statements.unnamed = { sql, decision, parse };
      this.unsynced = true;
      return this.withServer(
        () => {
          this.statements.unnamedOn = this.upstream.server;
          this.send(parse, { ends: '1' });
        },
        'extended',
        () => statementOf({ sql, decision }),
      );
    }
    const { serverName } = this.statements.prepareNamed(name, sql, decision, paramTypes, parse);
    this.unsynced = true;
    return this.withServer(
      () => {
        if (preparedStatements(this.upstream.server!).has(serverName)) this.pipeline.expect({ kind: 'synthetic', reply: encodeParseComplete });
        else this.send(this.statements.named.get(name)!.parse, { ends: '1', prepares: serverName });
      },
      'extended',
      () => statementOf({ sql, decision }),
    );
  }

  /** Bind or Describe of a named statement: prepared first on this connection if it is not yet, then sent under its server name. */
  private withStatement(name: string, raw: Buffer, rename: (raw: Buffer, name: string) => Buffer, ends: string, rewrite?: Rewrite, suppress = false): Promise<void> | void {
    const unnamed = this.statements.unnamed;
    if (name === '' && unnamed) {
      this.unsynced = true;
      return this.withServer(() => {
        // A connection the session did not hold since its Parse holds another session's unnamed statement, if any: prepare its own first.
        if (this.statements.unnamedOn !== this.upstream.server) {
          this.send(unnamed.parse, { ends: '1', suppress: true });
          this.statements.unnamedOn = this.upstream.server;
        }
        this.send(raw, { ends, rewrite, suppress });
      }, 'extended');
    }
    // preparedStatement made sure the session prepared it.
    const statement = this.statements.named.get(name)!;
    this.unsynced = true;
    return this.withServer(() => {
      if (!preparedStatements(this.upstream.server!).has(statement.serverName)) this.send(statement.parse, { ends: '1', prepares: statement.serverName, suppress: true });
      this.send(rename(raw, statement.serverName), { ends, rewrite, suppress });
    }, 'extended');
  }

  /**
   * The statement a Bind or Describe names, when the client prepared it in this session; else the
   * message is refused (26000), as PostgreSQL refuses an unknown name: a name the session did not
   * prepare could only reach another session's statement left on the pooled connection.
   */
  private preparedStatement(name: string): Allowed | undefined {
    const prepared = this.statements.prepared(name);
    if (!prepared) {
      this.refuse({ severity: 'ERROR', code: '26000', message: name === '' ? 'unnamed prepared statement does not exist' : `prepared statement "${name}" does not exist` }, 'extended');
    }
    return prepared;
  }

  /**
   * A prepared statement decided again as it is bound, so that a policy (or honeytoken) change since
   * its Parse applies to it: refused (audited) when the policy now refuses it, or when it would now
   * run as another text (a new mask), which needs a new Parse. Undefined when refused.
   */
  private stillAllowed(name: string, prepared: Allowed): Allowed | undefined {
    const credential = this.credential!;
    const policy = this.context.policies.get(credential.policy_profile_id);
    const decision = this.decideOn(prepared.sql, credential, policy, 'extended');
    if (decision === prepared.decision) return prepared;
    if (decision.action !== 'allow') return this.refuseStatement(prepared.sql, 'extended', { ...decision, kind: decision.statementKind });
    if (decision.sql !== prepared.decision.sql) return this.refuseStatement(prepared.sql, 'extended', policyChanged(name, decision));
    return this.statements.redecided(name, prepared, decision);
  }

  private send(raw: Buffer, expectation: { ends: string; prepares?: string; suppress?: boolean; statement?: Statement; rewrite?: Rewrite | undefined }): void {
    if (expectation.prepares) preparedStatements(this.upstream.server!).add(expectation.prepares);
    // Every field present, so each expectation has one shape.
    this.pipeline.expect({ kind: 'server', ends: expectation.ends, suppress: expectation.suppress ?? false, statement: expectation.statement, prepares: expectation.prepares, rewrite: expectation.rewrite });
    if (!this.deadline.running) this.deadline.start(statementTimeoutMs(this.context.policies.get(this.credential!.policy_profile_id), this.upstream.handle!.database.query_timeout_ms));
    this.forward(raw);
  }

  private toServer(raw: Buffer, expectation: { ends: string; synced?: boolean; statement?: Statement; rewrite?: Rewrite | undefined }): Promise<void> | void {
    if (!expectation.synced && expectation.ends !== 'Z') this.unsynced = true;
    // Query and Sync are owed a ReadyForQuery; any other message belongs to an extended-protocol batch.
    return this.withServer(() => this.send(raw, expectation), expectation.ends === 'Z' ? 'simple' : 'extended', () => expectation.statement);
  }

  /**
   * The policy's decision on a message's SQL. A refusal is answered (and audited) here and yields
   * undefined; so is any statement while strict auditing cannot take records.
   */
  private decide(sql: string, protocol: 'simple' | 'extended'): Extract<StatementDecision, { action: 'allow' }> | undefined {
    const credential = this.credential!;
    const policy = this.context.policies.get(credential.policy_profile_id);
    if (policy?.audit_mode === 'strict' && !this.context.decisions.acceptingStrict()) {
      this.context.metrics.statementsOf('blocked').inc();
      this.refuse(
        { severity: 'ERROR', code: '58000', message: 'the audit trail cannot take records right now, and this credential’s policy (audit_mode strict) refuses statements it cannot audit; retry shortly' },
        protocol,
      );
      return undefined;
    }
    // A Query runs now; a Parse runs nothing: its statement's budget is checked at each Execute.
    if (protocol === 'simple' && this.overBudget(sql, protocol)) return undefined;
    const decision = this.decideOn(sql, credential, policy, protocol);
    if (decision.action === 'allow' && decision.progress.length > 0) this.schemaChanged = true;
    for (const progress of decision.action === 'allow' ? decision.progress : []) {
      this.audit.publish(credential, { event: progress.event, projectId: credential.project_id, sql, kind: decision.statementKind, rule: progress.rule, reason: progress.reason, rows: 0, bytes: 0, latencyUs: null, ts: new Date().toISOString(), tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten });
    }
    if (decision.action !== 'allow') return this.refuseStatement(sql, protocol, { ...decision, kind: decision.statementKind });
    // Session state (SET, set_config(..., false)) stays where the session's statements run, and is reset before anyone else's do.
    if (decision.changesSession) this.pinned = true;
    this.reads.decided(sql, decision);
    return decision;
  }

  /**
   * Refuses (audited, 53400) a statement the credential's or its organization's budget has no room
   * for; true when it did. Checked where a statement is sent to run (Query, Execute), so that a
   * statement prepared once and executed again and again is counted and stopped like any other.
   */
  private overBudget(sql: string, protocol: 'simple' | 'extended'): boolean {
    const credential = this.credential!;
    const policy = this.context.policies.get(credential.policy_profile_id);
    const refusal = policy && this.context.budgets.refusal(credential, policy);
    if (!refusal) return false;
    this.refuseStatement(sql, protocol, { event: 'budget_exhausted', sqlstate: '53400', kind: statementKind(sql), ...refusal, tablesRead: [], tablesWritten: [], tablesBlocked: [] });
    return true;
  }

  /** Refuses a statement before it runs: audited, counted, and answered with `refusal.sqlstate` and its reason. */
  private refuseStatement(
    sql: string,
    protocol: 'simple' | 'extended',
    refusal: StatementRefusal,
  ): undefined {
    this.audit.refused(this.credential!, sql, refusal);
    this.refuse({ severity: 'ERROR', code: refusal.sqlstate, message: refusal.reason }, protocol);
    return undefined;
  }

  private onQuery(sql: string, raw: Buffer): Promise<void> | void {
    const decision = this.decide(sql, 'simple');
    if (!decision) return;
    const hold = holdFor(this.context.policies.get(this.credential!.policy_profile_id), decision);
    if (hold) return this.holdQuery(sql, raw, decision, hold);
    return this.runQuery(sql, raw, decision, statementOf({ sql, decision }));
  }

  /** A simple query held for approval (approval-wire.ts): waits with no upstream connection held, then runs once approved, or answers why not. */
  private async holdQuery(sql: string, raw: Buffer, decision: Allowed['decision'], hold: Hold): Promise<void> {
    const run = await this.held(sql, decision, hold, 'simple');
    if (run && !this.closed) await this.runQuery(sql, raw, run.decision, run.statement);
  }

  /** Waits for a held statement's decision: what to run once approved, or undefined once the client was answered why not. */
  private async held(sql: string, decision: Allowed['decision'], hold: Hold, protocol: 'simple' | 'extended', bound?: BoundParams): Promise<{ decision: Allowed['decision']; statement: Statement } | undefined> {
    const wait = new AbortController();
    this.holdWait = wait;
    try {
      return await holdOnWire({
        services: this.context.approvals,
        credential: this.credential!,
        policies: this.context.policies,
        sql,
        ...(bound ? { bound } : {}),
        decision,
        hold,
        sessionId: this.id,
        region: this.context.identity.region,
        inTransaction: this.status !== 'I',
        wait: wait.signal,
        publish: (record) => this.context.decisions.publish(record),
        notice: (bytes) => this.pipeline.expect({ kind: 'synthetic', reply: () => bytes }),
        released: () => this.releaseIfIdle(),
        closed: () => this.closed,
        refuse: (refusal) => this.refuseStatement(sql, protocol, refusal),
        answer: (code, message) => this.refuse({ severity: 'ERROR', code, message }, protocol),
        redecide: () => this.decide(sql, protocol),
      });
    } finally {
      if (this.holdWait === wait) this.holdWait = undefined;
    }
  }

  private runQuery(sql: string, raw: Buffer, decision: Allowed['decision'], statement: Statement): Promise<void> | void {
    const guard = writeGuardOf(this.context.policies.get(this.credential!.policy_profile_id), decision.writes);
    if (guard) return this.guardedQuery(sql, decision, statement, guard);
    const cap = this.rowCap(decision);
    const capped = cap === undefined ? undefined : cappedQuery(decision, cap, this.portalRows, statement);
    if (capped?.refused) return this.refuseStatement(sql, 'simple', { event: 'blocked', rule: 'max_rows.uncapped', reason: capped.refused, sqlstate: '0A000', kind: decision.statementKind, tablesRead: [], tablesWritten: [], tablesBlocked: [] });
    const own = statement.settled;
    const cappedSettled = capped?.settled;
    if (cappedSettled) statement.settled = own ? (ok) => (cappedSettled(ok), own(ok)) : cappedSettled;
    this.context.budgets.admit(this.credential!);
    return this.toServer(capped?.message ?? (decision.sql === sql ? raw : encodeQuery(decision.sql)), { ends: 'Z', statement, rewrite: capped?.rewrite });
  }

  /** A write of a simple query under max_affected_rows or write_mode rollback (guarded-write.ts). */
  private guardedQuery(sql: string, decision: Allowed['decision'], statement: Statement, guard: WriteGuard): Promise<void> | void {
    if (guard.rollback && this.status !== 'I') return this.refuseInTransaction(sql, decision, 'simple');
    this.context.budgets.admit(this.credential!);
    const outcome: GuardedOutcome = { undo: false, refused: false };
    return this.runGuarded(statement, 'simple', () => {
      // The Parse replaces the connection's unnamed statement.
      this.statements.unnamedOn = undefined;
      this.send(guardedSimpleWrite(decision.sql), { ends: 'CI', statement, rewrite: guardedReplies(statement, guard, outcome, { simple: true }) });
    }, () => {
      this.unsynced = false;
      const undo = outcome.undo && !statement.failed;
      this.send(guardedSimpleEnd(undo), { ends: 'Z', rewrite: simpleEndReplies(undo) });
    });
  }

  /** An Execute of a write under max_affected_rows or write_mode rollback: its batch's Sync is held back until its tag decided. */
  private guardedExecute(allowed: Allowed, statement: Statement, guard: WriteGuard, raw: Buffer): Promise<void> | void {
    if (guard.rollback && this.status !== 'I') return this.refuseInTransaction(allowed.sql, allowed.decision, 'extended');
    this.context.budgets.admit(this.credential!);
    const outcome: GuardedOutcome = { undo: false, refused: false };
    return this.runGuarded(statement, 'extended', () => {
      this.send(raw, { ends: 'CIs', statement, rewrite: guardedReplies(statement, guard, outcome, { simple: false }) });
      this.forward(FLUSH);
    }, () => {
      if (outcome.refused) this.skipUntilSync = true;
      if (outcome.undo && !statement.failed) this.undoAtSync = true;
    });
  }

  /**
   * Sends a guarded write with `start` and, once its replies went by, does `then`; the client's
   * next message waits until then. The transaction stays open meanwhile (`unsynced`), so the
   * connection is not handed back.
   */
  private async runGuarded(statement: Statement, protocol: 'simple' | 'extended', start: () => void, then: () => void): Promise<void> {
    const ended = settledOf(statement);
    let sent = false;
    this.unsynced = true;
    await this.withServer(() => {
      sent = true;
      start();
    }, protocol, () => statement);
    if (!sent) {
      if (protocol === 'simple') this.unsynced = false;
      return;
    }
    this.flow.flush();
    await ended;
    if (!this.closed && this.upstream.server) then();
  }

  private refuseInTransaction(sql: string, decision: Allowed['decision'], protocol: 'simple' | 'extended'): undefined {
    return this.refuseStatement(sql, protocol, { event: 'blocked', ...rollbackInTransaction(), kind: decision.statementKind, tablesRead: decision.tablesRead, tablesWritten: decision.tablesWritten, tablesBlocked: [] });
  }

  /** The policy's max_rows, when it caps this statement's results; drivers' own type lookups are not the agent's results. */
  private rowCap(decision: Allowed['decision'] | undefined): number | undefined {
    const cap = this.context.policies.get(this.credential!.policy_profile_id)?.max_rows;
    if (!cap || cap <= 0) return undefined;
    return decision && decision.tablesRead.length > 0 && decision.tablesRead.every((table) => DRIVER_METADATA.has(table)) ? undefined : cap;
  }

  /** Execute under a row cap asks the server for no more rows than the cap leaves for the portal, so the server stops producing. */
  private onExecute(portal: string, maxRows: number, raw: Buffer): Promise<void> | void {
    const allowed = this.statements.portals.get(portal);
    if (this.overBudget(allowed?.sql ?? '', 'extended')) return;
    const bind = this.heldBinds.get(portal);
    const hold = allowed && bind && holdFor(this.context.policies.get(this.credential!.policy_profile_id), allowed.decision);
    if (hold) return this.holdExecute(allowed, bind, hold, maxRows, raw);
    return this.execute(portal, maxRows, raw, allowed, statementOf(allowed));
  }

  /**
   * An Execute held for approval. What its batch sent before it (Parse, Bind, Describe) ran nothing:
   * that batch is ended upstream (a Sync whose reply the client does not see), so the connection
   * goes back while the statement waits; once approved, its Bind is sent again (its reply hidden:
   * the client had it) on whatever connection it runs on, then it runs as any Execute.
   */
  private async holdExecute(allowed: Allowed, bind: Bind, hold: Hold, maxRows: number, raw: Buffer): Promise<void> {
    if (this.status === 'I' && this.upstream.server) {
      this.send(SYNC, { ends: 'Z', suppress: true });
      this.unsynced = false;
    }
    const run = await this.held(allowed.sql, allowed.decision, hold, 'extended', boundParams(bind));
    if (!run || this.closed) return;
    if (run.decision.sql !== allowed.decision.sql) return void this.refuseStatement(allowed.sql, 'extended', policyChanged(bind.statement, run.decision));
    const approved = { ...allowed, decision: run.decision };
    this.statements.portals.set(bind.portal, approved);
    await this.withStatement(bind.statement, bind.raw, renameBindStatement, '2', undefined, true);
    if (!this.closed && !this.skipUntilSync) await this.execute(bind.portal, maxRows, raw, approved, run.statement);
  }

  private execute(portal: string, maxRows: number, raw: Buffer, allowed: Allowed | undefined, statement: Statement): Promise<void> | void {
    const guard = allowed && writeGuardOf(this.context.policies.get(this.credential!.policy_profile_id), allowed.decision.writes);
    if (allowed && guard) return this.guardedExecute(allowed, statement, guard, raw);
    const cap = this.rowCap(allowed?.decision);
    if (cap === undefined) {
      this.context.budgets.admit(this.credential!);
      return this.toServer(raw, { ends: 'CIs', statement });
    }
    if (allowed) statement.settled = executedUnderCap(allowed.decision, this.portalRows);
    const left = this.portalRows.left(portal, cap);
    if (left <= 0) {
      // The portal gave all the cap allows (the client was told it completed): answered as an exhausted portal.
      this.unsynced = true;
      return this.pipeline.expect({ kind: 'synthetic', reply: () => encodeCommandComplete('SELECT 0') });
    }
    const limit = maxRows > 0 && maxRows <= left ? maxRows : left;
    // Counted as asked, before the rows come back: an Execute pipelined behind this one sees only what is left.
    this.portalRows.take(portal, limit);
    this.context.budgets.admit(this.credential!);
    return this.toServer(limit === maxRows ? raw : withRowLimit(raw, limit), { ends: 'CIs', statement, rewrite: capRewrite(statement, cap, cap - left, { simple: false }) });
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
    this.holdWait?.abort('closed');
    clearTimeout(this.expiryTimer);
    this.login?.abandon();
    this.catalog?.release();
    this.deadline.close();
    this.context.metrics.connections.dec();
    this.context.registry.remove(this, this.processId, this.credential?.credential_id);
    const idle = this.idle;
    const working = this.pipeline.awaitingServer;
    // Statements sent upstream whose end the session will not see are audited now (as when the upstream is lost): they may have run.
    this.pipeline.abandon();
    // Nothing more goes upstream: the connection is about to belong to the pool again, or to nobody.
    this.flow.discardOutgoing();
    this.upstream.unpark();
    const server = this.upstream.detach();
    // A pinned connection goes back after DISCARD ALL (its statements go too); one in the middle of anything cannot be trusted by the next client.
    if (server && idle && this.pinned) {
      forgetPrepared(server);
      void this.upstream.handle?.pool.release(server, { reset: true });
    } else if (server && idle) void this.upstream.handle?.pool.release(server, { reset: false });
    else if (server) {
      // Dropping the connection alone does not stop a statement that is not writing: PostgreSQL notices only when it next writes.
      const handle = this.upstream.handle;
      if (working && handle) cancelAbandoned(() => handle.cancel(server));
      this.upstream.handle?.pool.destroy(server);
    }
    if (!this.socket.destroyed) this.socket.destroy();
  }
}
