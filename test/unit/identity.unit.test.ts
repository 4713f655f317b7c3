import selfsigned from 'selfsigned';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { organization, type OrganizationState } from '../../commands/organizations/organization.js';
import { DomainError } from '../../commands/domain-error.js';
import { slugOf } from '../../src/identity/export.js';
import { withLoopbackAsNative } from '../../src/identity/routes.js';
import { parseSsoProviders, signInOptions } from '../../src/identity/sso.js';

const ORG = 'org_01j9zq8x4m7k2n5p6r3s8t0v1w';
const USER = 'usr_01j9zq8x4m7k2n5p6r3s8t0v1w';
const key = (keyId: string) => ({ keyId, name: 'k', role: 'owner' as const, prefix: 'pgw_org_ab12', tokenHash: 'a'.repeat(64) });
const NOW = '2026-11-26T12:00:00.000Z';

function fold(events: ReturnType<typeof organization.decide>, from: OrganizationState = organization.initial): OrganizationState {
  if (events instanceof DomainError) throw events;
  return events.reduce((state, e, i) => organization.evolve(state, { type: e.definition.type, data: e.data, revision: i } as never), from);
}

describe('an organization a person owns (commands/organizations)', () => {
  it('is created with the person as owner member and no API key', () => {
    const events = organization.decide(organization.initial, { kind: 'create', orgId: ORG, name: 'A', plan: 'free', features: [], owner: { userId: USER } }, NOW);
    expect(events instanceof DomainError ? events : events.map((e) => [e.definition.type, e.data])).toEqual([
      ['OrganizationCreated.v1', { org_id: ORG, name: 'A', plan: 'free', features: [] }],
      ['OrganizationMemberAdded.v1', { org_id: ORG, user_id: USER, role: 'owner' }],
    ]);
  });

  it('lets its only owner key be revoked, since the person can always make another; a key-owned one keeps its last', () => {
    const personal = fold(organization.decide(organization.initial, { kind: 'create', orgId: ORG, name: 'A', plan: 'free', features: [], owner: { userId: USER } }, NOW));
    const withKey = fold(organization.decide(personal, { kind: 'create-api-key', orgId: ORG, key: key('key_01j9zq8x4m7k2n5p6r3s8t0v1w') }, NOW), personal);
    expect(organization.decide(withKey, { kind: 'revoke-api-key', orgId: ORG, keyId: 'key_01j9zq8x4m7k2n5p6r3s8t0v1w' }, NOW)).not.toBeInstanceOf(DomainError);
    const keyed = fold(organization.decide(organization.initial, { kind: 'create', orgId: ORG, name: 'B', plan: 'free', features: [], owner: { key: key('key_01j9zq8x4m7k2n5p6r3s8t0v2w') } }, NOW));
    const refused = organization.decide(keyed, { kind: 'revoke-api-key', orgId: ORG, keyId: 'key_01j9zq8x4m7k2n5p6r3s8t0v2w' }, NOW);
    expect(refused).toBeInstanceOf(DomainError);
    expect((refused as DomainError).code).toBe('CONFLICT');
  });
});

describe('registrations of MCP clients on the person’s machine', () => {
  const body = (value: object) => Buffer.from(JSON.stringify(value));
  const typeOf = (out: Buffer) => (JSON.parse(out.toString()) as { application_type?: string }).application_type;

  it('are native when every redirect URI is an http loopback one and none was named', () => {
    expect(typeOf(withLoopbackAsNative(body({ redirect_uris: ['http://localhost:3334/callback', 'http://127.0.0.1:9/cb', 'http://[::1]:80/'] })))).toBe('native');
  });

  it('stay as they are otherwise', () => {
    for (const value of [{ redirect_uris: ['https://app.example/cb'] }, { redirect_uris: ['http://localhost/cb', 'https://app.example/cb'] }, { redirect_uris: ['http://localhost/cb'], application_type: 'web' }, { redirect_uris: [] }, { redirect_uris: ['http://localhost.evil.example/cb'] }]) {
      expect(withLoopbackAsNative(body(value)).toString()).toBe(JSON.stringify(value));
    }
    expect(withLoopbackAsNative(Buffer.from('not json')).toString()).toBe('not json');
  });
});

describe('identity helpers', () => {
  it('makes slugs of organization names', () => {
    expect(slugOf("Ada Lovelace's organization")).toBe('ada-lovelace-s-organization');
    expect(slugOf('Élan  Vital!')).toBe('elan-vital');
    expect(slugOf('日本')).toBe('organization');
  });

  it('parses PGWARD_SSO_PROVIDERS and names its first problem', () => {
    expect(parseSsoProviders('[{"provider_id":"okta","discovery_url":"https://x.example/.well-known/openid-configuration","client_id":"c","client_secret":"s"}]')).toEqual([
      { kind: 'oidc', provider_id: 'okta', discovery_url: 'https://x.example/.well-known/openid-configuration', client_id: 'c', client_secret: 's', scopes: ['openid', 'profile', 'email'] },
    ]);
    expect(() => parseSsoProviders('[{"provider_id":"Okta!","discovery_url":"https://x.example/","client_id":"c","client_secret":"s"}]')).toThrow(/^0\.provider_id: /);
    expect(() => parseSsoProviders('[{"provider_id":"a","discovery_url":"ftp://x/","client_id":"c","client_secret":"s"}]')).toThrow(/discovery_url/);
  });

  it('parses SAML providers beside OIDC ones and refuses an entry that could not verify an assertion', async () => {
    const { cert } = await selfsigned.generate([{ name: 'commonName', value: 'idp' }], { keyType: 'rsa', keySize: 2048, algorithm: 'sha256' });
    const saml = { kind: 'saml', provider_id: 'acme', name: 'Acme', entry_point: 'https://idp.acme.example/sso', idp_entity_id: 'https://idp.acme.example/metadata', idp_certificate: cert };
    const oidc = { kind: 'oidc', provider_id: 'okta', discovery_url: 'https://x.example/.well-known/openid-configuration', client_id: 'c', client_secret: 's' };
    const parsed = parseSsoProviders(JSON.stringify([saml, oidc]));
    expect(parsed).toEqual([saml, { ...oidc, scopes: ['openid', 'profile', 'email'] }]);
    expect(signInOptions(parsed)).toEqual({ passkey: true, providers: [{ id: 'acme', name: 'Acme', kind: 'saml' }, { id: 'okta', name: 'okta', kind: 'oidc' }] });
    const refused = (change: Record<string, unknown>) => () => parseSsoProviders(JSON.stringify([{ ...saml, ...change }]));
    expect(refused({ idp_certificate: 'not a certificate' })).toThrow(/^0\.idp_certificate: expected the identity provider’s signing certificate as PEM/);
    // Its DER's first bytes (the outer SEQUENCE's tag and length) zeroed: a body that never parses, wherever the key's bytes fall.
    expect(refused({ idp_certificate: cert.replace(/(-----BEGIN CERTIFICATE-----\r?\n)[A-Za-z0-9+/]{8}/, '$1AAAAAAAA') })).toThrow(/^0\.idp_certificate: /);
    expect(refused({ entry_point: 'ftp://idp.acme.example/sso' })).toThrow(/^0\.entry_point: expected the http\(s\) single sign-on URL/);
    expect(refused({ idp_entity_id: undefined })).toThrow(/^0\.idp_entity_id: /);
    expect(refused({ client_secret: 's' })).toThrow(/^0: Unrecognized key: "client_secret"/);
    expect(refused({ kind: 'ldap' })).toThrow(/^0\.kind: /);
    expect(() => parseSsoProviders(JSON.stringify([saml, { ...oidc, provider_id: 'acme' }]))).toThrow('names a provider twice');
    // A bad entry stops start-up with one line naming the variable.
    expect(() => loadConfig({ PGWARD_SSO_PROVIDERS: JSON.stringify([{ ...saml, idp_certificate: 'x' }]) })).toThrow(ConfigError);
    expect(() => loadConfig({ PGWARD_SSO_PROVIDERS: JSON.stringify([{ ...saml, idp_certificate: 'x' }]) })).toThrow(/^invalid configuration: PGWARD_SSO_PROVIDERS expected .*\(0\.idp_certificate: expected the identity provider’s signing certificate as PEM \(-----BEGIN CERTIFICATE-----\)\)$/);
  });
});
