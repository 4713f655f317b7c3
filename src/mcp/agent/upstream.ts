import type pg from 'pg';
import type { UpstreamCatalog } from '../../../proxy/policy/upstream-catalog.js';
import { CATALOG_TIMING, CatalogSnapshots, type CatalogUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import { Upstreams } from '../../../proxy/upstreams.js';
import type { RanUpstream } from '../../../proxy/decision-record.js';
import type { RelayOrigin } from '../../../proxy/relay/link.js';
import { acquireOrExplain, upstreamFailure, UpstreamUnavailable } from '../../../proxy/upstream/failure.js';
import type { BaseLogger } from 'pino';
import type { UpstreamChoice } from '../../../proxy/views/policy-roles.js';
import type { SandboxBranch, UpstreamHandle } from '../../../proxy/upstreams.js';
import type { UpstreamConnection } from '../../../proxy/upstream/connection.js';
import type { TokenCredential } from '../../../queries/credentials.js';
import { findDatabaseRow } from '../../../queries/databases.js';
import type { DatabaseRow } from '../../../projections/databases.js';
import type { Keyring } from '../../crypto/seal.js';
import { AgentReads, type RoutedStatement } from './reads.js';
import type { ReplicaOptions } from '../../../proxy/server.js';
import { runStatement, StatementFailed, type StatementResult, type StatementRun } from './statement.js';
import { decodeValue, type JsonValue } from './values.js';

export interface Column {
  readonly name: string;
  /** As format_type names it: `integer`, `text`, `timestamp with time zone`, ... */
  readonly type: string;
}

export interface TypedResult extends Omit<StatementResult, 'columns' | 'rows'> {
  readonly columns: readonly Column[];
  readonly rows: readonly (readonly JsonValue[])[];
}

/** The pool a request's statements run on: as the proxy chooses it, on the newest ready sandbox branch under write_mode sandbox (docs/branches.md). */
export type AgentUpstream = UpstreamChoice & { readonly branch?: SandboxBranch };

const notRegistered = (databaseId: string) => upstreamFailure('not_registered', `database ${databaseId} is not registered or not active`);

const TYPE_NAMES_SQL = 'select oid::int, format_type(oid, null) from pg_type where oid = any($1::oid[])';
const CONNECT_TIMEOUT_MS = 5_000;
const CATALOG_TIMEOUT_MS = 5_000;

/**
 * The hosted MCP's way to its credentials' databases: the proxy's own upstream pools (sealed
 * password opened per pool, read-only pools for read-only policies), fed by the databases read
 * model instead of a live view. Each statement takes a connection, runs in its own transaction and
 * gives the connection back reset (DISCARD ALL), so no session state outlives a call.
 */
export class AgentDatabases {
  private readonly upstreams: Upstreams;
  /** The databases' catalog snapshots, as the proxy keeps its own. */
  private readonly catalogs: CatalogSnapshots;
  /** Type names by OID, per database: OIDs of user types differ between databases. */
  private readonly typeNames = new Map<string, Map<number, string>>();
  /** Where reads of databases with auto_read_routing go; undefined: every statement on the primary. */
  readonly reads: AgentReads | undefined;

  /**
   * `relay` is the API process's region and links: a database kept in another region runs on that
   * region's data plane, as the proxy's do (docs/regions.md). `routing`, when given, routes reads
   * to replicas as the proxy does (docs/replicas.md).
   */
  constructor(pool: pg.Pool, keyring: Keyring, logger: Pick<BaseLogger, 'info' | 'warn'>, relay: RelayOrigin, routing?: { readonly views: ConstructorParameters<typeof AgentReads>[0]; readonly options: ReplicaOptions }) {
    this.upstreams = new Upstreams({ getOrRead: (databaseId) => findDatabaseRow(pool, databaseId) }, keyring, {
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      applicationName: 'pgward-mcp',
      logger,
      relay,
    });
    this.catalogs = new CatalogSnapshots(CATALOG_TIMING);
    this.reads = routing && new AgentReads(routing.views, this.upstreams, { ...routing.options, connectTimeoutMs: CONNECT_TIMEOUT_MS }, logger, relay.region);
    this.reads?.start();
  }

  /** The catalog snapshot of the credential's database to decide on, read first when none is fresh, or `fresh`; why there is none otherwise. */
  async catalog(credential: Pick<TokenCredential, 'database_id' | 'project_id'>, pool: AgentUpstream, fresh = false): Promise<UpstreamCatalog | CatalogUnavailable> {
    try {
      const handle = await this.upstreams.for(credential.database_id, credential.project_id, pool.readOnly, pool.role, pool.branch);
      if (!handle) return { unavailable: 'the credential’s database is no longer registered', upstream: notRegistered(credential.database_id) };
      return await this.catalogs.current(handle, fresh);
    } catch (error) {
      return { unavailable: `the credential’s database could not be looked up: ${(error as Error).message}` };
    }
  }

  /** The credential's database as its upstream pool was set up from (its cache_config among the rest); undefined when it is not registered. */
  async database(credential: Pick<TokenCredential, 'database_id' | 'project_id'>, pool: UpstreamChoice): Promise<DatabaseRow | undefined> {
    return (await this.upstreams.for(credential.database_id, credential.project_id, pool.readOnly, pool.role))?.database;
  }

  /** DDL ran (and committed) on the credential's database: its catalog is read again at once. */
  async schemaChanged(credential: Pick<TokenCredential, 'database_id' | 'project_id'>, pool: AgentUpstream): Promise<void> {
    // The timer reads it within CATALOG_TIMING.refreshMs anyway.
    const handle = await this.upstreams.for(credential.database_id, credential.project_id, pool.readOnly, pool.role, pool.branch).catch(() => undefined);
    if (handle) this.catalogs.changed(handle);
  }

  /**
   * Runs one statement on the credential's database; StatementFailed when PostgreSQL refuses it,
   * UpstreamUnavailable when it cannot be run (or its end could not be read). `beforeRun`, when
   * given, is awaited once a connection is held, right before the statement is sent, with where it
   * will run: what it throws is rethrown and nothing runs.
   */
  async run(
    credential: Pick<TokenCredential, 'credential_id' | 'database_id' | 'project_id'>,
    pool: AgentUpstream,
    run: StatementRun,
    beforeRun?: (upstream: RanUpstream) => Promise<void>,
    statement?: RoutedStatement,
  ): Promise<TypedResult> {
    const primary = await this.upstreams.for(credential.database_id, credential.project_id, pool.readOnly, pool.role, pool.branch);
    if (!primary) throw new UpstreamUnavailable(notRegistered(credential.database_id));
    // As on the wire: a statement that may write holds the credential's reads on the primary from when it is sent, and again from its end.
    const writes = statement !== undefined && !statement.readsOnly ? this.reads?.writes : undefined;
    writes?.wrote(credential.credential_id);
    try {
      return await this.runOn(primary, credential, run, beforeRun, statement);
    } finally {
      writes?.wrote(credential.credential_id);
    }
  }

  /** A connection for the statement: from the pool read routing chooses for it, or the primary's when that one gives none (as a wire read's). */
  private async connect(primary: UpstreamHandle, owner: string, statement: RoutedStatement | undefined): Promise<{ handle: UpstreamHandle; connection: UpstreamConnection }> {
    const chosen = statement && this.reads ? this.reads.poolFor(primary, owner, statement) : primary;
    if (chosen !== primary) {
      const connection = await chosen.pool.acquire({ owner }).catch(() => undefined);
      if (connection) return { handle: chosen, connection };
    }
    return { handle: primary, connection: await acquireOrExplain(primary.pool.acquire({ owner })) };
  }

  private async runOn(
    primary: UpstreamHandle,
    credential: Pick<TokenCredential, 'credential_id'>,
    run: StatementRun,
    beforeRun: ((upstream: RanUpstream) => Promise<void>) | undefined,
    statement: RoutedStatement | undefined,
  ): Promise<TypedResult> {
    const { handle, connection } = await this.connect(primary, credential.credential_id, statement);
    if (beforeRun) {
      try {
        // A relayed read the peer put on one of its replicas names it.
        await beforeRun({ relayedTo: handle.relayedTo, replicaId: handle.replicaId ?? connection.peerReplicaId });
      } catch (error) {
        void handle.pool.release(connection, { reset: false });
        throw error;
      }
    }
    try {
      // The database's own query_timeout_ms, when set, is the tighter bound.
      const limit = handle.database.query_timeout_ms;
      const result = await runStatement(connection, { ...run, timeoutMs: limit > 0 ? Math.min(limit, run.timeoutMs) : run.timeoutMs });
      const names = await this.typeNamesOf(connection, handle.database.database_id, result.columns.map((c) => c.typeOid));
      void handle.pool.release(connection, { reset: true });
      return {
        ...result,
        columns: result.columns.map((c) => ({ name: c.name, type: names.get(c.typeOid) ?? String(c.typeOid) })),
        rows: result.rows.map((row) => row.map((value, i) => decodeValue(value, result.columns[i]!.typeOid))),
      };
    } catch (error) {
      if (error instanceof StatementFailed) {
        void handle.pool.release(connection, { reset: true });
        throw error;
      }
      handle.pool.destroy(connection);
      throw new UpstreamUnavailable(upstreamFailure('connection_lost', (error as Error).message), { cause: error, mayHaveRun: true });
    }
  }

  private async typeNamesOf(connection: UpstreamConnection, databaseId: string, oids: readonly number[]): Promise<Map<number, string>> {
    let known = this.typeNames.get(databaseId);
    if (!known) this.typeNames.set(databaseId, (known = new Map()));
    const missing = [...new Set(oids)].filter((oid) => !known.has(oid));
    if (missing.length > 0) {
      const found = await runStatement(connection, { sql: TYPE_NAMES_SQL, params: [`{${missing.join(',')}}`], readOnly: true, maxRows: missing.length, timeoutMs: CATALOG_TIMEOUT_MS });
      for (const [oid, name] of found.rows) known.set(Number(oid), name ?? '');
    }
    return known;
  }

  close(): Promise<void> {
    this.reads?.stop();
    this.catalogs.close();
    return this.upstreams.close();
  }
}
