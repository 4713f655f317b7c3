import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

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
