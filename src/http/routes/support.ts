import type { BackPressureLimits } from '../../../proxy/audit-backpressure.js';
import type { Budgets } from '../../../proxy/budgets.js';
import type { Fanout } from '../../bus/fanout.js';
import type { KeyObject } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type pg from 'pg';
import { z } from 'zod';
import { handle, type Aggregate, type CommandContext, type Handled } from '../../../commands/handle.js';
import type { DecisionBus } from '../../bus/port.js';
import type { Keyring } from '../../crypto/seal.js';
import type { EventStore, RecordedEvent } from '../../store/port.js';
import type { HmacKeyring } from '../../audit/chain.js';
import type { AnchorSigner } from '../../audit/checkpoints.js';
import type { DemoSettings } from '../../demo/settings.js';
import type { PaymentSettings } from '../../payments/prices.js';
import type { DomainCertificates } from '../../domains/certificates.js';
import { isAgentRole, type HumanRole } from '../../events/organizations.js';
import { callerOf, type Caller } from '../plugins/auth.js';
import { Problem, ProblemBody, problemCatalog, type ProblemCode } from '../problem.js';
import type { HashKeys } from '../../../proxy/hash-keys.js';
import type { RelayLinks } from '../../../proxy/relay/options.js';
import type { ReplicaOptions } from '../../../proxy/server.js';

export type Api = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** What the routes need: the write side, the read models, and the deployment's public addresses. */
export interface ApiDeps {
  readonly store: EventStore & { transaction?: unknown };
  readonly pool: pg.Pool;
  readonly keyring: Keyring;
  /** Each project's key for `hash` masks, as the what-if, replay and hosted MCP decide with it. */
  readonly hashKeys: HashKeys;
  /** Host agents use to reach the proxy and the hosted MCP endpoint ({project_host}). */
  readonly publicHost: string;
  /** The hosted agent MCP's URL as agents reach it (`mcp_url` of a registration). */
  readonly mcpUrl: string;
  readonly proxyPort: number;
  readonly now: () => Date;
  /** What verifying and checkpointing a project's audit chain needs: the HMAC keyring and the anchor key. */
  readonly audit: { readonly keys: HmacKeyring; readonly anchorPublicKey: KeyObject; readonly signer: AnchorSigner };
  /** Waits (bounded) until every read model fed by `stream` has applied `position`, so a write is visible to the next read. */
  readonly settle: (stream: string, position: bigint) => Promise<void>;
  /** Where the hosted agent MCP publishes its statement decisions: the proxy's bus, under its own publisher id, in this region. */
  readonly decisions: { readonly bus: DecisionBus; readonly publisherId: string; readonly region: string; readonly backPressureLimits?: BackPressureLimits };
  /** How the hosted MCP (and the policy what-if) reach the databases of other regions: PGWARD_REGION_PEERS and PGWARD_RELAY_SECRET; without it such a database is refused (region.no_peer). */
  readonly relay?: RelayLinks;
  /** How the hosted MCP routes reads to replicas (PGWARD_REPLICA_*, PGWARD_READ_YOUR_WRITES_MS); without it its statements all run on the primary. */
  readonly replicas?: ReplicaOptions;
  /** The CA certificate file GET /v1/proxy/ca.pem serves; none when the operator publishes none. */
  readonly proxyCaFile?: string;
  /** The process's budget tallies, shared with its proxy so that the wire and MCP count against one figure; else the MCP keeps its own. */
  readonly budgets?: Budgets;
  /** Where the hosted MCP's result cache shares invalidations with the proxy's (docs/cache.md); without it the MCP's cache sees only its own writes. */
  readonly cacheFanout?: Fanout;
  /** Custom domains: the DNS servers their verification asks (PGWARD_DNS_SERVERS; else the system's) and their certificates (PGWARD_DOMAIN_CERT_DIR). */
  readonly domains?: { readonly dnsServers?: readonly string[]; readonly certificates?: DomainCertificates };
  /** What the demo offers (spec §4.8); absent when PGWARD_DEMO turns it off. */
  readonly demo?: DemoSettings;
  /** How often a live approvals stream sends a heartbeat (PGWARD_APPROVAL_STREAM_HEARTBEAT_MS); else every 15 s. */
  readonly approvalStreamHeartbeatMs?: number;
  /** What the deployment charges per request (PGWARD_PRICES, docs/payments.md); absent when it prices nothing. */
  readonly payments?: PaymentSettings;
}

const rank: Record<HumanRole, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

/**
 * Refuses with 403 FORBIDDEN unless the caller's role is at least `minimum` (docs/permissions.md).
 * An agent-role key has no rank: it reaches only the CRM operations its role allows (docs/crm.md).
 */
export function requireRole(request: FastifyRequest, minimum: HumanRole): Caller {
  const caller = callerOf(request);
  if (isAgentRole(caller.role)) throw new Problem('FORBIDDEN', `an agent credential of role ${caller.role} may call only the CRM operations its role allows (docs/crm.md)`);
  if (rank[caller.role] < rank[minimum]) throw new Problem('FORBIDDEN', `this operation needs the ${minimum} role or higher; the caller is ${caller.role}`);
  return caller;
}

/**
 * The organization a request addresses. A credential belongs to exactly one organization, so naming
 * none means the caller's own; naming another answers 404 exactly as a nonexistent one does (§7).
 */
export function addressedOrg(caller: Caller, named: string | undefined): string {
  if (named !== undefined && named !== caller.orgId) throw new Problem('NOT_FOUND', `organization ${named} not found`);
  return caller.orgId;
}

export function actorOf(caller: Caller): string {
  return caller.kind === 'api_key' ? `api_key:${caller.keyId}` : `user:${caller.subject}`;
}

export function commandContext(request: FastifyRequest, deps: ApiDeps): CommandContext {
  // An operator (docs/support.md) acts as itself; everyone else as their key or user.
  const actor = request.operator ? `operator:${request.operator.name}` : actorOf(callerOf(request));
  // Keys are per caller (the idempotency scope), so the event ids they derive are too: another
  // caller picking the same key value makes its own events, not a "retry" of someone else's.
  const claim = request.routeOptions.config.idempotent ? request.idempotency : undefined;
  const idempotencyKey = claim ? `${claim.scope}\u0000${claim.key}` : undefined;
  return { correlationId: request.id, actor, ...(idempotencyKey ? { idempotencyKey } : {}), now: deps.now };
}

/** The revision an `If-Match` header names, or undefined when absent; `*` matches anything. */
export function ifMatch(request: FastifyRequest): number | undefined {
  const header = request.headers['if-match'];
  if (header === undefined || header === '*') return undefined;
  const match = typeof header === 'string' ? /^(?:W\/)?"(\d+)"$/.exec(header.trim()) : null;
  if (!match) throw new Problem('PRECONDITION_FAILED', 'If-Match must be an ETag this API returned, such as "3"');
  return Number(match[1]);
}

export function etag(reply: FastifyReply, revision: number): void {
  void reply.header('etag', `"${revision}"`);
}

export const IdParam = (name: string) => z.string().regex(/^[a-zA-Z0-9_.-]+$/, { message: 'must match ^[a-zA-Z0-9_.-]+$' }).max(128).describe(`The ${name}`);

/** Error responses an operation documents, each a problem+json body. */
export function errorResponses(...codes: ProblemCode[]): Record<number, typeof ProblemBody> {
  const statuses = new Set<number>([400, 401, 429, 500, ...codes.map((code) => problemCatalog[code].status)]);
  return Object.fromEntries([...statuses].sort().map((status) => [status, ProblemBody]));
}

export const Timestamp = z.string().describe('ISO 8601 date-time');

export function iso(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** Runs a command for a request and returns once the read models show its events (read-your-writes across requests). */
export function execute<State, Command>(deps: ApiDeps, request: FastifyRequest, stream: string, aggregate: Aggregate<State, Command>, command: Command): Promise<Handled<State>> {
  return executeAs(deps, commandContext(request, deps), stream, aggregate, command);
}

/** execute with a context of the caller's choosing: a public route's requests have no caller. */
export async function executeAs<State, Command>(deps: ApiDeps, context: CommandContext, stream: string, aggregate: Aggregate<State, Command>, command: Command): Promise<Handled<State>> {
  const result = await handle(deps.store, stream, aggregate, command, context);
  const last = result.recorded.at(-1);
  if (last) await deps.settle(stream, last.position);
  return result;
}

type Evolve<R> = (row: R | undefined, event: RecordedEvent) => R | null;

/**
 * Folds a stream with a read model's own evolve: the authoritative row, current right after a
 * write. `concerns` picks the events of one row when a stream holds several (a project's databases).
 */
export async function foldStream<R>(deps: Pick<ApiDeps, 'store'>, stream: string, evolve: Evolve<R>, concerns: (event: RecordedEvent) => boolean = () => true): Promise<R | undefined> {
  const events = await deps.store.readStream(stream);
  return events.filter(concerns).reduce<R | undefined>((row, event) => evolve(row, event) ?? undefined, undefined);
}

/** The read model's row, or the stream's when the projection has not caught up yet (read-your-writes). */
export async function readModelOrStream<R>(deps: Pick<ApiDeps, 'store'>, find: () => Promise<R | undefined>, stream: string, evolve: Evolve<R>): Promise<R | undefined> {
  return (await find()) ?? (await foldStream(deps, stream, evolve));
}

/** The revision `If-Match` names, refused with 412 when it is not `current`; undefined when absent. */
export function matchedRevision(request: FastifyRequest, current: number, what: string): number | undefined {
  const expected = ifMatch(request);
  if (expected !== undefined && expected !== current) throw new Problem('PRECONDITION_FAILED', `the ${what} is at revision ${current}, not ${expected}: fetch it again and retry with its ETag`);
  return expected;
}
