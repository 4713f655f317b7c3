import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

/**
 * The upstream password is write-only. Moving a database to another address must not hand the
 * stored password to whatever listens there: a member (who can update databases but never read the
 * password) could otherwise point it at a server that asks for a cleartext password and read it.
 */
let api: TestApi;
let owner: { orgId: string; apiKey: string };
let member = '';
let projectId = '';
let databaseId = '';
let trap: Server;
let trapPort = 0;
const captured: string[] = [];
const SECRET = 'upstream-superuser-secret';

/** A server that speaks just enough of the protocol to ask for a cleartext password and keep it. */
function startTrap(): Promise<void> {
  trap = createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let asked = false;
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!asked && buffered.length >= 8) {
        const length = buffered.readInt32BE(0);
        const code = buffered.readInt32BE(4);
        if (code === 80877103) {
          socket.write('N'); // no TLS
          buffered = buffered.subarray(8);
          return;
        }
        if (buffered.length >= length) {
          buffered = buffered.subarray(length);
          asked = true;
          socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3])); // AuthenticationCleartextPassword
        }
      }
      if (asked && buffered.length >= 5 && buffered[0] === 0x70) {
        const length = buffered.readInt32BE(1);
        if (buffered.length >= 1 + length) {
          captured.push(buffered.subarray(5, 1 + length - 1).toString('utf8'));
          socket.destroy();
        }
      }
    });
    socket.on('error', () => undefined);
  });
  return new Promise((resolve) => trap.listen(0, '127.0.0.1', () => {
    trapPort = (trap.address() as { port: number }).port;
    resolve();
  }));
}

beforeAll(async () => {
  api = await startApi('upstream_password');
  owner = await api.org('pro');
  await startTrap();
  const created = await api.call(owner.apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'P', org_id: owner.orgId, database: { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: SECRET, ssl_mode: 'disable' } },
  });
  expect(created.statusCode, created.body).toBe(201);
  const body = created.json() as { project: { id: string }; database: { id: string } };
  projectId = body.project.id;
  databaseId = body.database.id;
  const key = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'm', role: 'member' } });
  member = (key.json() as { api_key: string }).api_key;
});
afterAll(async () => {
  trap?.close();
  await api?.stop();
});

describe('moving a database to another address', () => {
  it('needs the password in the same request, and the stored one never reaches the new address', async () => {
    const url = `/v1/projects/${projectId}/databases/${databaseId}`;
    const moved = await api.call(member, { method: 'PATCH', url, payload: { host: '127.0.0.1', port: trapPort } });
    expect(moved.statusCode, moved.body).toBe(400);
    expect((moved.json() as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(['password']);
    await api.call(member, { method: 'POST', url: `${url}/test` });
    expect(captured).not.toContain(SECRET);
    // Nothing changed: the database still points at its address.
    expect((await api.call(member, { method: 'GET', url })).json()).toMatchObject({ host: '127.0.0.1', port: 5432 });
    // With a new password, the move is allowed; that password is the one sent.
    const withPassword = await api.call(member, { method: 'PATCH', url, payload: { host: '127.0.0.1', port: trapPort, password: 'new-one' } });
    expect(withPassword.statusCode, withPassword.body).toBe(200);
    await api.call(member, { method: 'POST', url: `${url}/test` });
    expect(captured).toEqual(['new-one']);
  });

  it('still changes other settings without the password', async () => {
    const url = `/v1/projects/${projectId}/databases/${databaseId}`;
    const changed = await api.call(member, { method: 'PATCH', url, payload: { query_timeout_ms: 1000 } });
    expect(changed.statusCode, changed.body).toBe(200);
  });
});
