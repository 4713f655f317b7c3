import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

const ISSUER = 'https://auth.pgward.test/api/auth';
const AUDIENCE = 'pgward-api';

let api: TestApi;
let jwks: Server;
let orgId: string;
type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let privateKey: PrivateKey;

async function token(claims: Record<string, unknown>, key: PrivateKey = privateKey, kid = 'k1'): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('5m').sign(key);
}

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  privateKey = pair.privateKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  const { port } = jwks.address() as AddressInfo;
  api = await startApi('jwt_api', { PGWARD_JWKS_URL: `http://127.0.0.1:${port}/jwks`, PGWARD_JWT_ISSUER: ISSUER, PGWARD_JWT_AUDIENCE: AUDIENCE });
  orgId = (await api.org('pro')).orgId;
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => jwks?.close(resolve));
});

describe('JWT bearer tokens on the REST API', () => {
  it('maps org_id and role claims to the caller', async () => {
    const admin = await token({ sub: 'usr_ada', org_id: orgId, role: 'admin' });
    const created = await api.call(admin, {
      method: 'POST',
      url: '/v1/projects',
      payload: { name: 'From SSO', org_id: orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' } },
    });
    expect(created.statusCode).toBe(201);
    const events = await api.store.readStream(`project-${(created.json() as { project: { id: string } }).project.id}`);
    expect(JSON.parse(Buffer.from(events[0]!.metadata).toString()).actor).toBe('user:usr_ada');
  });

  it('enforces the role claim and refuses bad tokens with 401', async () => {
    const viewer = await token({ sub: 'usr_vic', org_id: orgId, role: 'viewer' });
    expect((await api.call(viewer, { method: 'GET', url: `/v1/projects?org_id=${orgId}` })).statusCode).toBe(200);
    expect((await api.call(viewer, { method: 'GET', url: '/v1/me' })).json()).toEqual({ kind: 'user_jwt', org_id: orgId, role: 'viewer', key_id: null, subject: 'usr_vic' });
    const refused = await api.call(viewer, { method: 'DELETE', url: '/v1/projects/prj_aaaaaaaaaaaaaaaaaaaaaaaaaa' });
    expect((refused.json() as { code: string }).code).toBe('FORBIDDEN');
    const foreign = (await generateKeyPair('ES256')).privateKey;
    for (const bad of [await token({ sub: 'usr_x', org_id: orgId, role: 'admin' }, foreign), await token({ sub: 'usr_x', org_id: orgId, role: 'superuser' })]) {
      const response = await api.call(bad, { method: 'GET', url: `/v1/projects?org_id=${orgId}` });
      expect(response.statusCode).toBe(401);
      expect((response.json() as { code: string }).code).toBe('UNAUTHORIZED');
    }
  });
});
