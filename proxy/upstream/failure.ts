/**
 * Why no upstream connection could be had, classified for the two people who read it: the agent
 * (a SQLSTATE and a sentence that says whether retrying can help, naming none of the operator's
 * connection details) and the operator (the cause as the network or the server gave it, logged).
 */
import { UpstreamError } from './connection.js';
import { PoolError } from './pool.js';
import { RelayError, type RegionFailureReason } from '../relay/relay-error.js';

export type UpstreamFailureReason =
  | 'dns_not_found'
  | 'dns_unavailable'
  | 'refused'
  | 'unreachable'
  | 'timeout'
  | 'tls_failed'
  | 'auth_failed'
  | 'auth_unsupported'
  | 'database_missing'
  | 'too_many_connections'
  | 'server_unavailable'
  | 'protocol_error'
  | 'server_error'
  | 'pool_timeout'
  | 'owner_limit'
  | 'pool_closed'
  | 'not_registered'
  | 'connection_lost'
  | RegionFailureReason;

export interface UpstreamFailure {
  readonly reason: UpstreamFailureReason;
  /** Whether the same request may succeed later unchanged; false: the operator must change the database's settings first. */
  readonly retryable: boolean;
  /** What the agent is answered with: 08004 for what only the operator can mend, else 08006, 53300 or 57P03. */
  readonly sqlstate: string;
  /** What the agent is told: no host, port, user, password or database name of the upstream. */
  readonly message: string;
  /** The operator's view: the error as the network or the upstream server gave it (host and user included, never the password). */
  readonly cause: string;
  /** The system error code (ENOTFOUND, ECONNREFUSED, ...) or the upstream server's SQLSTATE, when there is one. */
  readonly causeCode?: string;
}

/** No upstream connection could be had (or the one held broke): why, classified; the cause is the error classified. */
export class UpstreamUnavailable extends Error {
  override readonly name = 'UpstreamUnavailable';
  readonly code = 'UPSTREAM_UNAVAILABLE';
  /**
   * Whether the statement had been sent when it failed (the stream broke, or a result message was
   * too large to read): it may then have run, and committed, upstream.
   */
  readonly mayHaveRun: boolean;
  constructor(
    readonly failure: UpstreamFailure,
    options?: ErrorOptions & { mayHaveRun?: boolean },
  ) {
    super(failure.message, options);
    this.mayHaveRun = options?.mayHaveRun ?? false;
  }

  /** Whether it is a connection that could not be opened, which the pool logged already. */
  get connectFailed(): boolean {
    return this.cause instanceof UpstreamError || this.cause instanceof RelayError;
  }
}

/** Acquires from `acquire`, turning any failure into an UpstreamUnavailable. */
export async function acquireOrExplain<T>(acquire: Promise<T>): Promise<T> {
  try {
    return await acquire;
  } catch (error) {
    throw new UpstreamUnavailable(classifyUpstreamFailure(error), { cause: error });
  }
}

/** The audit rule of a failure: `region.<reason>` when no relay link to the database's region could be had, else `upstream.<reason>`. */
export function upstreamRule(failure: Pick<UpstreamFailure, 'reason'>): string {
  return `${failure.reason in REGION_KINDS ? 'region' : 'upstream'}.${failure.reason}`;
}

/** Whether an audit rule says no upstream connection (or relay link) could be had: the state of the moment, not the policy's decision. */
export function isUpstreamRule(rule: string): boolean {
  return rule.startsWith('upstream.') || rule.startsWith('region.');
}

/** SQLSTATE sqlserver_rejected_establishment_of_sqlconnection: the gateway will not connect until its operator changes something. */
export const CONFIGURATION_SQLSTATE = '08004';
const CONNECTION_FAILURE = '08006';
/** SQLSTATE sqlclient_unable_to_establish_sqlconnection: no relay link to the database's region now. */
const UNABLE_TO_CONNECT = '08001';

const NOT_RETRYABLE = 'Retrying will not help: the gateway’s operator must correct the database’s settings.';
const RETRY = 'Retry shortly.';

interface Kind {
  readonly retryable: boolean;
  readonly sqlstate: string;
  readonly says: string;
}

/** What the agent is told when no relay link could be had: the region and the cause, nothing of hosts, certificates or secrets. */
const REGION_KINDS: Readonly<Record<RegionFailureReason, Kind>> = {
  no_peer: { retryable: false, sqlstate: '58000', says: 'this credential’s database is kept in region REGION, and the gateway has no link configured to that region’s data plane.' },
  peer_unreachable: { retryable: true, sqlstate: UNABLE_TO_CONNECT, says: 'this credential’s database is kept in region REGION, and the gateway cannot reach that region’s data plane just now.' },
  peer_untrusted: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'this credential’s database is kept in region REGION, and that region’s data plane did not prove its identity as configured.' },
  peer_refused: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'this credential’s database is kept in region REGION, and that region’s data plane refused the gateway’s link.' },
  peer_no_upstream: { retryable: true, sqlstate: UNABLE_TO_CONNECT, says: 'this credential’s database is kept in region REGION, and that region’s data plane has no connection to it free just now.' },
};

const KINDS: Readonly<Record<UpstreamFailureReason, Kind>> = {
  ...REGION_KINDS,
  dns_not_found: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway cannot reach this credential’s database: its configured host name does not resolve.' },
  dns_unavailable: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the gateway cannot reach this credential’s database: its host name could not be resolved just now.' },
  refused: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the gateway cannot reach this credential’s database: the connection was refused (the server may be down or restarting).' },
  unreachable: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the gateway cannot reach this credential’s database: the network connection failed.' },
  timeout: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the gateway cannot reach this credential’s database: it did not answer in time.' },
  tls_failed: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not set up TLS with this credential’s database as the database’s configured sslmode requires.' },
  auth_failed: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not log in to this credential’s database: the database refused the login the gateway is configured with.' },
  auth_unsupported: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not log in to this credential’s database: the database asks for an authentication method the gateway does not support.' },
  database_missing: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not connect to this credential’s database: the configured database does not exist on the upstream server.' },
  too_many_connections: { retryable: true, sqlstate: '53300', says: 'this credential’s database has no connection slots free.' },
  server_unavailable: { retryable: true, sqlstate: '57P03', says: 'this credential’s database is starting up, shutting down or in recovery, and accepts no connections now.' },
  protocol_error: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not connect to this credential’s database: the server at its configured address does not answer as PostgreSQL does.' },
  server_error: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'the gateway could not connect to this credential’s database: the database refused the connection.' },
  pool_timeout: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'no connection to this credential’s database came free in time (all of the gateway’s connections to it are busy).' },
  owner_limit: {
    retryable: true,
    sqlstate: '53300',
    says: 'this credential already holds as many upstream connections as it may (pool_config max_connections_per_credential), and none came free in time; finish or close its other sessions (read their results), then retry.',
  },
  pool_closed: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the gateway is changing or closing its connections to this credential’s database.' },
  not_registered: { retryable: false, sqlstate: CONFIGURATION_SQLSTATE, says: 'this credential’s database is no longer registered with the gateway.' },
  connection_lost: { retryable: true, sqlstate: CONNECTION_FAILURE, says: 'the connection to this credential’s database was lost.' },
};

/** The server's SQLSTATEs at start-up that say "not now" rather than "not like this". */
const SERVER_RETRYABLE: ReadonlyMap<string, UpstreamFailureReason> = new Map([
  ['53300', 'too_many_connections'],
  ['57P03', 'server_unavailable'],
  ['57P01', 'server_unavailable'],
  ['57P02', 'server_unavailable'],
]);

const NETWORK: ReadonlyMap<string, UpstreamFailureReason> = new Map([
  ['ENOTFOUND', 'dns_not_found'],
  ['EAI_NONAME', 'dns_not_found'],
  ['EAI_AGAIN', 'dns_unavailable'],
  ['ECONNREFUSED', 'refused'],
  ['ETIMEDOUT', 'timeout'],
]);

function reasonOfServer(sqlstate: string | undefined): UpstreamFailureReason {
  if (sqlstate === undefined) return 'server_error';
  if (sqlstate.startsWith('28')) return 'auth_failed';
  if (sqlstate === '3D000') return 'database_missing';
  const retryable = SERVER_RETRYABLE.get(sqlstate);
  if (retryable) return retryable;
  // Insufficient resources, operator intervention, system errors: the server's state, not the gateway's settings.
  return /^(53|57|58)/.test(sqlstate) ? 'server_unavailable' : 'server_error';
}

function reasonOf(error: UpstreamError): { reason: UpstreamFailureReason; causeCode?: string } {
  switch (error.code) {
    case 'TIMEOUT':
      return { reason: 'timeout' };
    case 'TLS_REFUSED':
      return { reason: 'tls_failed' };
    case 'AUTH_FAILED':
    case 'SERVER_ERROR': {
      const sqlstate = error.details.sqlstate;
      return { reason: error.code === 'AUTH_FAILED' ? 'auth_failed' : reasonOfServer(sqlstate), ...(sqlstate ? { causeCode: sqlstate } : {}) };
    }
    case 'AUTH_UNSUPPORTED':
      return { reason: 'auth_unsupported' };
    case 'PROTOCOL_ERROR':
      return { reason: 'protocol_error' };
    case 'CONNECT_FAILED': {
      const system = (error.cause as NodeJS.ErrnoException | undefined)?.code;
      return { reason: (system === undefined ? undefined : NETWORK.get(system)) ?? 'unreachable', ...(system ? { causeCode: system } : {}) };
    }
  }
}

const POOL_REASONS: Readonly<Record<PoolError['code'], UpstreamFailureReason>> = { ACQUIRE_TIMEOUT: 'pool_timeout', OWNER_LIMIT: 'owner_limit', CLOSED: 'pool_closed' };

/** A failure of `reason`, with what the operator should read about it; `region` names the region a relay link was for. */
export function upstreamFailure(reason: UpstreamFailureReason, cause: string, causeCode?: string, region?: string): UpstreamFailure {
  const kind = region === undefined ? KINDS[reason] : { ...KINDS[reason], says: KINDS[reason].says.replace('REGION', region) };
  const upstreamState = causeCode && /^[0-9A-Z]{5}$/.test(causeCode) && causeCode !== kind.sqlstate ? ` (upstream SQLSTATE ${causeCode})` : '';
  const advice = reason === 'owner_limit' ? '' : ` ${kind.retryable ? RETRY : NOT_RETRYABLE}`;
  return {
    reason,
    retryable: kind.retryable,
    sqlstate: kind.sqlstate,
    message: `${kind.says.replace(/\.$/, `${upstreamState}.`)}${advice}`,
    cause,
    ...(causeCode ? { causeCode } : {}),
  };
}

/** Classifies what acquiring an upstream connection (or connecting) threw; anything unknown is a lost connection, retryable. */
export function classifyUpstreamFailure(error: unknown): UpstreamFailure {
  if (error instanceof UpstreamError) {
    const { reason, causeCode } = reasonOf(error);
    return upstreamFailure(reason, error.message, causeCode);
  }
  if (error instanceof RelayError) return upstreamFailure(error.reason, error.message, undefined, error.region);
  if (error instanceof PoolError) return upstreamFailure(POOL_REASONS[error.code], error.message);
  // An acquirer's own deadline (AbortSignal.timeout) passed while it waited.
  if (error instanceof DOMException && error.name === 'TimeoutError') return upstreamFailure('pool_timeout', error.message);
  return upstreamFailure('connection_lost', error instanceof Error ? error.message : String(error));
}

/** The fields of a log line about a failure: reason and cause once, no stack, no cause chain repeated. */
export function failureLogFields(failure: UpstreamFailure): Record<string, unknown> {
  return { reason: failure.reason, retryable: failure.retryable, sqlstate: failure.sqlstate, cause: failure.cause, ...(failure.causeCode ? { cause_code: failure.causeCode } : {}) };
}
