import { describe, expect, it } from 'vitest';
import { UpstreamError } from '../../proxy/upstream/connection.js';
import { placementOf } from '../../proxy/decision-record.js';
import { RelayError } from '../../proxy/relay/relay-error.js';
import { classifyUpstreamFailure, upstreamFailure, upstreamRule, type UpstreamFailureReason } from '../../proxy/upstream/failure.js';
import { PoolError } from '../../proxy/upstream/pool.js';

const LABEL = 'upstream app@db.internal:5432/shop';
const network = (code: string): UpstreamError => new UpstreamError('CONNECT_FAILED', `${LABEL}: ${code}`, {}, { cause: Object.assign(new Error(code), { code }) });
const server = (sqlstate: string): UpstreamError => new UpstreamError('SERVER_ERROR', `${LABEL}: refused (SQLSTATE ${sqlstate})`, { sqlstate, serverMessage: 'refused' });

describe('classifyUpstreamFailure', () => {
  it.each<[string, unknown, UpstreamFailureReason, boolean, string]>([
    ['a name that does not exist', network('ENOTFOUND'), 'dns_not_found', false, '08004'],
    ['a resolver that did not answer', network('EAI_AGAIN'), 'dns_unavailable', true, '08006'],
    ['a refused connection', network('ECONNREFUSED'), 'refused', true, '08006'],
    ['a reset connection', network('ECONNRESET'), 'unreachable', true, '08006'],
    ['a server that closed the connection', new UpstreamError('CONNECT_FAILED', `${LABEL}: the server closed the connection`), 'unreachable', true, '08006'],
    ['no answer in time', new UpstreamError('TIMEOUT', `${LABEL}: no answer within 5000 ms`), 'timeout', true, '08006'],
    ['TLS refused or failed', new UpstreamError('TLS_REFUSED', `${LABEL}: TLS handshake failed: self-signed certificate`), 'tls_failed', false, '08004'],
    ['a wrong password', new UpstreamError('AUTH_FAILED', `${LABEL}: password authentication failed (SQLSTATE 28P01)`, { sqlstate: '28P01' }), 'auth_failed', false, '08004'],
    ['a server that does not know the password', new UpstreamError('AUTH_FAILED', `${LABEL}: the server's SCRAM signature is wrong`), 'auth_failed', false, '08004'],
    ['an unsupported method', new UpstreamError('AUTH_UNSUPPORTED', `${LABEL}: GSSAPI`), 'auth_unsupported', false, '08004'],
    ['a missing database', server('3D000'), 'database_missing', false, '08004'],
    ['a full server', server('53300'), 'too_many_connections', true, '53300'],
    ['a server starting up or shutting down', server('57P03'), 'server_unavailable', true, '57P03'],
    ['a server out of memory', server('53200'), 'server_unavailable', true, '57P03'],
    ['a bad startup parameter', server('22023'), 'server_error', false, '08004'],
    ['not PostgreSQL', new UpstreamError('PROTOCOL_ERROR', `${LABEL}: unexpected message type "H"`), 'protocol_error', false, '08004'],
    ['a busy pool', new PoolError('ACQUIRE_TIMEOUT', 'no connection free within 5000 ms'), 'pool_timeout', true, '08006'],
    ['a credential at its share', new PoolError('OWNER_LIMIT', 'held 2'), 'owner_limit', true, '53300'],
    ['a closed pool', new PoolError('CLOSED', 'closed'), 'pool_closed', true, '08006'],
    ['an acquirer’s own deadline', new DOMException('The operation was aborted due to timeout', 'TimeoutError'), 'pool_timeout', true, '08006'],
  ])('%s', (_name, error, reason, retryable, sqlstate) => {
    const failure = classifyUpstreamFailure(error);
    expect({ reason: failure.reason, retryable: failure.retryable, sqlstate: failure.sqlstate }).toEqual({ reason, retryable, sqlstate });
    expect(failure.cause).toBe((error as Error).message);
    // The agent's words: never the operator's host, user or database, and "retry" only when it can help.
    expect(failure.message).not.toMatch(/db\.internal|app|shop|5432/);
    if (retryable) expect(failure.message).toMatch(/retry/i);
    else expect(failure.message).toMatch(/ Retrying will not help: the gateway’s operator must correct the database’s settings\.$/);
  });

  it('names the upstream server’s SQLSTATE when it differs from the one the agent gets', () => {
    expect(upstreamFailure('auth_failed', 'x', '28P01').message).toBe(
      'the gateway could not log in to this credential’s database: the database refused the login the gateway is configured with (upstream SQLSTATE 28P01). Retrying will not help: the gateway’s operator must correct the database’s settings.',
    );
    expect(upstreamFailure('too_many_connections', 'x', '53300').message).toBe('this credential’s database has no connection slots free. Retry shortly.');
    expect(upstreamFailure('refused', 'x', 'ECONNREFUSED').message).toBe('the gateway cannot reach this credential’s database: the connection was refused (the server may be down or restarting). Retry shortly.');
  });
});

describe('no relay link to the database’s region (docs/regions.md#failing-closed)', () => {
  const detail = 'relay to region eu-west-1 (relay.eu.internal:7432): the peer refused the link (bad_proof)';
  it.each<[UpstreamFailureReason, string, boolean, string]>([
    ['no_peer', '58000', false, 'this credential’s database is kept in region eu-west-1, and the gateway has no link configured to that region’s data plane.'],
    ['peer_unreachable', '08001', true, 'this credential’s database is kept in region eu-west-1, and the gateway cannot reach that region’s data plane just now.'],
    ['peer_untrusted', '08004', false, 'this credential’s database is kept in region eu-west-1, and that region’s data plane did not prove its identity as configured.'],
    ['peer_refused', '08004', false, 'this credential’s database is kept in region eu-west-1, and that region’s data plane refused the gateway’s link.'],
    ['peer_no_upstream', '08001', true, 'this credential’s database is kept in region eu-west-1, and that region’s data plane has no connection to it free just now.'],
  ])('%s: %s under rule region.%s, naming the region and nothing of the link', (reason, sqlstate, retryable, says) => {
    const failure = classifyUpstreamFailure(new RelayError(reason as RelayError['reason'], 'eu-west-1', detail));
    expect({ reason: failure.reason, sqlstate: failure.sqlstate, retryable: failure.retryable, cause: failure.cause }).toEqual({ reason, sqlstate, retryable, cause: detail });
    expect(failure.message.startsWith(says)).toBe(true);
    expect(failure.message).not.toMatch(/relay\.eu|7432|bad_proof/);
    expect(upstreamRule(failure)).toBe(`region.${reason}`);
  });

  it('leaves the rules of the database’s own failures as they were', () => {
    expect(upstreamRule(classifyUpstreamFailure(network('ECONNREFUSED')))).toBe('upstream.refused');
  });

  it('places a relayed statement on the relay, in the peer’s region; a refused one nowhere', () => {
    expect(placementOf(true, 'miss', 'a', { relayedTo: 'b' })).toEqual({ ran_on: 'relay', replica_id: null, upstream_region: 'b' });
    expect(placementOf(true, 'hit', 'a', { relayedTo: 'b' })).toEqual({ ran_on: 'cache', replica_id: null, upstream_region: null });
    expect(placementOf(false, undefined, 'a', { relayedTo: 'b' })).toEqual({ ran_on: null, replica_id: null, upstream_region: null });
  });

  it('places a relayed read the peer ran on one of its replicas on that replica, in the peer’s region', () => {
    expect(placementOf(true, 'bypass', 'a', { relayedTo: 'b', replicaId: 'rep_1' })).toEqual({ ran_on: 'replica', replica_id: 'rep_1', upstream_region: 'b' });
    expect(placementOf(true, 'bypass', 'a', { replicaId: 'rep_1' })).toEqual({ ran_on: 'replica', replica_id: 'rep_1', upstream_region: 'a' });
  });
});
