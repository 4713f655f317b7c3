import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projections } from '../../projections/index.js';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;

beforeAll(async () => {
  api = await startApi('read_models');
});
afterAll(async () => {
  await api?.stop();
});

const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' };

/** Exercises every write of the control plane, so every read model has rows of every shape. */
async function workload(): Promise<void> {
  const { orgId, apiKey } = await api.org('scale');
  const call = (method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) => api.call(apiKey, { method, url, ...(payload ? { payload } : {}) });
  const key = (await call('POST', `/v1/orgs/${orgId}/api-keys`, { name: 'ci', role: 'member' })).json() as { key: { id: string } };
  await call('DELETE', `/v1/orgs/${orgId}/api-keys/${key.key.id}`);
  for (let p = 0; p < 3; p++) {
    const project = (await call('POST', '/v1/projects', { name: `p${p}`, org_id: orgId, database, tags: ['a', 'b'], self_hosted: p === 0 })).json() as { project: { id: string }; database: { id: string } };
    const base = `/v1/projects/${project.project.id}`;
    await call('PATCH', base, { description: `project ${p}` });
    const second = (await call('POST', `${base}/databases`, { ...database, name: 'analytics', role: 'analytics' })).json() as { id: string };
    await call('PATCH', `${base}/databases/${second.id}`, { query_timeout_ms: 5000, password: 'rotated' });
    const replica = (await call('POST', `${base}/databases/${project.database.id}/replicas`, { host: '10.0.0.2', port: 5433 })).json() as { id: string };
    if (p === 1) await call('DELETE', `${base}/databases/${project.database.id}/replicas/${replica.id}`);
    if (p === 2) await call('DELETE', `${base}/databases/${second.id}`);
    const policy = (await call('POST', `${base}/policies`, { name: 'ro', allowed_tables: ['public.orders'], masked_columns: { 'public.orders.email': 'hash' } })).json() as { id: string };
    await call('PATCH', `${base}/policies/${policy.id}`, { max_rows: 50 });
    await call('POST', `${base}/agents`, { name: `agent ${p}`, policy_profile_id: policy.id });
    if (p === 2) await call('DELETE', base);
  }
}

describe('read models', () => {
  it('rebuild --verify reproduces every read model byte for byte after a control-plane workload', async () => {
    await workload();
    for (const projection of projections) {
      const result = await rebuildAndVerify(api.store, api.pool, projection);
      expect({ name: result.name, identical: result.identical }).toEqual({ name: projection.name, identical: true });
      expect(Object.values(result.live).every((table) => table.rows > 0)).toBe(true);
    }
  });
});
