import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import pg from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy, type RunningProxy } from '../../proxy/server.js';
import { parseCidrList } from '../../src/net/cidr.js';
import { parseKeyring } from '../../src/crypto/seal.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { connectAgent } from '../support/agent-mcp.js';
import { freePort } from '../support/free-port.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { proxyV2Header, socketWriting } from '../support/proxy-v2.js';
import { waitFor } from '../support/wire.js';

const run = promisify(execFile);

let gateway: TestGateway;
let ingest: RunningIngest;
let agent: AgentSecrets;
/** A second proxy over the same store and bus that takes PROXY protocol headers from 127.0.0.3 only. */
let balanced: RunningProxy;
const relays: net.Server[] = [];

type Entry = { event: string; decision_rule: string; client_ip: string; credential_id: string | null; reason: string; source: string };

/** An agent's connection string (the fenced agent's unless given) aimed at `host:port` (the password and database unchanged). */
function aimedAt(host: string, port: number, secrets: AgentSecrets = agent): string {
  const url = new URL(secrets.connection_string);
  url.hostname = host.includes(':') ? `[${host}]` : host;
  url.port = String(port);
  url.searchParams.set('sslmode', 'disable');
  return url.toString();
}

/**
 * A TCP relay on 127.0.0.1 that connects on to the proxy from `localAddress`. psql (libpq) cannot
 * choose its source address, and on Linux loopback a connection to 127.0.0.2 still comes from
 * 127.0.0.1; the relay does what source NAT would, so the real psql reaches the proxy from that address.
 */
async function relayFrom(localAddress: string): Promise<number> {
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: gateway.proxy.port, localAddress });
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  relays.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

async function psql(connectionString: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('psql', [connectionString, '-XAtc', 'select 41 + 1'], { timeout: 10_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** A node-postgres login through `port` on `stream` (a socket from a chosen address, perhaps opening with a PROXY header): its SQLSTATE and message, or the row it read. */
async function login(stream: () => net.Socket, port = gateway.proxy.port, secrets: AgentSecrets = agent): Promise<{ code?: string; message?: string; answer?: number }> {
  const client = new pg.Client({ connectionString: aimedAt('127.0.0.1', port, secrets), stream });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ answer: number }>('select 42 as answer');
    await client.end();
    return { answer: rows[0]!.answer };
  } catch (error) {
    return { code: (error as { code?: string }).code, message: (error as Error).message };
  }
}

const from = (localAddress: string) => socketWriting(undefined, localAddress);

async function setRules(payload: Record<string, unknown>): Promise<void> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'PUT', url: `/v1/projects/${gateway.projectId}/ip-rules`, payload });
  expect(response.statusCode, response.body).toBe(200);
}

/** The project's audit trail entries of the agent, newest first, once there are `count`. */
/** The fenced agent's audit entries, newest first (those at or after `since` when given), once there are at least `count`. */
async function auditOf(count: number, since?: string): Promise<Entry[]> {
  let entries: Entry[] = [];
  const start = since === undefined ? '' : `&start=${encodeURIComponent(since)}`;
  await waitFor(
    async () => {
      const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100&credential_id=${agent.credential.id}${start}` });
      entries = (response.json() as { entries: Entry[] }).entries;
      return entries.length >= count;
    },
    5000,
    `${count} audit entries`,
  );
  return entries;
}

beforeAll(async () => {
  // Dual-stack: 127.0.0.x arrive as IPv4-mapped IPv6 peers, ::1 as IPv6.
  gateway = await startGateway('proxy_ip_rules', undefined, 60_000, {}, pino({ level: 'silent' }), {}, { proxy: { host: '::' }, trustProxy: ['127.0.0.1/32'] });
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
  agent = await gateway.register('fenced agent');
  balanced = await startProxy({
    store: gateway.api.store,
    bus: gateway.bus,
    keyring: parseKeyring(gateway.api.masterKey),
    logger: pino({ level: 'silent' }),
    metrics: new Registry(),
    host: '127.0.0.1',
    port: await freePort(),
    region: 'local',
    proxyId: 'balanced-proxy',
    maxMessageBytes: 1024 * 1024,
    loginTimeoutMs: 2_000,
    proxyProtocol: { trusted: parseCidrList('127.0.0.3') },
  });
});
afterAll(async () => {
  for (const relay of relays) relay.close();
  await balanced?.stop();
  await ingest?.stop();
  await gateway?.stop();
});

describe('IP rules on the wire', () => {
  it('acceptance: denying 127.0.0.2/32, psql from 127.0.0.2 is refused as a wrong password would be, from 127.0.0.1 accepted; both in the audit trail', async () => {
    await setRules({ deny: [{ cidr: '127.0.0.2/32', label: 'retired build box' }] });
    const denied = await relayFrom('127.0.0.2');
    const allowed = await relayFrom('127.0.0.1');
    const refused = await psql(aimedAt('127.0.0.1', denied));
    // The same psql with a wrong password from an address the rules allow, through a relay like the first.
    const wrongPassword = await psql(aimedAt('127.0.0.1', allowed).replace(/:[^:@/]+@/, ':not-the-password@'));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/FATAL: {2}password authentication failed/);
    // The refused address learns nothing: its answer is a wrong password's, word for word (but for the relay's port).
    expect(refused.stderr.replace(`port ${denied}`, 'port P')).toBe(wrongPassword.stderr.replace(`port ${allowed}`, 'port P'));
    const accepted = await psql(aimedAt('127.0.0.1', gateway.proxy.port));
    expect(accepted).toMatchObject({ code: 0, stdout: '42\n' });
    const entries = await auditOf(3);
    expect(entries.map((e) => [e.event, e.decision_rule, e.client_ip])).toEqual([
      ['query', '', '127.0.0.1'],
      ['auth_failed', 'auth.auth_failed', '127.0.0.1'],
      ['auth_failed', 'ip_rules', '127.0.0.2'],
    ]);
    expect(entries[2]!.reason).toBe('address 127.0.0.2 is in deny entry 127.0.0.2/32 (retired build box)');
  });

  it('node-postgres from 127.0.0.2, 127.0.0.3 and ::1: an allow list admits its addresses only, deny wins over it', async () => {
    await setRules({ allow: [{ cidr: '127.0.0.0/30' }, { cidr: '::1' }], deny: [{ cidr: '127.0.0.2' }] });
    const refused = { code: '28P01', message: 'password authentication failed' };
    expect(await login(from('127.0.0.2'))).toEqual(refused);
    expect(await login(from('127.0.0.3'))).toEqual({ answer: 42 });
    expect(await login(from('127.0.0.1'))).toEqual({ answer: 42 });
    await setRules({ allow: [{ cidr: '127.0.0.1' }], deny: [] });
    await waitFor(async () => (await login(from('127.0.0.3'))).code === '28P01', 2000, '127.0.0.3 outside the allow list refused');
    expect(await login(from('127.0.0.2'))).toEqual(refused);
    const v6 = new pg.Client({ connectionString: aimedAt('::1', gateway.proxy.port) });
    expect(await v6.connect().then(() => 'in', (error: { code: string }) => error.code)).toBe('28P01');
    await setRules({ allow: [{ cidr: '127.0.0.1' }, { cidr: '::1/128' }], deny: [] });
    await waitFor(async () => (await login(() => new net.Socket())).answer === 42, 2000, 'allowed again');
    const again = new pg.Client({ connectionString: aimedAt('::1', gateway.proxy.port) });
    await again.connect();
    expect((await again.query('select 7 as n')).rows).toEqual([{ n: 7 }]);
    await again.end();
  });

  it('a live session from an address new rules refuse is ended', async () => {
    await setRules({ allow: [], deny: [] });
    const client = new pg.Client({ connectionString: aimedAt('127.0.0.1', gateway.proxy.port), stream: from('127.0.0.3') });
    let ended = false;
    client.on('error', () => undefined);
    client.on('end', () => (ended = true));
    await client.connect();
    expect((await client.query('select 1 as n')).rows).toEqual([{ n: 1 }]);
    await setRules({ deny: [{ cidr: '127.0.0.3' }] });
    await waitFor(() => ended, 2000, 'session from 127.0.0.3 ended');
  });
});

describe('PROXY protocol v2 from a trusted balancer', () => {
  it('the header’s source is the client: a denied source is refused, an allowed one accepted and audited under its address', async () => {
    await setRules({ deny: [{ cidr: '127.0.0.2' }] });
    // Entries of earlier tests may still be on their way to the trail: only this test's count.
    const since = new Date().toISOString();
    expect(await login(socketWriting(proxyV2Header({ source: '127.0.0.2' }), '127.0.0.3'), balanced.port)).toEqual({ code: '28P01', message: 'password authentication failed' });
    // The balancer itself is not denied: its clients are judged, not it.
    expect(await login(socketWriting(proxyV2Header({ source: '198.51.100.9', tlv: Buffer.from([0x04, 0x00, 0x01, 0x00]) }), '127.0.0.3'), balanced.port)).toEqual({ answer: 42 });
    expect(await login(socketWriting(proxyV2Header({ source: '::ffff:127.0.0.2' }), '127.0.0.3'), balanced.port)).toMatchObject({ code: '28P01' });
    expect(await login(socketWriting(proxyV2Header({ source: '2001:db8::9' }), '127.0.0.3'), balanced.port)).toEqual({ answer: 42 });
    // LOCAL: the balancer's own connection, judged by its own address.
    expect(await login(socketWriting(proxyV2Header({ command: 'local' }), '127.0.0.3'), balanced.port)).toEqual({ answer: 42 });
    const entries = await auditOf(5, since);
    // Five sessions, one after another; the trail's order among them is its timestamps', to the millisecond, so they are compared as a set.
    expect(entries.map((e) => `${e.event} ${e.client_ip}`).sort()).toEqual(['auth_failed 127.0.0.2', 'auth_failed 127.0.0.2', 'query 127.0.0.3', 'query 198.51.100.9', 'query 2001:db8::9']);
  });

  it('a header from an untrusted peer, a malformed one, or none from the trusted peer: refused before any login', async () => {
    const refused = { code: '08P01', message: 'invalid connection preamble' };
    expect(await login(socketWriting(proxyV2Header({ source: '198.51.100.9' }), '127.0.0.1'), balanced.port)).toEqual(refused);
    expect(await login(socketWriting(proxyV2Header({ source: '198.51.100.9', familyByte: 0x31 }), '127.0.0.3'), balanced.port)).toEqual(refused);
    expect(await login(socketWriting(Buffer.from('PROXY TCP4 198.51.100.9 127.0.0.1 5000 6432\r\n'), '127.0.0.3'), balanced.port)).toEqual(refused);
    expect(await login(from('127.0.0.3'), balanced.port)).toEqual(refused);
    // An untrusted peer without a header is an ordinary client.
    expect(await login(from('127.0.0.1'), balanced.port)).toEqual({ answer: 42 });
  });

  it('without PROXY protocol configured, a header is not parsed: the connection fails as the protocol error it is', async () => {
    const result = await login(socketWriting(proxyV2Header({ source: '198.51.100.9' }), '127.0.0.3'));
    expect(result.answer).toBeUndefined();
    expect(result.code).toBe('08P01');
  });
});

describe('IP rules on the hosted agent MCP', () => {
  it('a denied address gets 403 problem+json; behind the trusted proxy (127.0.0.1) X-Forwarded-For is the address judged', async () => {
    await setRules({ deny: [{ cidr: '127.0.0.2' }, { cidr: '::1' }] });
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const post = (remoteAddress: string, headers: Record<string, string> = {}) =>
      gateway.api.app.inject({ method: 'POST', url: '/mcp', remoteAddress, headers: { authorization: `Bearer ${agent.mcp_token}`, accept: 'application/json, text/event-stream', ...headers }, payload: initialize });
    const denied = await post('127.0.0.1', { 'x-forwarded-for': '127.0.0.2' });
    expect(denied.statusCode).toBe(403);
    expect(denied.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(denied.json()).toMatchObject({ code: 'FORBIDDEN', detail: 'this project does not accept requests from your address; ask its administrator to change its IP rules' });
    expect((await post('::1')).statusCode).toBe(403);
    // Only a trusted proxy's header counts: from 127.0.0.3, X-Forwarded-For is ignored.
    expect((await post('127.0.0.3', { 'x-forwarded-for': '127.0.0.2' })).statusCode).toBe(200);
    // The real MCP SDK client through the app on a port, from 127.0.0.1 as a forwarding proxy would be.
    await gateway.api.app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(gateway.api.app.server.address() as net.AddressInfo).port}/mcp`;
    const client = await connectAgent(url, agent.mcp_token, 'allowed');
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
    await setRules({ deny: [{ cidr: '127.0.0.0/8' }] });
    await expect(connectAgent(url, agent.mcp_token, 'denied')).rejects.toThrow(/403/);

    // Each refusal is in the audit trail as the wire's are: auth_failed, rule ip_rules, the judged address.
    const refusedOverMcp = async () => (await auditOf(1)).filter((entry) => entry.source === 'mcp' && entry.event === 'auth_failed');
    await waitFor(async () => (await refusedOverMcp()).length >= 3, 5_000, 'three MCP refusals audited');
    const refused = await refusedOverMcp();
    expect(refused.map((entry) => [entry.decision_rule, entry.credential_id, entry.client_ip]).sort()).toEqual([
      ['ip_rules', agent.credential.id, '127.0.0.1'],
      ['ip_rules', agent.credential.id, '127.0.0.2'],
      ['ip_rules', agent.credential.id, '::1'],
    ]);
    expect(refused.map((entry) => entry.reason)).toContain('address 127.0.0.2 is in deny entry 127.0.0.2/32');
  });
});

describe('a credential’s own IP rules', () => {
  it('are set on the agent credential with If-Match, apply beside the project’s on the wire and the hosted MCP, are audited, and end live sessions they refuse', async () => {
    await setRules({ allow: [], deny: [] });
    const fenced = await gateway.register('own fence');
    const neighbour = await gateway.register('no fence');
    const url = `/v1/projects/${gateway.projectId}/agents/${fenced.credential.id}`;
    const got = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url });
    expect(got.json()).toMatchObject({ ip_rules: { allow: [], deny: [] } });
    const tag = got.headers.etag as string;
    const patch = (payload: Record<string, unknown>, headers: Record<string, string> = {}) => gateway.api.call(gateway.owner.apiKey, { method: 'PATCH', url, headers, payload });
    const set = await patch({ ip_rules: { allow: [{ cidr: '127.0.0.0/29' }, { cidr: '::1' }], deny: [{ cidr: '127.0.0.2', label: 'shared box' }] } }, { 'if-match': tag });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ ip_rules: { allow: [{ cidr: '127.0.0.0/29' }, { cidr: '::1/128' }], deny: [{ cidr: '127.0.0.2/32', label: 'shared box' }] } });
    expect(set.headers.etag).not.toBe(tag);
    const stale = await patch({ ip_rules: { deny: [] } }, { 'if-match': tag });
    expect([stale.statusCode, (stale.json() as { code: string }).code]).toEqual([412, 'PRECONDITION_FAILED']);
    const invalid = await patch({ ip_rules: { deny: [{ cidr: '300.1.1.1' }] } });
    expect([invalid.statusCode, (invalid.json() as { errors: { field: string }[] }).errors[0]!.field]).toEqual([400, 'ip_rules.deny.0.cidr']);
    expect((await gateway.api.store.readStream(`credential-${fenced.credential.id}`)).filter((e) => e.type === 'CredentialIpRulesSet.v1')).toHaveLength(1);

    // The wire: the fenced credential is refused from its denied address as a wrong password is; its neighbour is not.
    const refused = { code: '28P01', message: 'password authentication failed' };
    await waitFor(async () => (await login(from('127.0.0.2'), gateway.proxy.port, fenced)).code === '28P01', 2_000, 'the credential’s rules at the proxy');
    expect(await login(from('127.0.0.3'), gateway.proxy.port, fenced)).toEqual({ answer: 42 });
    expect(await login(from('127.0.0.2'), gateway.proxy.port, neighbour)).toEqual({ answer: 42 });
    // The project's rules still apply: a range only the project denies refuses the credential too.
    await setRules({ deny: [{ cidr: '127.0.0.3' }] });
    await waitFor(async () => (await login(from('127.0.0.3'), gateway.proxy.port, fenced)).code === '28P01', 2_000, 'the project’s rules beside the credential’s');
    await setRules({ allow: [], deny: [] });
    await waitFor(async () => (await login(from('127.0.0.3'), gateway.proxy.port, fenced)).answer === 42, 2_000, 'the project’s rules lifted');
    expect(await login(from('127.0.0.2'), gateway.proxy.port, fenced)).toEqual(refused);

    // The hosted MCP: 403 for the fenced credential from its denied address (behind the trusted proxy), 200 for the neighbour.
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const post = (secrets: AgentSecrets, forwardedFor: string) =>
      gateway.api.app.inject({ method: 'POST', url: '/mcp', remoteAddress: '127.0.0.1', headers: { authorization: `Bearer ${secrets.mcp_token}`, accept: 'application/json, text/event-stream', 'x-forwarded-for': forwardedFor }, payload: initialize });
    expect((await post(fenced, '127.0.0.2')).statusCode).toBe(403);
    expect((await post(fenced, '127.0.0.4')).statusCode).toBe(200);
    expect((await post(fenced, '127.0.0.9')).statusCode).toBe(403);
    expect((await post(neighbour, '127.0.0.2')).statusCode).toBe(200);

    // Audited as the project's rules are, the reason saying whose rules refused.
    let entries: Entry[] = [];
    await waitFor(
      async () => {
        const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100&credential_id=${fenced.credential.id}` });
        entries = (response.json() as { entries: Entry[] }).entries.filter((e) => e.event === 'auth_failed');
        return entries.filter((e) => e.source === 'mcp').length >= 2;
      },
      5_000,
      'the refusals audited',
    );
    expect(entries.every((e) => e.decision_rule === 'ip_rules')).toBe(true);
    expect(entries.map((e) => e.reason)).toEqual(expect.arrayContaining([
      'address 127.0.0.2 is in deny entry 127.0.0.2/32 (shared box) of the credential’s own IP rules',
      'address 127.0.0.9 is in no allow entry of the credential’s own IP rules',
      'address 127.0.0.3 is in deny entry 127.0.0.3/32',
    ]));

    // A live session from an address the credential's new rules refuse is ended.
    const client = new pg.Client({ connectionString: aimedAt('127.0.0.1', gateway.proxy.port, fenced), stream: from('127.0.0.4') });
    let ended = false;
    client.on('error', () => undefined);
    client.on('end', () => (ended = true));
    await client.connect();
    expect((await client.query('select 1 as n')).rows).toEqual([{ n: 1 }]);
    expect((await patch({ ip_rules: { deny: [{ cidr: '127.0.0.4' }] } })).statusCode).toBe(200);
    await waitFor(() => ended, 2_000, 'the session from 127.0.0.4 ended');
  });
});
