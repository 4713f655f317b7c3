/** The decisions a test gateway published, found by the statement they record. */
import { createHash } from 'node:crypto';
import type { TestGateway } from './gateway.js';
import { waitFor } from './wire.js';

export type RecordedDecision = { [member: string]: unknown; sql: string; normalized_sql: string; source: string };

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** Whether a recorded text stands for `sql`: the text itself, or its abridged form naming the text's digest (proxy/audit-text.ts). */
export function recordsText(recorded: string, sql: string): boolean {
  return recorded === sql || recorded.includes(`sha256 of the whole text: ${sha256(sql)}`);
}

/** Every decision of a credential published so far. */
export function decisionsOfCredential(gateway: TestGateway, credentialId: string): RecordedDecision[] {
  return gateway.decisions.map((d) => d.decision as RecordedDecision | undefined).filter((d): d is RecordedDecision => d?.credential_id === credentialId);
}

/** The decision a credential's statement `sql` got from `source`, once published (within 3 s). */
export async function recordedFor(gateway: TestGateway, credentialId: string, source: 'wire' | 'mcp', sql: string): Promise<RecordedDecision> {
  const find = () => decisionsOfCredential(gateway, credentialId).find((d) => d.source === source && recordsText(d.sql, sql));
  await waitFor(() => find() !== undefined, 3_000, `the ${source} decision on a ${sql.length}-character statement`);
  return find()!;
}

/** The audit entries of `sql` by a credential from `source` through the REST API (the chained trail, `GET .../audit`), oldest first, once there are `count` (within 10 s). */
export async function auditedRuns(gateway: TestGateway, credentialId: string, sql: string, count: number, source: 'wire' | 'mcp' = 'wire'): Promise<Record<string, unknown>[]> {
  let found: Record<string, unknown>[] = [];
  await waitFor(async () => {
    const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/projects/${gateway.projectId}/audit?page_size=100&credential_id=${credentialId}` });
    found = ((response.json() as { entries?: Record<string, unknown>[] }).entries ?? []).filter((e) => e.source === source && e.sql === sql).reverse();
    return found.length >= count;
  }, 10_000, `${count} audit entries of ${sql}`);
  return found;
}
