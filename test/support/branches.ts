import { expect } from 'vitest';
import type { TestGateway } from './gateway.js';

/** A sandbox branch of the database, created through the REST API and waited for until ready (20 s); `made` hears its database's name at once, for clean-up. */
export async function readyBranch(gateway: TestGateway, databaseId: string, name: string, made: (databaseName: string) => void): Promise<{ id: string; database_name: string }> {
  const { api, owner, projectId } = gateway;
  const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/branches`, payload: { database_id: databaseId, name } });
  expect(created.statusCode).toBe(202);
  const branch = created.json() as { id: string; database_name: string };
  made(branch.database_name);
  const deadline = Date.now() + 20_000;
  let status = 'copying';
  while (status === 'copying' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/branches/${branch.id}` })).json() as { status: string }).status;
  }
  expect(status).toBe('ready');
  return branch;
}
