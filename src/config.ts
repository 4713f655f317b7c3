import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';
import { parseOperatorTokens } from './auth/operators.js';
import { parseKeyring } from './crypto/seal.js';
import { parseCidrList } from './net/cidr.js';
import { parseDnsServers } from './domains/dns.js';
import { parsePrices } from './payments/prices.js';
import { parseSsoProviders } from './identity/sso.js';
import { parseAllowedNetworks } from './webhooks/networks.js';
import { parseRegionPeers, parseRelaySecret } from './net/relay-config.js';
import type { ReplicaOptions } from '../proxy/server.js';

const port = z.coerce.number({ message: 'expected a port number' }).int('expected a port number').min(1, 'expected a port number from 1 to 65535').max(65535, 'expected a port number from 1 to 65535');
const postgresUrl = z.url({ protocol: /^postgres(ql)?$/, message: 'expected a postgresql:// URL' });

/** A string `parse` accepts; what it throws on refusal is quoted after `expected`. */
function parsedBy(parse: (spec: string) => unknown, expected: string) {
  return z.string().superRefine((spec, ctx) => {
    try {
      parse(spec);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: `${expected} (${(error as Error).message})` });
    }
  });
}

/** Every environment variable pgward reads, validated once at start. */
export const ConfigSchema = z.object({
  PGWARD_STATE_URL: postgresUrl.optional(),
  EVENTSTORE_URL: z.url({ protocol: /^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover)$/, message: 'expected an esdb:// connection string' }).optional(),
  NATS_URL: z.url({ protocol: /^(nats|tls)$/, message: 'expected a nats:// URL' }).optional(),
  PGWARD_NATS_STREAM: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected a JetStream stream name').default('PGWARD_DECISIONS'),
  PGWARD_NATS_SUBJECT: z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'expected a subject prefix such as pgward.decisions').default('pgward.decisions'),
  PGWARD_DATA_DIR: z.string().min(1, 'expected a directory path').default('./.pgward'),
  PGWARD_HTTP_PORT: port.default(8080),
  PGWARD_PROXY_PORT: port.default(6432),
  PGWARD_EMBEDDED_PG_PORT: port.default(54329),
  PGWARD_LISTEN_HOST: z.string().min(1, 'expected a host address').default('127.0.0.1'),
  PGWARD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  PGWARD_PUBLIC_HOST: z.string().regex(/^[A-Za-z0-9.-]{1,253}$/, 'expected a host name').default('localhost'),
  PGWARD_PUBLIC_MCP_URL: z.url({ protocol: /^https?$/, message: 'expected the http(s) URL agents reach the hosted MCP at' }).optional(),
  PGWARD_PUBLIC_URL: z.url({ protocol: /^https?$/, message: 'expected the http(s) origin people and OAuth clients reach the API at' }).optional(),
  PGWARD_SSO_PROVIDERS: parsedBy(parseSsoProviders, 'expected a JSON array of OIDC {provider_id, discovery_url, client_id, client_secret, scopes?} and SAML {kind: "saml", provider_id, entry_point, idp_entity_id, idp_certificate, sp_entity_id?, audience?} providers').optional(),
  PGWARD_MASTER_KEY: parsedBy(parseKeyring, 'expected a base64 32-byte key or kid:base64key entries, current first')
    .optional(),
  PGWARD_JWKS_URL: z.url({ protocol: /^https?$/, message: 'expected an http(s) URL of a JWKS' }).optional(),
  PGWARD_JWT_ISSUER: z.string().min(1, 'expected the issuer JWTs carry').optional(),
  PGWARD_JWT_AUDIENCE: z.string().min(1, 'expected the audience JWTs carry').optional(),
  PGWARD_TLS_CERT: z.string().min(1, 'expected the path of a PEM certificate').optional(),
  PGWARD_TLS_KEY: z.string().min(1, 'expected the path of a PEM private key').optional(),
  PGWARD_TLS_CA: z.string().min(1, 'expected the path of a PEM CA certificate').optional(),
  PGWARD_DNS_SERVERS: parsedBy(parseDnsServers, 'expected comma-separated IP addresses, each with an optional :port').optional(),
  PGWARD_DOMAIN_CERT_DIR: z.string().min(1, 'expected a directory path').optional(),
  PGWARD_MAX_MESSAGE_BYTES: z.coerce.number({ message: 'expected a byte count' }).int('expected a byte count').min(1024, 'expected at least 1024').max(1024 * 1024 * 1024, 'expected at most 1 GiB').default(64 * 1024 * 1024),
  PGWARD_APPROVAL_STREAM_HEARTBEAT_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(100, 'expected at least 100').max(300_000, 'expected at most 300000').default(15_000),
  PGWARD_DRAIN_TIMEOUT_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(0, 'expected at least 0').max(600_000, 'expected at most 600000').default(10_000),
  PGWARD_REPLICA_CHECK_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(100, 'expected at least 100').max(600_000, 'expected at most 600000').default(2_000),
  PGWARD_REPLICA_MAX_LAG_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(0, 'expected at least 0').max(3_600_000, 'expected at most 3600000').default(10_000),
  PGWARD_REPLICA_FAILURES: z.coerce.number({ message: 'expected a count' }).int('expected a count').min(1, 'expected at least 1').max(100, 'expected at most 100').default(3),
  PGWARD_REPLICA_SUCCESSES: z.coerce.number({ message: 'expected a count' }).int('expected a count').min(1, 'expected at least 1').max(100, 'expected at most 100').default(2),
  PGWARD_READ_YOUR_WRITES_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(0, 'expected at least 0').max(600_000, 'expected at most 600000').default(5_000),
  PGWARD_LOGIN_TIMEOUT_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(1_000, 'expected at least 1000').max(600_000, 'expected at most 600000').default(60_000),
  PGWARD_REGION: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'expected a region name such as local or eu-west-1').default('local'),
  PGWARD_REGION_PEERS: parsedBy(parseRegionPeers, 'expected a JSON object of region → {"host", "port", "fingerprint": "sha256:<64 hex>"} or {"host", "port", "ca": "<PEM file>"}').optional(),
  PGWARD_RELAY_PORT: port.optional(),
  PGWARD_RELAY_CERT: z.string().min(1, 'expected the path of a PEM certificate').optional(),
  PGWARD_RELAY_KEY: z.string().min(1, 'expected the path of a PEM private key').optional(),
  PGWARD_RELAY_SECRET: parsedBy(parseRelaySecret, 'expected at least 32 random bytes as base64url').optional(),
  PGWARD_RELAY_SECRET_PREVIOUS: parsedBy(parseRelaySecret, 'expected at least 32 random bytes as base64url').optional(),
  PGWARD_ENROLL_TOKEN: z.string().regex(/^pgw_enr_[A-Za-z0-9_-]{43}$/, 'expected a self-host enrollment token (pgw_enr_...)').optional(),
  PGWARD_CONTROL_PLANE_URL: z.url({ protocol: /^https?$/, message: 'expected the http(s) URL of the control plane’s API' }).optional(),
  PGWARD_PROXY_ID: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, 'expected a proxy id').optional(),
  PGWARD_AUDIT_HMAC_KEYS: parsedBy(parseKeyring, 'expected kid:base64secret entries of 32-byte secrets, current first')
    .optional(),
  PGWARD_AUDIT_CHECKPOINT_EVERY: z.coerce.number({ message: 'expected a whole number of entries' }).int('expected a whole number of entries').min(1, 'expected at least 1').default(1000),
  PGWARD_AUDIT_ANCHOR_KEY: z.string().min(1, 'expected the path of an Ed25519 private key (PKCS#8 PEM)').optional(),
  PGWARD_RATE_LIMIT_PER_MINUTE: z.coerce.number({ message: 'expected a whole number' }).int('expected a whole number').min(1, 'expected at least 1').default(6000),
  PGWARD_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: z.coerce.number({ message: 'expected a whole number' }).int('expected a whole number').min(1, 'expected at least 1').default(12000),
  PGWARD_DEMO: z.enum(['on', 'off'], { message: 'expected on or off' }).optional(),
  PGWARD_DEMO_TTL_SECONDS: z.coerce.number({ message: 'expected seconds' }).int('expected seconds').min(10, 'expected at least 10').max(86_400, 'expected at most 86400').default(900),
  PGWARD_DEMO_MAX_CREDENTIALS: z.coerce.number({ message: 'expected a whole number' }).int('expected a whole number').min(1, 'expected at least 1').max(10_000, 'expected at most 10000').default(50),
  PGWARD_WEBHOOK_ALLOWED_NETWORKS: parsedBy(parseAllowedNetworks, 'expected comma-separated CIDR ranges and the word public')
    .default('public'),
  PGWARD_WEBHOOK_TIMEOUT_MS: z.coerce.number({ message: 'expected milliseconds' }).int('expected milliseconds').min(100, 'expected at least 100').max(60_000, 'expected at most 60000').default(10_000),
  PGWARD_WEBHOOK_RETRY_HORIZON_SECONDS: z.coerce.number({ message: 'expected seconds' }).int('expected seconds').min(1, 'expected at least 1').max(604_800, 'expected at most 604800').default(86_400),
  PGWARD_PROXY_PROTOCOL_TRUSTED: parsedBy(parseCidrList, 'expected comma-separated addresses or CIDR ranges of the load balancers that send PROXY protocol v2 headers').optional(),
  PGWARD_HTTP_TRUSTED_PROXIES: parsedBy(parseCidrList, 'expected comma-separated addresses or CIDR ranges of the reverse proxies whose X-Forwarded-For is believed').optional(),
  PGWARD_OPERATOR_TOKENS: parsedBy(parseOperatorTokens, 'expected name:sha256hex entries of operator tokens (pgward admin operator-token --name NAME)').optional(),
  PGWARD_PRICES: parsedBy(parsePrices, 'expected comma-separated operationId[:variant]=amount entries, amounts in base units of PGWARD_PAYMENT_CURRENCY').optional(),
  PGWARD_PAYMENT_CURRENCY: z.string().regex(/^[a-z]{3}$/, 'expected a lowercase ISO 4217 code such as usd').default('usd'),
  PGWARD_PAYMENT_CHALLENGE_TTL_SECONDS: z.coerce.number({ message: 'expected seconds' }).int('expected seconds').min(10, 'expected at least 10').max(3600, 'expected at most 3600').default(300),
  PGWARD_DEMO_VENDS_PER_ADDRESS_PER_HOUR: z.coerce.number({ message: 'expected a whole number' }).int('expected a whole number').min(1, 'expected at least 1').default(20),
});
export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    readonly expected: string,
  ) {
    super(`invalid configuration: ${variable} ${expected}`);
  }
}

/** Reads the file `variable` names; one that cannot be read is that variable's configuration error. */
export async function readConfiguredFile(variable: string, path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new ConfigError(variable, `names a file that cannot be read: ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

/** The relay's variables that only make sense together (docs/regions.md). */
function relayChecks(config: Config): void {
  const relays = config.PGWARD_REGION_PEERS !== undefined || config.PGWARD_RELAY_PORT !== undefined;
  if (relays && !config.PGWARD_RELAY_SECRET) throw new ConfigError('PGWARD_RELAY_SECRET', 'must be set when PGWARD_REGION_PEERS or PGWARD_RELAY_PORT is');
  if (Boolean(config.PGWARD_RELAY_CERT) !== Boolean(config.PGWARD_RELAY_KEY)) throw new ConfigError('PGWARD_RELAY_CERT', 'must be set together with PGWARD_RELAY_KEY');
  if (config.PGWARD_RELAY_SECRET_PREVIOUS && !config.PGWARD_RELAY_SECRET) throw new ConfigError('PGWARD_RELAY_SECRET_PREVIOUS', 'is set only with PGWARD_RELAY_SECRET');
  if (config.PGWARD_REGION_PEERS && parseRegionPeers(config.PGWARD_REGION_PEERS).has(config.PGWARD_REGION)) {
    throw new ConfigError('PGWARD_REGION_PEERS', `names this proxy's own region ${config.PGWARD_REGION}: its databases are reached directly`);
  }
}

/** Reads the configuration from `env`; empty strings count as unset. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const keys = Object.keys(ConfigSchema.shape) as (keyof Config)[];
  const input = Object.fromEntries(keys.map((key) => [key, env[key] === '' ? undefined : env[key]]));
  const parsed = ConfigSchema.safeParse(input);
  if (parsed.success) {
    const jwt = [parsed.data.PGWARD_JWKS_URL, parsed.data.PGWARD_JWT_ISSUER, parsed.data.PGWARD_JWT_AUDIENCE];
    if (jwt.some(Boolean) && !jwt.every(Boolean)) throw new ConfigError('PGWARD_JWKS_URL', 'must be set together with PGWARD_JWT_ISSUER and PGWARD_JWT_AUDIENCE');
    if (Boolean(parsed.data.PGWARD_TLS_CERT) !== Boolean(parsed.data.PGWARD_TLS_KEY)) throw new ConfigError('PGWARD_TLS_CERT', 'must be set together with PGWARD_TLS_KEY');
    if (parsed.data.PGWARD_TLS_CA && !parsed.data.PGWARD_TLS_CERT) throw new ConfigError('PGWARD_TLS_CA', 'is set only with PGWARD_TLS_CERT and PGWARD_TLS_KEY (a generated certificate’s CA is in the data directory)');
    relayChecks(parsed.data);
    return parsed.data;
  }
  const issue = parsed.error.issues[0]!;
  // The value itself is not echoed: a URL variable may carry a password.
  throw new ConfigError(String(issue.path[0]), issue.message);
}

/** The proxy's TLS files as proxy/tls.ts takes them (the data directory holds generated ones). */
export function tlsFiles(config: Config): { certFile: string | undefined; keyFile: string | undefined; caFile: string | undefined; dataDir: string } {
  return { certFile: config.PGWARD_TLS_CERT, keyFile: config.PGWARD_TLS_KEY, caFile: config.PGWARD_TLS_CA, dataDir: resolve(config.PGWARD_DATA_DIR) };
}

/** The origin of the API as people and OAuth clients reach it: the identity server's issuer is `{this}/api/auth`. */
export function publicUrl(config: Config): string {
  return new URL(config.PGWARD_PUBLIC_URL ?? `http://${config.PGWARD_PUBLIC_HOST}:${config.PGWARD_HTTP_PORT}`).origin;
}

/** This process's name on the decision bus and in audit entries: PGWARD_PROXY_ID, else the host name and process id. */
/** How replicas are probed and how long reads stay on the primary after a write (docs/replicas.md): the proxy's and the hosted MCP's. */
export function replicaSettings(config: Config): ReplicaOptions {
  return {
    checkIntervalMs: config.PGWARD_REPLICA_CHECK_MS,
    thresholds: { failuresToEject: config.PGWARD_REPLICA_FAILURES, successesToRestore: config.PGWARD_REPLICA_SUCCESSES, maxLagMs: config.PGWARD_REPLICA_MAX_LAG_MS },
    readYourWritesMs: config.PGWARD_READ_YOUR_WRITES_MS,
  };
}

export function instanceId(config: Config): string {
  return config.PGWARD_PROXY_ID ?? `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_.:-]/g, '-').slice(0, 64);
}
