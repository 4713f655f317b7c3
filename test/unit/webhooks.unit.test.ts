import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { StatementDecided, type AuditEventKind } from '../../src/events/audit.js';
import { CredentialDisabled, CredentialRegistered } from '../../src/events/credentials.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { RecordedEvent } from '../../src/store/port.js';
import { NetworksError, parseAllowedNetworks } from '../../src/webhooks/networks.js';
import { envelopeBody, notificationOf } from '../../src/webhooks/notifications.js';
import { nextRetry, RETRY_CAP_MS } from '../../src/webhooks/retries.js';
import { newSigningSecret, signedHeaders } from '../../src/webhooks/signing.js';
import { placed } from '../support/decisions.js';

const PROJECT = 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa';
const CREDENTIAL = 'agt_bbbbbbbbbbbbbbbbbbbbbbbbbb';

function recorded(stream: string, event: ReturnType<typeof encodeEvent>): RecordedEvent {
  return { ...event, stream, revision: 0, position: 7n };
}

const meta = (actor = 'test') => ({ event_id: randomUUID(), correlation_id: 'c', actor, at: '2026-01-02T03:04:05.000Z' });

function decision(event: AuditEventKind, reason = 'refused'): RecordedEvent {
  const payload: StatementDecided = placed({
    event, project_id: PROJECT, credential_id: CREDENTIAL, session_id: 's', source: 'wire', region: 'local', client_ip: '10.0.0.9', ts: '2026-01-02T03:04:05.000Z',
    sql: "select * from customers where email = 'x@y.z'", normalized_sql: 'select * from customers where email = $1', query_hash: '0123456789abcdef', statement_kind: 'select',
    decision_rule: event === 'canary_tripped' ? 'honeytoken.value' : 'deny.table', reason, cache_status: 'none', rows_returned: '0', bytes_out: '0', latency_us: null,
    tables_read: ['public.customers'], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'p', boot_epoch: 1, seq: '1',
    approval_id: ['approval_requested', 'approved', 'rejected', 'approval_expired'].includes(event) ? 'apr_cccccccccccccccccccccccccc' : null,
  });
  return recorded(`audit-${PROJECT}`, encodeEvent(StatementDecided, payload, meta()));
}

describe('allowed networks', () => {
  it('public allows public addresses only; listed ranges add to it; IPv4-mapped IPv6 counts as its IPv4', () => {
    const publicOnly = parseAllowedNetworks('public');
    for (const address of ['93.184.216.34', '2606:4700::1111', '8.8.8.8']) expect(publicOnly.allows(address), address).toBe(true);
    for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fc00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:a00:1', '224.0.0.1', 'not-an-address']) {
      expect(publicOnly.allows(address), address).toBe(false);
    }
    const loopback = parseAllowedNetworks('127.0.0.0/8, ::1/128');
    expect(loopback.allows('127.0.0.1')).toBe(true);
    expect(loopback.allows('::ffff:127.0.0.2')).toBe(true);
    expect(loopback.allows('::1')).toBe(true);
    expect(loopback.allows('8.8.8.8')).toBe(false);
    expect(parseAllowedNetworks('public,10.0.0.5').allows('10.0.0.5')).toBe(true);
    expect(parseAllowedNetworks('public,10.0.0.5').allows('10.0.0.6')).toBe(false);
  });

  it('refuses a malformed list, naming the entry', () => {
    expect(() => parseAllowedNetworks('')).toThrow(NetworksError);
    expect(() => parseAllowedNetworks('10.0.0.0/33')).toThrow('10.0.0.0/33 has a prefix length outside 0-32');
    expect(() => parseAllowedNetworks('intranet')).toThrow('intranet is not an address or CIDR range');
    expect(() => parseAllowedNetworks('10.0.0.0/x')).toThrow(NetworksError);
  });
});

describe('retries', () => {
  const first = new Date('2026-01-01T00:00:00.000Z');
  it('doubles from 1 s with jitter in [d/2, d], capped at an hour', () => {
    expect(nextRetry(1, first, first, 86_400_000, 0)).toEqual({ kind: 'retry', at: new Date(first.getTime() + 500) });
    expect(nextRetry(1, first, first, 86_400_000, 0.999_999)).toEqual({ kind: 'retry', at: new Date(first.getTime() + 1_000) });
    expect(nextRetry(4, first, first, 86_400_000, 0)).toEqual({ kind: 'retry', at: new Date(first.getTime() + 4_000) });
    expect(nextRetry(40, first, first, 86_400_000, 0)).toEqual({ kind: 'retry', at: new Date(first.getTime() + RETRY_CAP_MS / 2) });
  });
  it('gives up once the next try would fall past the horizon after the first attempt', () => {
    const late = new Date(first.getTime() + 86_000_000);
    expect(nextRetry(30, first, late, 86_400_000, 0)).toEqual({ kind: 'give_up' });
    expect(nextRetry(1, first, first, 400, 0)).toEqual({ kind: 'give_up' });
  });
});

describe('notifications', () => {
  const noCredentials = () => undefined;
  it('maps the notifying audit kinds and no other; the data carries no statement text, reason or client address', () => {
    const expected: Partial<Record<AuditEventKind, string>> = {
      blocked: 'query_blocked', budget_exhausted: 'budget_exhausted', canary_tripped: 'canary_tripped', migration_flagged: 'migration_flagged',
      approval_requested: 'approval_requested', approved: 'approval_decided', rejected: 'approval_decided', approval_expired: 'approval_decided',
    };
    for (const kind of (['query', 'blocked', 'budget_exhausted', 'auth_failed', 'credential_expired', 'canary_tripped', 'rejected', 'approval_expired', 'masked', 'truncated', 'approval_requested', 'approved', 'migration_flagged'] as AuditEventKind[])) {
      const notification = notificationOf(decision(kind), noCredentials);
      expect(notification?.type, kind).toBe(expected[kind]);
      if (!notification) continue;
      const body = envelopeBody(notification, PROJECT);
      expect(body).not.toContain('x@y.z');
      expect(body).not.toContain('refused');
      expect(body).not.toContain('10.0.0.9');
    }
  });

  it('a tripped canary names its honeytoken (never its bait value); a decided approval says how', () => {
    const canary = notificationOf(decision('canary_tripped', 'the statement touched honeytoken hnt_dddddddddddddddddddddddddd (value bait-4411@example.com) (rule honeytoken.value)'), noCredentials)!;
    expect(canary.data).toMatchObject({ honeytoken_id: 'hnt_dddddddddddddddddddddddddd', decision_rule: 'honeytoken.value', credential_id: CREDENTIAL });
    expect(envelopeBody(canary, PROJECT)).not.toContain('bait-4411');
    expect(notificationOf(decision('rejected'), noCredentials)!.data).toMatchObject({ decision: 'rejected', approval_id: 'apr_cccccccccccccccccccccccccc' });
    expect(notificationOf(decision('approval_expired'), noCredentials)!.data).toMatchObject({ decision: 'expired' });
  });

  it('credential events find their project through the registrations the caller recorded; the envelope has the documented members', () => {
    const disabled = recorded(`credential-${CREDENTIAL}`, encodeEvent(CredentialDisabled, { credential_id: CREDENTIAL, reason: 'kill-switch' }, meta('api_key:key_x')));
    const notification = notificationOf(disabled, (id) => (id === CREDENTIAL ? PROJECT : undefined))!;
    expect(notification).toEqual({ id: `msg_${disabled.id.replaceAll('-', '')}`, type: 'credential_disabled', projectId: PROJECT, occurredAt: '2026-01-02T03:04:05.000Z', data: { credential_id: CREDENTIAL, reason: 'kill-switch', actor: 'api_key:key_x' } });
    expect(JSON.parse(envelopeBody(notification, PROJECT))).toEqual({ id: notification.id, type: 'credential_disabled', project_id: PROJECT, occurred_at: '2026-01-02T03:04:05.000Z', data: notification.data });
    expect(notificationOf(disabled, noCredentials)!.projectId).toBeUndefined();
    const registered = recorded(`credential-${CREDENTIAL}`, encodeEvent(CredentialRegistered, {
      credential_id: CREDENTIAL, project_id: PROJECT, database_id: 'db_eeeeeeeeeeeeeeeeeeeeeeeeee', policy_profile_id: 'pol_ffffffffffffffffffffffffff', name: 'a', pg_username: 'u', principal_type: 'agent',
      scram: { iterations: 4096, salt: Buffer.alloc(16).toString('base64'), stored_key: Buffer.alloc(32).toString('base64'), server_key: Buffer.alloc(32).toString('base64') },
      token_hash: '0'.repeat(64), token_prefix: 'pgw_agt_x', expires_at: null,
    }, meta()));
    expect(notificationOf(registered, noCredentials)).toBeUndefined();
  });
});

describe('signing', () => {
  it('signs with one v1 entry per secret, space-separated; each secret alone verifies with the standardwebhooks package', () => {
    const [older, newer] = [newSigningSecret(), newSigningSecret()];
    expect(newer).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const body = '{"id":"msg_1","type":"webhook.test"}';
    const headers = signedHeaders('msg_1', new Date(), body, [newer, older]);
    expect(headers['webhook-id']).toBe('msg_1');
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
    for (const secret of [older, newer]) expect(new Webhook(secret).verify(body, headers)).toEqual({ id: 'msg_1', type: 'webhook.test' });
    expect(() => new Webhook(newSigningSecret()).verify(body, headers)).toThrow('No matching signature found');
    expect(() => new Webhook(newer).verify(`${body} `, headers)).toThrow('No matching signature found');
  });
});
