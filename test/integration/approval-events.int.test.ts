import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approval, approvalStream } from '../../commands/approvals/approval.js';
import { handle } from '../../commands/handle.js';
import { newId } from '../../src/ids.js';
import { startApi, type TestApi } from '../support/api.js';
import { approvalRequest } from '../support/approval-request.js';
import { openSse, type SseStream } from '../support/sse.js';

let api: TestApi;
let base: string;
let owner: { orgId: string; apiKey: string };
let projectId: string;
let otherProjectId: string;
let databaseId: string;

const eventsUrl = (project: string) => `${base}/v1/projects/${project}/approvals/events`;
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A held statement, recorded as the proxy records one. */
async function hold(project: string, sql: string): Promise<string> {
  const approvalId = newId('apr_');
  const request = approvalRequest({ approval_id: approvalId, project_id: project, database_id: databaseId, credential_id: null, sql, normalized_sql: sql, expires_at: new Date(Date.now() + 3_600_000).toISOString() });
  await handle(api.store, approvalStream(approvalId), approval, { kind: 'request', request }, { correlationId: 'test', actor: 'proxy:test' });
  return approvalId;
}

beforeAll(async () => {
  api = await startApi('approval-events');
  await api.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`;
  owner = await api.org('pro');
  projectId = await api.project(owner, 'Shop');
  otherProjectId = await api.project(owner, 'Other');
  databaseId = ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/databases` })).json() as { databases: { id: string }[] }).databases[0]!.id;
});
afterAll(async () => {
  // fetch's pool leaves sockets here on which it never sent a request (after aborted streams); the
  // server would wait its headersTimeout for them, as for any client's, before it stops.
  api?.app.server.closeAllConnections();
  await api?.stop();
});

describe('GET /v1/projects/{project_id}/approvals/events', () => {
  it('streams a held statement within 1 s, then its decision, and nothing of another project', async () => {
    const stream = await openSse(eventsUrl(projectId), bearer(owner.apiKey));
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(stream.headers.get('cache-control')).toBe('no-store');
      expect((await stream.next('ready')).data).toEqual({ project_id: projectId });

      await hold(otherProjectId, 'update orders set amount = 2 where id = 2');
      const heldAt = performance.now();
      const id = await hold(projectId, 'update orders set amount = 0 where id = 1');
      const held = await stream.next('approval', (data) => (data as { id: string }).id === id, 1_000);
      expect(held.at - heldAt).toBeLessThan(1_000);
      expect(held.id).toBe(`${id}:0`);
      expect(held.data).toMatchObject({ id, project_id: projectId, status: 'pending', sql: 'update orders set amount = 0 where id = 1', target_tables: ['public.orders'], estimated_rows: 1, hold_rule: 'approval.held_kind', decided_by: null });
      // As getApproval answers it.
      expect(held.data).toEqual({ ...((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/approvals/${id}` })).json() as object) });

      const decidedAt = performance.now();
      const approved = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/approvals/${id}/approve`, payload: { reason: 'ticket 7' } });
      expect(approved.statusCode).toBe(200);
      const decided = await stream.next('approval', (data) => (data as { id: string }).id === id, 1_000);
      expect(decided.at - decidedAt).toBeLessThan(1_000);
      expect(decided.id).toBe(`${id}:1`);
      expect(decided.data).toMatchObject({ id, status: 'approved', reason: 'ticket 7', decided_by: expect.stringMatching(/^api_key:key_/) });
      // The other project's request never came.
      expect(stream.events.filter((e) => e.event === 'approval').map((e) => (e.data as { project_id: string }).project_id)).toEqual([projectId, projectId]);
    } finally {
      stream.close();
    }
  });

  it('takes the roles that may list approvals (a viewer), and refuses without a caller (401) or for another organization’s project (404)', async () => {
    const viewer = ((await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'watcher', role: 'viewer' } })).json() as { api_key: string }).api_key;
    const watching = await openSse(eventsUrl(projectId), bearer(viewer));
    expect(watching.status).toBe(200);
    await watching.next('ready');
    watching.close();

    const anonymous = await fetch(eventsUrl(projectId), { headers: { accept: 'text/event-stream' } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
    expect(((await anonymous.json()) as { code: string }).code).toBe('UNAUTHORIZED');

    const stranger = await api.org('pro');
    const foreign = await fetch(eventsUrl(projectId), { headers: { accept: 'text/event-stream', ...bearer(stranger.apiKey) } });
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as { code: string }).code).toBe('NOT_FOUND');
    const unknown = await fetch(eventsUrl('prj_nope'), { headers: bearer(owner.apiKey) });
    expect(unknown.status).toBe(404);
    await unknown.body?.cancel();
  });

  it('holds at most 5 streams per caller (429 RATE_LIMITED beyond), and a closed one frees its place', async () => {
    const key = ((await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'greedy', role: 'viewer' } })).json() as { api_key: string }).api_key;
    const streams: SseStream[] = [];
    try {
      for (let i = 0; i < 5; i += 1) {
        streams.push(await openSse(eventsUrl(projectId), bearer(key)));
        await streams.at(-1)!.next('ready');
      }
      const sixth = await fetch(eventsUrl(projectId), { headers: bearer(key) });
      expect(sixth.status).toBe(429);
      expect(sixth.headers.get('retry-after')).toBe('2');
      expect(((await sixth.json()) as { code: string }).code).toBe('RATE_LIMITED');
      // Another caller is not counted against this one.
      const owners = await openSse(eventsUrl(projectId), bearer(owner.apiKey));
      expect(owners.status).toBe(200);
      owners.close();

      streams.shift()!.close();
      let again: SseStream | undefined;
      for (let attempt = 0; attempt < 50 && again?.status !== 200; attempt += 1) {
        again = await openSse(eventsUrl(projectId), bearer(key));
        if (again.status !== 200) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(again!.status).toBe(200);
      streams.push(again!);
    } finally {
      for (const stream of streams) stream.close();
    }
  });

  it('sends heartbeats (PGWARD_APPROVAL_STREAM_HEARTBEAT_MS), and ends its streams when the API shuts down, without holding up the drain', async () => {
    const other = await startApi('approval-events-close', { PGWARD_APPROVAL_STREAM_HEARTBEAT_MS: '200' });
    await other.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (other.app.server.address() as AddressInfo).port;
    const org = await other.org('pro');
    const project = await other.project(org, 'Closing');
    const stream = await openSse(`http://127.0.0.1:${port}/v1/projects/${project}/approvals/events`, bearer(org.apiKey));
    await stream.next('ready');
    const opened = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 700));
    // Three in 700 ms at 200 ms each (one may be late on a loaded machine, none early), and no event.
    expect(stream.comments.length).toBeGreaterThanOrEqual(2);
    expect(stream.comments.length).toBeLessThanOrEqual(Math.floor((performance.now() - opened) / 200));
    expect(new Set(stream.comments)).toEqual(new Set(['heartbeat']));
    expect(stream.events.map((e) => e.event)).toEqual(['ready']);
    const started = performance.now();
    const stopping = other.stop();
    await stream.ended;
    expect(performance.now() - started).toBeLessThan(500);
    await stopping;
  });
});
