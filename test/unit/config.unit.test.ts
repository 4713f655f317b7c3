import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { parseRegionPeers, parseRelaySecret } from '../../src/net/relay-config.js';

function refusal(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('configuration', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).toEqual({
      PGWARD_DATA_DIR: './.pgward',
      PGWARD_HTTP_PORT: 8080,
      PGWARD_PROXY_PORT: 6432,
      PGWARD_EMBEDDED_PG_PORT: 54329,
      PGWARD_LISTEN_HOST: '127.0.0.1',
      PGWARD_LOG_LEVEL: 'info',
      PGWARD_PUBLIC_HOST: 'localhost',
      PGWARD_RATE_LIMIT_PER_MINUTE: 6000,
      PGWARD_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: 12000,
      PGWARD_MAX_MESSAGE_BYTES: 67108864,
      PGWARD_LOGIN_TIMEOUT_MS: 60000,
      PGWARD_APPROVAL_STREAM_HEARTBEAT_MS: 15000,
      PGWARD_DRAIN_TIMEOUT_MS: 10000,
      PGWARD_REPLICA_CHECK_MS: 2000,
      PGWARD_REPLICA_MAX_LAG_MS: 10000,
      PGWARD_REPLICA_FAILURES: 3,
      PGWARD_REPLICA_SUCCESSES: 2,
      PGWARD_READ_YOUR_WRITES_MS: 5000,
      PGWARD_REGION: 'local',
      PGWARD_AUDIT_CHECKPOINT_EVERY: 1000,
      PGWARD_NATS_STREAM: 'PGWARD_DECISIONS',
      PGWARD_NATS_SUBJECT: 'pgward.decisions',
      PGWARD_DEMO_TTL_SECONDS: 900,
      PGWARD_DEMO_MAX_CREDENTIALS: 50,
      PGWARD_DEMO_VENDS_PER_ADDRESS_PER_HOUR: 20,
      PGWARD_PAYMENT_CURRENCY: 'usd',
      PGWARD_PAYMENT_CHALLENGE_TTL_SECONDS: 300,
      PGWARD_WEBHOOK_ALLOWED_NETWORKS: 'public',
      PGWARD_WEBHOOK_TIMEOUT_MS: 10000,
      PGWARD_WEBHOOK_RETRY_HORIZON_SECONDS: 86400,
    });
  });

  it('names the variable and what it expects', () => {
    expect(refusal({ PGWARD_HTTP_PORT: 'abc' }).message).toBe('invalid configuration: PGWARD_HTTP_PORT expected a port number');
    expect(refusal({ PGWARD_PROXY_PORT: '0' }).variable).toBe('PGWARD_PROXY_PORT');
    expect(refusal({ PGWARD_EMBEDDED_PG_PORT: '65536' }).message).toBe('invalid configuration: PGWARD_EMBEDDED_PG_PORT expected a port number from 1 to 65535');
    expect(refusal({ PGWARD_DRAIN_TIMEOUT_MS: '-1' }).message).toBe('invalid configuration: PGWARD_DRAIN_TIMEOUT_MS expected at least 0');
    expect(refusal({ PGWARD_PRICES: 'createDemoCredential:pro=0' }).message).toBe(
      'invalid configuration: PGWARD_PRICES expected comma-separated operationId[:variant]=amount entries, amounts in base units of PGWARD_PAYMENT_CURRENCY (the price of createDemoCredential:pro must be a whole number of base units from 1)',
    );
    expect(refusal({ PGWARD_WEBHOOK_ALLOWED_NETWORKS: 'public,10.0.0.0/40' }).message).toBe(
      'invalid configuration: PGWARD_WEBHOOK_ALLOWED_NETWORKS expected comma-separated CIDR ranges and the word public (10.0.0.0/40 has a prefix length outside 0-32)',
    );
    expect(refusal({ PGWARD_REPLICA_FAILURES: '0' }).message).toBe('invalid configuration: PGWARD_REPLICA_FAILURES expected at least 1');
    expect(refusal({ PGWARD_REPLICA_CHECK_MS: '5' }).message).toBe('invalid configuration: PGWARD_REPLICA_CHECK_MS expected at least 100');
    expect(refusal({ NATS_URL: 'http://127.0.0.1:4222' }).message).toBe('invalid configuration: NATS_URL expected a nats:// URL');
    expect(refusal({ EVENTSTORE_URL: 'postgres://x' }).variable).toBe('EVENTSTORE_URL');
    expect(refusal({ PGWARD_TLS_CA: '/etc/ca.pem' }).message).toBe('invalid configuration: PGWARD_TLS_CA is set only with PGWARD_TLS_CERT and PGWARD_TLS_KEY (a generated certificate’s CA is in the data directory)');
    expect(refusal({ PGWARD_LOG_LEVEL: 'loud' }).variable).toBe('PGWARD_LOG_LEVEL');
    expect(refusal({ PGWARD_LOGIN_TIMEOUT_MS: '10' }).message).toBe('invalid configuration: PGWARD_LOGIN_TIMEOUT_MS expected at least 1000');
    expect(refusal({ PGWARD_PROXY_PROTOCOL_TRUSTED: '10.0.0.0/8,lb.internal' }).message).toBe(
      'invalid configuration: PGWARD_PROXY_PROTOCOL_TRUSTED expected comma-separated addresses or CIDR ranges of the load balancers that send PROXY protocol v2 headers (lb.internal is not an address or CIDR range)',
    );
    expect(refusal({ PGWARD_HTTP_TRUSTED_PROXIES: '::1/200' }).message).toBe(
      'invalid configuration: PGWARD_HTTP_TRUSTED_PROXIES expected comma-separated addresses or CIDR ranges of the reverse proxies whose X-Forwarded-For is believed (::1/200 has a prefix length outside 0-128)',
    );
  });

  it('requires the three JWT variables together', () => {
    expect(refusal({ PGWARD_JWKS_URL: 'https://id.example/jwks' }).message).toBe('invalid configuration: PGWARD_JWKS_URL must be set together with PGWARD_JWT_ISSUER and PGWARD_JWT_AUDIENCE');
    expect(loadConfig({ PGWARD_JWKS_URL: 'https://id.example/jwks', PGWARD_JWT_ISSUER: 'https://id.example', PGWARD_JWT_AUDIENCE: 'pgward' }).PGWARD_JWT_AUDIENCE).toBe('pgward');
  });

  it('never echoes a value, which may hold a password', () => {
    expect(refusal({ PGWARD_STATE_URL: 'mysql://user:hunter2@host/db' }).message).not.toContain('hunter2');
  });

  it('accepts the production settings and treats empty strings as unset', () => {
    const config = loadConfig({ PGWARD_STATE_URL: 'postgresql://u:p@db:5432/pgward', EVENTSTORE_URL: 'esdb://es:2113?tls=false', NATS_URL: 'nats://nats:4222', PGWARD_HTTP_PORT: '' });
    expect(config.PGWARD_STATE_URL).toBe('postgresql://u:p@db:5432/pgward');
    expect(config.EVENTSTORE_URL).toBe('esdb://es:2113?tls=false');
    expect(config.PGWARD_HTTP_PORT).toBe(8080);
  });
});

describe('relay configuration (docs/regions.md)', () => {
  const secret = Buffer.alloc(32, 5).toString('base64url');
  const pin = `sha256:${'ab'.repeat(32)}`;

  it('reads the peers by region, pinned or by CA', () => {
    const peers = parseRegionPeers(JSON.stringify({ b: { host: 'relay.b.internal', port: 7432, fingerprint: pin }, 'eu-west-1': { host: '10.0.0.5', port: 7432, ca: '/etc/pgward/relay-ca.pem' } }));
    expect(peers.get('b')).toEqual({ region: 'b', host: 'relay.b.internal', port: 7432, trust: { fingerprint: Buffer.from('ab'.repeat(32), 'hex') } });
    expect(peers.get('eu-west-1')).toEqual({ region: 'eu-west-1', host: '10.0.0.5', port: 7432, trust: { caFile: '/etc/pgward/relay-ca.pem' } });
    const config = loadConfig({ PGWARD_REGION: 'a', PGWARD_REGION_PEERS: JSON.stringify({ b: { host: '127.0.0.1', port: 7432, fingerprint: pin } }), PGWARD_RELAY_PORT: '7432', PGWARD_RELAY_SECRET: secret });
    expect(config.PGWARD_RELAY_PORT).toBe(7432);
    expect(parseRelaySecret(config.PGWARD_RELAY_SECRET!)).toEqual(Buffer.alloc(32, 5));
  });

  it('stops the start naming the variable: a bad region, fingerprint, both or neither of fingerprint and ca, a short secret, a missing secret', () => {
    const peers = (value: unknown) => refusal({ PGWARD_REGION_PEERS: JSON.stringify(value), PGWARD_RELAY_SECRET: secret }).message;
    const expected = 'invalid configuration: PGWARD_REGION_PEERS expected a JSON object of region → {"host", "port", "fingerprint": "sha256:<64 hex>"} or {"host", "port", "ca": "<PEM file>"}';
    expect(peers({ B: { host: 'h', port: 1, fingerprint: pin } })).toBe(`${expected} ("B" is not a region name)`);
    expect(peers({ b: { host: 'h', port: 1, fingerprint: 'sha256:abc' } })).toBe(`${expected} (region b: fingerprint expected sha256: and 64 hex digits)`);
    expect(peers({ b: { host: 'h', port: 1, fingerprint: pin, ca: '/ca.pem' } })).toBe(`${expected} (region b: give either fingerprint or ca)`);
    expect(peers({ b: { host: 'h', port: 1 } })).toBe(`${expected} (region b: give either fingerprint or ca)`);
    expect(peers([])).toBe(`${expected} (not a JSON object of regions)`);
    expect(refusal({ PGWARD_REGION_PEERS: '{', PGWARD_RELAY_SECRET: secret }).message).toBe(`${expected} (not JSON)`);
    expect(refusal({ PGWARD_REGION: 'a', PGWARD_REGION_PEERS: JSON.stringify({ a: { host: 'h', port: 1, fingerprint: pin } }), PGWARD_RELAY_SECRET: secret }).message).toBe(
      "invalid configuration: PGWARD_REGION_PEERS names this proxy's own region a: its databases are reached directly",
    );
    const short = Buffer.alloc(16, 1).toString('base64url');
    const refused = refusal({ PGWARD_RELAY_SECRET: short }).message;
    expect(refused).toBe('invalid configuration: PGWARD_RELAY_SECRET expected at least 32 random bytes as base64url (16 bytes, at least 32 are needed)');
    expect(refused).not.toContain(short);
    expect(refusal({ PGWARD_RELAY_PORT: '7432' }).message).toBe('invalid configuration: PGWARD_RELAY_SECRET must be set when PGWARD_REGION_PEERS or PGWARD_RELAY_PORT is');
    expect(refusal({ PGWARD_RELAY_SECRET: secret, PGWARD_RELAY_CERT: '/relay.pem' }).variable).toBe('PGWARD_RELAY_CERT');
    expect(refusal({ PGWARD_RELAY_SECRET_PREVIOUS: secret }).variable).toBe('PGWARD_RELAY_SECRET_PREVIOUS');
  });
});
