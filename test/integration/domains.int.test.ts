/** Custom domains through app.inject() against real PostgreSQL, verified against a real DNS server on loopback. */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';
import { writeDomainCertificate } from '../support/domain-certs.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';

let api: TestApi;
let dns: TestDnsServer;
let certDir: string;
let owner: { orgId: string; apiKey: string };
let stranger: { orgId: string; apiKey: string };
let projectId: string;

interface CustomDomain {
  id: string;
  project_id: string;
  domain: string;
  verified: boolean;
  dns_verification_token: string;
  dns_instructions: { records: { type: string; name: string; value: string; purpose: string }[] };
  tls_cert_expiry: string | null;
  verified_at: string | null;
  created_at: string;
  updated_at: string;
}

const createProject = (key: string, orgId: string): Promise<string> => api.project({ apiKey: key, orgId }, 'Shop');

beforeAll(async () => {
  dns = await startDnsServer();
  certDir = await mkdtemp(join(tmpdir(), 'pgward-domain-certs-'));
  api = await startApi('domains', { PGWARD_DNS_SERVERS: dns.server, PGWARD_DOMAIN_CERT_DIR: certDir, PGWARD_PUBLIC_HOST: 'gw.pgward.test' });
  owner = await api.org('pro');
  stranger = await api.org('pro');
  projectId = await createProject(owner.apiKey, owner.orgId);
});
afterAll(async () => {
  await api?.stop();
  await dns?.close();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

const url = (project = projectId) => `/v1/projects/${project}/domains`;
const add = (domain: unknown, key = owner.apiKey, headers: Record<string, string> = {}, project = projectId) =>
  api.call(key, { method: 'POST', url: url(project), payload: { domain }, headers });
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; detail: string; errors?: { field: string; message: string }[] };

async function added(domain: string): Promise<CustomDomain> {
  const response = await add(domain);
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as CustomDomain;
}

describe('custom domains', () => {
  it('adds a domain, lowercased, unverified, with its TXT token and DNS instructions; one event on its own stream', async () => {
    const response = await add('Db.Shop-1.Example.COM');
    expect(response.statusCode).toBe(201);
    const domain = response.json() as CustomDomain;
    expect(domain).toEqual({
      id: expect.stringMatching(/^dom_[a-z0-9]{26}$/),
      project_id: projectId,
      domain: 'db.shop-1.example.com',
      verified: false,
      dns_verification_token: expect.stringMatching(/^pgward-verify-[a-z0-9]{32}$/),
      dns_instructions: {
        records: [
          { type: 'TXT', name: '_pgward.db.shop-1.example.com', value: domain.dns_verification_token, purpose: expect.any(String) },
          { type: 'CNAME', name: 'db.shop-1.example.com', value: 'gw.pgward.test', purpose: expect.any(String) },
        ],
      },
      tls_cert_expiry: null,
      verified_at: null,
      created_at: domain.created_at,
      updated_at: domain.created_at,
    });
    expect(response.headers.etag).toBe('"0"');
    expect(response.headers.location).toBe(`/v1/projects/${projectId}/domains/${domain.id}`);
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${domain.id}` });
    expect(fetched.statusCode).toBe(200);
    expect(fetched.headers.etag).toBe('"0"');
    expect(fetched.json()).toEqual(domain);
    expect((await api.store.readStream(`domain-${domain.id}`)).map((e) => e.type)).toEqual(['DomainCreated.v1']);
  });

  it('refuses what is no host name with 400 naming the field, and adds nothing', async () => {
    const before = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}?page_size=100` })).json() as { domains: unknown[] };
    const refused: [unknown, RegExp][] = [
      ['', /1-253/],
      [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(59)}.ex`, /1-253/],
      ['localhost', /at least two labels/],
      ['10.0.0.1', /not an IP address/],
      ['::1', /not an IP address/],
      ['[::1]', /ASCII|not an IP/],
      ['*.example.com', /wildcards/],
      ['exa_mple.com', /label "exa_mple"/],
      ['-db.example.com', /label "-db"/],
      ['db-.example.com', /label "db-"/],
      ['db..example.com', /empty label/],
      ['example.com.', /empty label/],
      ['.example.com', /empty label/],
      [`${'a'.repeat(64)}.com`, /1-63/],
      ['db.example.123', /all digits/],
      ['db example.com', /ASCII without spaces/],
      ['\u212Aample.com', /ASCII/],
      ['bücher.example', /ASCII/],
      ['db.example.com\u0000', /ASCII/],
      [42, /string/],
    ];
    for (const [value, message] of refused) {
      const response = await add(value);
      expect(response.statusCode, String(value)).toBe(400);
      expect(problem(response).code).toBe('INVALID_INPUT');
      expect(problem(response).errors?.map((e) => e.field)).toEqual(['domain']);
      expect(problem(response).errors?.[0]?.message, String(value)).toMatch(message);
    }
    const extra = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { domain: 'ok.example.com', verified: true } });
    expect(extra.statusCode).toBe(400);
    const after = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}?page_size=100` })).json() as { domains: unknown[] };
    expect(after.domains.length).toBe(before.domains.length);
  });

  it('accepts the edges: 253 characters, 63-character labels, xn-- names, digits in inner labels', async () => {
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.ex`;
    expect(longest.length).toBe(253);
    for (const name of [longest, 'xn--bcher-kva.example', '1.2.3.example', 'a.b']) expect((await added(name)).domain).toBe(name);
  });

  it('a host name belongs to one project: another project, of any organization, gets 409 RESOURCE_EXISTS in any case', async () => {
    await added('taken.example.com');
    const otherProject = await createProject(stranger.apiKey, stranger.orgId);
    const response = await add('TAKEN.example.com', stranger.apiKey, {}, otherProject);
    expect(response.statusCode).toBe(409);
    expect(problem(response).code).toBe('RESOURCE_EXISTS');
    expect((await add('taken.example.com')).statusCode).toBe(409);
  });

  it('concurrent adds of one host name, from two organizations: exactly one wins, the others 409; once deleted it can be added again', async () => {
    const otherProject = await createProject(stranger.apiKey, stranger.orgId);
    const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? add('contested.example.com') : add('contested.example.com', stranger.apiKey, {}, otherProject))));
    expect(responses.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    expect(responses.filter((r) => r.statusCode === 409).every((r) => problem(r).code === 'RESOURCE_EXISTS')).toBe(true);
    const winner = responses.find((r) => r.statusCode === 201)!;
    const { id } = winner.json() as CustomDomain;
    const winnerKey = responses.indexOf(winner) % 2 === 0 ? { key: owner.apiKey, project: projectId } : { key: stranger.apiKey, project: otherProject };
    expect((await api.call(winnerKey.key, { method: 'DELETE', url: `${url(winnerKey.project)}/${id}` })).statusCode).toBe(204);
    const again = await add('contested.example.com', stranger.apiKey, {}, otherProject);
    expect(again.statusCode, again.body).toBe(201);
  });

  it('another organization’s domain answers 404 to every operation, as a nonexistent one does', async () => {
    const domain = await added('private.example.com');
    const paths: [string, string][] = [
      ['GET', `${url()}/${domain.id}`],
      ['POST', `${url()}/${domain.id}/verify`],
      ['DELETE', `${url()}/${domain.id}`],
      ['GET', url()],
      ['GET', `${url()}/dom_nonexistent0000000000000000`],
    ];
    for (const [method, path] of paths) {
      const response = await api.call(stranger.apiKey, { method: method as 'GET', url: path });
      expect(response.statusCode, `${method} ${path}`).toBe(404);
      expect(problem(response).code).toBe('NOT_FOUND');
    }
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/dom_nonexistent0000000000000000` })).statusCode).toBe(404);
    expect((await api.store.readStream(`domain-${domain.id}`)).length).toBe(1);
  });

  it('an Idempotency-Key replays the same domain; the key with another body is 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const first = await add('idem.example.com', owner.apiKey, { 'idempotency-key': 'dom-1' });
    const again = await add('idem.example.com', owner.apiKey, { 'idempotency-key': 'dom-1' });
    expect(first.statusCode).toBe(201);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    const other = await add('idem2.example.com', owner.apiKey, { 'idempotency-key': 'dom-1' });
    expect(other.statusCode).toBe(409);
    expect(problem(other).code).toBe('IDEMPOTENCY_KEY_REUSED');
    const all = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}?page_size=100` })).json() as { domains: CustomDomain[] };
    expect(all.domains.filter((d) => d.domain.startsWith('idem')).length).toBe(1);
  });

  it('verify: no record, or a wrong one, is 409 DNS_VERIFICATION_FAILED and changes nothing; the token verifies; again changes nothing', async () => {
    const domain = await added('verify-me.example.com');
    const verify = (headers: Record<string, string> = {}) => api.call(owner.apiKey, { method: 'POST', url: `${url()}/${domain.id}/verify`, headers });
    const missing = await verify();
    expect(missing.statusCode).toBe(409);
    expect(problem(missing).code).toBe('DNS_VERIFICATION_FAILED');
    expect(problem(missing).detail).toContain('no TXT record _pgward.verify-me.example.com was found');
    expect(dns.asked).toContain('_pgward.verify-me.example.com');
    dns.txt.set('_pgward.verify-me.example.com', [['v=spf1 -all'], [`${domain.dns_verification_token}x`]]);
    const wrong = await verify();
    expect(wrong.statusCode).toBe(409);
    expect(problem(wrong).detail).toContain('has 2 TXT records, none of them');
    expect((await api.store.readStream(`domain-${domain.id}`)).length).toBe(1);
    // A record may come in several character-strings: joined, it is the token.
    const token = domain.dns_verification_token;
    dns.txt.set('_pgward.verify-me.example.com', [['v=spf1 -all'], [token.slice(0, 10), token.slice(10)]]);
    const stale = await verify({ 'if-match': '"7"' });
    expect(stale.statusCode).toBe(412);
    const verified = await verify({ 'if-match': '"0"' });
    expect(verified.statusCode).toBe(200);
    expect(verified.headers.etag).toBe('"1"');
    const body = verified.json() as CustomDomain;
    expect(body.verified).toBe(true);
    expect(Date.parse(body.verified_at!)).toBeGreaterThan(Date.parse(domain.created_at) - 1);
    expect(body.updated_at).toBe(body.verified_at);
    const again = await verify();
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(body);
    expect((await api.store.readStream(`domain-${domain.id}`)).map((e) => e.type)).toEqual(['DomainCreated.v1', 'DomainVerified.v1']);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${domain.id}` })).json()).toEqual(body);
  });

  it('concurrent verifies all answer verified, with one DomainVerified recorded', async () => {
    const domain = await added('race.example.com');
    dns.txt.set('_pgward.race.example.com', [[domain.dns_verification_token]]);
    const answers = await Promise.all([1, 2, 3, 4].map(() => api.call(owner.apiKey, { method: 'POST', url: `${url()}/${domain.id}/verify` })));
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    expect(answers.map((a) => (a.json() as CustomDomain).verified)).toEqual([true, true, true, true]);
    expect(new Set(answers.map((a) => a.headers.etag))).toEqual(new Set(['"1"']));
    expect((await api.store.readStream(`domain-${domain.id}`)).map((e) => e.type)).toEqual(['DomainCreated.v1', 'DomainVerified.v1']);
  });

  it('tls_cert_expiry is the configured certificate’s end; a certificate for another name counts as none', async () => {
    const domain = await added('tls.example.com');
    const issued = await writeDomainCertificate(certDir, ['tls.example.com'], 45);
    // The folder of mismatch.example.com holds a certificate for another name.
    const other = await added('mismatch.example.com');
    await writeDomainCertificate(join(certDir, 'elsewhere'), ['elsewhere.example.com']);
    await cp(join(certDir, 'elsewhere', 'elsewhere.example.com'), join(certDir, 'mismatch.example.com'), { recursive: true });
    const fetched = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${domain.id}` })).json() as CustomDomain;
    expect(fetched.tls_cert_expiry).toBe(issued.expiresAt);
    expect(Date.parse(issued.expiresAt) - Date.now()).toBeGreaterThan(44 * 86_400_000);
    expect(((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${other.id}` })).json() as CustomDomain).tls_cert_expiry).toBeNull();
  });

  it('lists in pages with opaque tokens, only the project’s live domains', async () => {
    const project = await createProject(owner.apiKey, owner.orgId);
    const ids: string[] = [];
    for (const name of ['p1.example.org', 'p2.example.org', 'p3.example.org']) ids.push(((await add(name, owner.apiKey, {}, project)).json() as CustomDomain).id);
    const seen: string[] = [];
    let token = '';
    do {
      const page = (await api.call(owner.apiKey, { method: 'GET', url: `${url(project)}?page_size=2${token ? `&page_token=${token}` : ''}` })).json() as { domains: CustomDomain[]; next_page_token: string };
      expect(page.domains.length).toBeLessThanOrEqual(2);
      seen.push(...page.domains.map((d) => d.id));
      token = page.next_page_token;
    } while (token);
    expect(seen).toEqual([...ids].sort());
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url(project)}?page_size=101` })).statusCode).toBe(400);
  });

  it('delete honours If-Match, removes the domain (404 after), and frees its host name', async () => {
    const domain = await added('gone.example.com');
    const stale = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${domain.id}`, headers: { 'if-match': '"3"' } });
    expect(stale.statusCode).toBe(412);
    expect(problem(stale).code).toBe('PRECONDITION_FAILED');
    const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${domain.id}`, headers: { 'if-match': '"0"' } });
    expect(deleted.statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${domain.id}` })).statusCode).toBe(404);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${domain.id}` })).statusCode).toBe(404);
    expect((await add('gone.example.com')).statusCode).toBe(201);
  });

  it('a member may read but not add, verify or delete (403)', async () => {
    const domain = await added('roles.example.com');
    const member = ((await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'member', role: 'member' } })).json() as { api_key: string }).api_key;
    expect((await add('member.example.com', member)).statusCode).toBe(403);
    expect((await api.call(member, { method: 'POST', url: `${url()}/${domain.id}/verify` })).statusCode).toBe(403);
    expect((await api.call(member, { method: 'DELETE', url: `${url()}/${domain.id}` })).statusCode).toBe(403);
    expect((await api.call(member, { method: 'GET', url: `${url()}/${domain.id}` })).statusCode).toBe(200);
    expect((await api.call(member, { method: 'GET', url: url() })).statusCode).toBe(200);
  });
});

describe('a deleted project', () => {
  it('no longer holds its domains’ host names', async () => {
    const project = await createProject(owner.apiKey, owner.orgId);
    expect((await add('released.example.com', owner.apiKey, {}, project)).statusCode).toBe(201);
    expect((await add('released.example.com')).statusCode).toBe(409);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${project}` })).statusCode).toBe(204);
    expect((await add('released.example.com')).statusCode).toBe(201);
  });
});
