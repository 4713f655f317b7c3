import type { Budgets } from '../proxy/budgets.js';
import type { Fanout } from './bus/fanout.js';
import { resolve } from 'node:path';
import type pg from 'pg';
import { apiKeysProjection } from '../projections/api-keys.js';
import type { Projection } from '../projections/projection.js';
import { awaitApplied, awaitCaughtUp } from '../projections/maintenance.js';
import { findActiveApiKeyByHash } from '../queries/api-keys.js';
import { decodeJwt } from 'jose';
import { createJwtVerifier, JwtRejected, type JwtCaller, type JwtVerifier } from './auth/jwt.js';
import { identityPlane, type IdentityPlane } from './identity/plane.js';
import { operatorOf, parseOperatorTokens } from './auth/operators.js';
import type { DecisionBus } from './bus/port.js';
import { demoSettings } from './demo/settings.js';
import { creditLedgerVerifier } from './payments/credit-ledger.js';
import { paymentSettings } from './payments/prices.js';
import { ConfigError, instanceId, replicaSettings, tlsFiles, type Config } from './config.js';
import { publishedCaFile } from '../proxy/tls.js';
import { DomainCertificates } from './domains/certificates.js';
import { parseDnsServers } from './domains/dns.js';
import { loadOrCreateKeyringFile, openSecret, parseKeyring, sealBlob, type Keyring } from './crypto/seal.js';
import { sha256Hex } from './crypto/tokens.js';
import type { ControlPlane } from './http/app.js';
import type { ApiDeps } from './http/routes/support.js';
import type { Authenticators, Caller, Role } from './http/plugins/auth.js';
import { Problem } from './http/problem.js';
import type { Logger } from './logger.js';
import type { StateDatabase } from './state.js';
import type { EventStore } from './store/port.js';
import { HashKeys } from '../proxy/hash-keys.js';
import type { RelayLinks } from '../proxy/relay/options.js';

/** How long a write waits for its read models before answering anyway. */
const SETTLE_MS = 2_000;

/** How long an API-key lookup waits for the key projection before answering 401 (read-your-writes for new keys). */
const KEY_FRESHNESS_MS = 2_000;

/**
 * The keyring that seals upstream passwords and stored responses: PGWARD_MASTER_KEY, or for the
 * embedded default a key generated once into the data directory. A shared state database without
 * PGWARD_MASTER_KEY is refused: processes would each make their own key.
 */
export async function loadKeyring(config: Config, state: StateDatabase): Promise<Keyring> {
  if (config.PGWARD_MASTER_KEY) return parseKeyring(config.PGWARD_MASTER_KEY);
  if (state.source === 'PGWARD_STATE_URL') throw new ConfigError('PGWARD_MASTER_KEY', 'is required when PGWARD_STATE_URL is set (a base64 32-byte key: openssl rand -base64 32)');
  return loadOrCreateKeyringFile(resolve(config.PGWARD_DATA_DIR, 'master.key'));
}

/** A rejected JWT as the API answers it: 503 when the provider's keys cannot be had, else 401. */
async function verified(verifier: JwtVerifier, token: string): Promise<JwtCaller> {
  try {
    return await verifier.verify(token);
  } catch (error) {
    if (error instanceof JwtRejected && error.reason === 'JWKS_UNAVAILABLE') {
      throw new Problem('SERVICE_UNAVAILABLE', 'the identity provider’s keys cannot be fetched; retry shortly', { headers: { 'retry-after': '5' } });
    }
    if (error instanceof JwtRejected) throw new Problem('UNAUTHORIZED', `the JWT was rejected: ${error.message}`, { headers: { 'www-authenticate': 'Bearer realm="pgward", error="invalid_token"' } });
    throw error;
  }
}

/** The issuer a JWT claims, unverified: only which verifier to ask depends on it. */
function claimedIssuer(token: string): string | undefined {
  try {
    return decodeJwt(token).iss;
  } catch {
    return undefined;
  }
}

function authenticators(config: Config, store: EventStore, pool: pg.Pool, identity: IdentityPlane): Authenticators {
  const lookup = async (hash: string): Promise<Caller | undefined> => {
    const row = await findActiveApiKeyByHash(pool, hash);
    return row ? { kind: 'api_key', keyId: row.key_id, orgId: row.org_id, role: row.role as Role } : undefined;
  };
  const external =
    config.PGWARD_JWKS_URL && config.PGWARD_JWT_ISSUER && config.PGWARD_JWT_AUDIENCE
      ? createJwtVerifier({ jwks: config.PGWARD_JWKS_URL, issuer: config.PGWARD_JWT_ISSUER, audience: config.PGWARD_JWT_AUDIENCE })
      : undefined;
  const operators = parseOperatorTokens(config.PGWARD_OPERATOR_TOKENS ?? '');
  return {
    operator: (token) => operatorOf(token, operators),
    async apiKey(token) {
      const hash = sha256Hex(token);
      const found = await lookup(hash);
      if (found) return found;
      return (await awaitCaughtUp(store, pool, apiKeysProjection, KEY_FRESHNESS_MS)) ? lookup(hash) : undefined;
    },
    // This deployment's own tokens are told apart by their issuer; any other JWT goes to the external provider, when one is configured.
    async jwt(token, named) {
      if (external && claimedIssuer(token) !== identity.issuer) return verified(external, token);
      return identity.person(await verified(identity.tokens, token), named);
    },
    session: identity.session,
    origin: identity.publicUrl,
  };
}

export function controlPlane(
  config: Config,
  keyring: Keyring,
  store: EventStore,
  pool: pg.Pool,
  logger: Logger,
  projections: readonly Projection[],
  audit: ApiDeps['audit'],
  bus: DecisionBus,
  budgets?: Budgets,
  cacheFanout?: Fanout,
  relay?: RelayLinks,
): ControlPlane {
  const demo = demoSettings(config);
  const payments = paymentSettings(config);
  const now = () => new Date();
  const identity = identityPlane(config, keyring, store, pool, logger);
  const proxyCaFile = publishedCaFile(tlsFiles(config));
  const settle = async (stream: string, position: bigint): Promise<void> => {
    if (!(await awaitApplied(pool, projections, stream, position, SETTLE_MS))) logger.warn({ stream, position: String(position) }, 'read models did not apply a write in time; is the projector running?');
  };
  return {
    deps: {
      store,
      pool,
      keyring,
      hashKeys: new HashKeys(store, keyring, 'control-plane'),
      publicHost: config.PGWARD_PUBLIC_HOST,
      // The embedded default serves the hosted MCP on its own HTTP port; deployments behind TLS set the URL.
      mcpUrl: config.PGWARD_PUBLIC_MCP_URL ?? `http://${config.PGWARD_PUBLIC_HOST}:${config.PGWARD_HTTP_PORT}/mcp`,
      proxyPort: config.PGWARD_PROXY_PORT,
      approvalStreamHeartbeatMs: config.PGWARD_APPROVAL_STREAM_HEARTBEAT_MS,
      now,
      settle,
      audit,
      // A publisher id of its own: the proxy of this process numbers its decisions separately.
      decisions: { bus, publisherId: `${instanceId(config).slice(0, 60)}:mcp`, region: config.PGWARD_REGION },
      ...(budgets ? { budgets } : {}),
      ...(cacheFanout ? { cacheFanout } : {}),
      ...(relay ? { relay } : {}),
      replicas: replicaSettings(config),
      ...(demo ? { demo } : {}),
      ...(payments ? { payments } : {}),
      ...(proxyCaFile ? { proxyCaFile } : {}),
      domains: {
        ...(config.PGWARD_DNS_SERVERS ? { dnsServers: parseDnsServers(config.PGWARD_DNS_SERVERS) } : {}),
        ...(config.PGWARD_DOMAIN_CERT_DIR ? { certificates: new DomainCertificates(config.PGWARD_DOMAIN_CERT_DIR, (domain, error) => logger.warn({ err: error, domain }, 'a custom domain’s certificate is unusable'), 0) } : {}),
      },
    },
    authenticators: authenticators(config, store, pool, identity),
    identity,
    rateLimits: { perCredential: config.PGWARD_RATE_LIMIT_PER_MINUTE, perAddress: config.PGWARD_RATE_LIMIT_PER_ADDRESS_PER_MINUTE, windowSeconds: 60 },
    sealer: { seal: (body, aad) => JSON.stringify(sealBlob(body, keyring, aad)), open: (stored, aad) => openSecret(JSON.parse(stored), keyring, aad) },
    // Another payment provider plugs in here: a PaymentVerifier for its method (docs/payments.md).
    ...(payments ? { verifier: creditLedgerVerifier(store, now, settle) } : {}),
  };
}
