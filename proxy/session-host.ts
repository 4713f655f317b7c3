import type { Admission } from './admission.js';
import type { AuditHold } from './audit-backpressure.js';
import type { SniCallback } from '../src/domains/certificates.js';
import type { IpRulesRow } from '../projections/ip-rules.js';
import type { SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import type { ApprovalServices } from './approval-hold.js';
import type { SessionBudgets } from './budgets.js';
import type { DecisionPublisher } from './decisions.js';
import type { HashKeys } from './hash-keys.js';
import type { ProxyMetrics } from './metrics.js';
import type { Rewrite, ResponsePipeline, Statement, Tap } from './pipeline.js';
import type { ResultCaches } from './cache/caches.js';
import type { CacheControlsView } from './cache/rules.js';
import type { Honeytokens } from './policy/hook.js';
import type { SessionValues } from './policy/row-filters.js';
import type { PortalRows } from './portal-rows.js';
import type { ErrorFields, TransactionStatus } from './protocol/backend.js';
import type { ReadRouting } from './replica-routing.js';
import type { SessionAudit } from './session-audit.js';
import type { SessionFlow } from './session-flow.js';
import type { SessionRegistry } from './session-registry.js';
import type { SessionStatements } from './session-statements.js';
import type { UpstreamHold } from './session-upstream.js';
import type { CatalogLease, CatalogSnapshots } from './upstream/catalog-snapshot.js';
import type { UpstreamConnection } from './upstream/connection.js';
import type { UpstreamHandle } from './upstreams.js';
import type { LiveView } from './views/live-view.js';

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
  /** Picks a custom domain's certificate by the name the client asked for (SNI); the default `tls` otherwise. */
  readonly sni?: SniCallback;
  readonly maxMessageBytes: number;
  /** How long a client may take from connecting to a completed login (PostgreSQL's authentication_timeout). */
  readonly loginTimeoutMs: number;
  /** The project a refused connection that resolved no credential is audited under. */
  readonly fallbackProjectId?: string;
  /** Called after every successful login (feeds last_used_at). */
  readonly onLogin?: (credentialId: string) => void;
  /** Where held statements are recorded and their decisions followed; without it a held statement is refused. */
  readonly approvals?: ApprovalServices;
  /** The result cache (cache/); without it every statement bypasses it. */
  readonly resultCaches?: ResultCaches;
  /** Each database's cache rules by statement shape (cache/rules.ts); without them its cache_config alone applies. */
  readonly cacheControls?: CacheControlsView;
  /** Each project's IP rules, checked at login (proxy/ip-rules.ts); without them every address may connect. */
  readonly ipRules?: LiveView<IpRulesRow>;
  /** Whether logins are admitted at all (proxy/admission.ts); absent: always. */
  readonly admission?: Admission;
  /** Whose clients wait while ingest is behind (proxy/audit-backpressure.ts); absent: never anyone's. */
  readonly auditBackPressure?: AuditHold;
}

export type Protocol = 'simple' | 'extended';

/** What a message sent upstream expects back (pipeline.ts): the reply types that end it, and what is done with them. */
export interface ServerExpectation {
  readonly ends: string;
  /** The server name of a statement this message prepares on the connection. */
  readonly prepares?: string;
  /** Its replies are the gateway's own business: the client does not see them. */
  readonly suppress?: boolean;
  /** It ends an extended batch (Sync): the session is no longer unsynced. */
  readonly synced?: boolean;
  readonly statement?: Statement;
  readonly rewrite?: Rewrite | undefined;
  /** Sees the replies whole (a result cache miss's capture). */
  readonly tap?: Tap | undefined;
}

/**
 * What a session's statement modules (session-simple.ts, session-extended.ts, statement-gate.ts,
 * session-acquire.ts, session-guarded.ts, session-holds.ts) share of it: its state after login, its parts, and the few
 * ways a message goes upstream or is answered. The Session is the one implementation; the modules
 * call it directly, so a message costs no more calls than when all of this was one class.
 */
export interface SessionHost {
  readonly id: string;
  readonly context: SessionContext;
  /** Set at login; every statement module runs only after it. */
  readonly credential: CredentialRow | undefined;
  /** What the credential's row filters may name (`pgward.credential_id()`), set at login. */
  readonly sessionValues: SessionValues | undefined;
  readonly catalog: CatalogLease | undefined;
  readonly status: TransactionStatus;
  readonly closed: boolean;
  readonly pipeline: ResponsePipeline;
  readonly statements: SessionStatements;
  readonly portalRows: PortalRows;
  readonly upstream: UpstreamHold;
  readonly audit: SessionAudit;
  readonly flow: SessionFlow;
  /** Session state was set: the upstream connection stays this session's. */
  pinned: boolean;
  /** DDL was sent: the catalog is read again once the session is out of its transaction. */
  schemaChanged: boolean;
  /** An extended batch (or a guarded write) is under way: no ReadyForQuery yet, so the connection is not handed back. */
  unsynced: boolean;
  /** After the proxy refused a message of an extended-protocol batch, the rest is dropped until Sync, as PostgreSQL does. */
  skipUntilSync: boolean;
  /** A guarded write of this extended batch must be undone: its transaction is failed before the batch's Sync. */
  undoAtSync: boolean;
  /** Answers a request with an error in order; in the extended protocol the rest of the batch is then skipped until Sync. */
  refuse(error: ErrorFields, protocol: Protocol): void;
  /** Sends `raw` on the connection held now, expecting its replies. */
  send(raw: Buffer, expectation: ServerExpectation): void;
  /** Sends `raw` once a connection is at hand (session-upstream-use.ts). */
  toServer(raw: Buffer, expectation: ServerExpectation): Promise<void> | void;
  /** Queues bytes for the connection held now, with no reply expected of them. */
  forward(raw: Buffer): void;
  useServer(server: UpstreamConnection): void;
  releaseIfIdle(): void;
}
