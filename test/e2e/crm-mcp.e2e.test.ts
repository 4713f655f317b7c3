/**
 * A research-to-outreach loop the way agents run it (docs/crm.md): three agent credentials
 * (researcher, enricher, outreach) each drive the management MCP at /v1/mcp with the official MCP
 * SDK client (search_endpoints → describe_endpoint → call_endpoint), and a person approves the
 * draft over REST. The timeline then tells the whole story.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let base: string;
const clients: Client[] = [];

type Body = Record<string, unknown> & { id: string };

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: 'crm-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  clients.push(client);
  return client;
}

async function agentKey(role: string): Promise<string> {
  const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: `${role} agent`, role } });
  expect(created.statusCode, created.body).toBe(201);
  return (created.json() as { api_key: string }).api_key;
}

const tool = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;
const textOf = (result: CallToolResult) => (result.content[0]?.type === 'text' ? result.content[0].text : '');

/** What an agent does for one step: find the operation by intent, read its schema, call it. */
async function act(client: Client, intent: string, operationId: string, args: Record<string, unknown> = {}): Promise<{ status: number; body: Body }> {
  const found = (await tool(client, 'search_endpoints', { query: intent, limit: 8 })).structuredContent as { endpoints: { operation_id: string; tag: string }[] };
  expect(found.endpoints.map((e) => e.operation_id), intent).toContain(operationId);
  const described = (await tool(client, 'describe_endpoint', { operation_id: operationId })).structuredContent as { operation_id: string; tag: string };
  expect([described.operation_id, described.tag]).toEqual([operationId, 'crm']);
  const called = await tool(client, 'call_endpoint', { operation_id: operationId, ...args });
  expect(called.isError, textOf(called)).toBeFalsy();
  return called.structuredContent as { status: number; body: Body };
}

beforeAll(async () => {
  api = await startApi('crm_mcp');
  owner = await api.org('pro');
  await api.app.listen({ port: 0, host: '127.0.0.1' });
  const address = api.app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on a port');
  base = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  for (const client of clients) await client.close();
  await api?.stop();
});

describe('researcher → enricher → outreach over the management MCP', () => {
  it('finds a lead, enriches it, drafts outreach; a person approves over REST; the outreach agent marks it sent', async () => {
    const context = await api.call(owner.apiKey, { method: 'PUT', url: '/v1/crm/context', payload: { positioning: 'A Postgres gateway for AI agents', icp: 'Data platform teams', tone: 'brief and plain' } });
    expect(context.statusCode, context.body).toBe(200);
    const researcher = await connect(await agentKey('researcher'));
    const enricher = await connect(await agentKey('enricher'));
    const outreach = await connect(await agentKey('outreach'));
    expect((await researcher.listTools()).tools.map((t) => t.name).sort()).toEqual(['call_endpoint', 'describe_endpoint', 'search_endpoints']);

    // The researcher finds a lead and hands it on to the enricher.
    const company = await act(researcher, 'create a company in the CRM', 'createCompany', { body: { name: 'Analytical Engines', domain: 'Engines.Example' }, idempotency_key: 'lead-1' });
    expect([company.status, company.body.domain, company.body.created_by_agent_role]).toEqual([201, 'engines.example', 'researcher']);
    const contact = await act(researcher, 'create a contact person', 'createContact', { body: { name: 'Ada Lovelace', company_id: company.body.id, email: 'ada@engines.example' } });
    expect(contact.status).toBe(201);
    const enrichTask = await act(researcher, 'create a research task for an agent role', 'createResearchTask', {
      body: { subject_type: 'contact', subject_id: contact.body.id, role: 'enricher', title: 'Fill in Ada’s role and profile' },
    });
    expect(enrichTask.body).toMatchObject({ status: 'open', role: 'enricher' });

    // The enricher takes its open tasks, fills the contact in and hands on to outreach.
    const mine = await act(enricher, 'list research tasks', 'listResearchTasks', { query_params: { role: 'enricher', status: 'open' } });
    expect((mine.body.research_tasks as Body[]).map((t) => t.id)).toEqual([enrichTask.body.id]);
    expect((await act(enricher, 'update a research task status', 'updateResearchTask', { path_params: { task_id: enrichTask.body.id }, body: { status: 'in_progress' } })).status).toBe(200);
    const enriched = await act(enricher, 'update a contact', 'updateContact', { path_params: { contact_id: contact.body.id }, body: { title: 'Head of Data', professional_network_url: 'https://network.example/in/ada' } });
    expect(enriched.body).toMatchObject({ title: 'Head of Data', company_id: company.body.id });
    await act(enricher, 'update a company', 'updateCompany', { path_params: { company_id: company.body.id }, body: { industry: 'Computing' } });
    await act(enricher, 'update a research task status', 'updateResearchTask', { path_params: { task_id: enrichTask.body.id }, body: { status: 'done' } });
    const draftTask = await act(enricher, 'create a research task for an agent role', 'createResearchTask', {
      body: { subject_type: 'contact', subject_id: contact.body.id, role: 'outreach', title: 'Write to Ada' },
    });

    // Outreach reads the context, drafts, cannot approve its own draft.
    const ctx = await act(outreach, 'get the CRM context tone positioning', 'getCrmContext');
    expect(ctx.body).toMatchObject({ tone: 'brief and plain' });
    const draft = await act(outreach, 'create an artifact draft outreach email', 'createArtifact', {
      body: { subject_type: 'contact', subject_id: contact.body.id, task_id: draftTask.body.id, kind: 'outreach_email', title: 'A gateway for your agents', body: 'Hello Ada, ...' },
    });
    expect(draft.body).toMatchObject({ status: 'draft', task_id: draftTask.body.id });
    const selfApproval = await tool(outreach, 'call_endpoint', { operation_id: 'approveArtifact', path_params: { artifact_id: draft.body.id } });
    expect(selfApproval.isError).toBe(true);
    expect(selfApproval.structuredContent).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });

    // A person approves over REST; outreach sends and closes its task.
    const approved = await api.call(owner.apiKey, { method: 'POST', url: `/v1/crm/artifacts/${draft.body.id}/approve` });
    expect([approved.statusCode, (approved.json() as Body).status]).toEqual([200, 'approved']);
    const sent = await act(outreach, 'mark an approved artifact sent', 'sendArtifact', { path_params: { artifact_id: draft.body.id } });
    expect(sent.body).toMatchObject({ status: 'sent', sent_by: expect.stringMatching(/^api_key:key_/), approved_by: expect.stringMatching(/^api_key:key_/) });
    await act(outreach, 'update a research task status', 'updateResearchTask', { path_params: { task_id: draftTask.body.id }, body: { status: 'done' } });

    const timeline = await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/activities?subject_id=${contact.body.id}&page_size=100` });
    const steps = (timeline.json() as { activities: Body[] }).activities.map((a) => `${a.record_type} ${a.verb} by ${a.actor === 'agent' ? `agent:${String(a.agent_role)}` : 'person'}`);
    expect(steps).toEqual([
      'contact created by agent:researcher',
      'task created by agent:researcher',
      'task started by agent:enricher',
      'contact enriched by agent:enricher',
      'task completed by agent:enricher',
      'task created by agent:enricher',
      'artifact drafted by agent:outreach',
      'artifact approved by person',
      'artifact sent by agent:outreach',
      'task completed by agent:outreach',
    ]);
    const companyTimeline = await api.call(owner.apiKey, { method: 'GET', url: `/v1/crm/activities?subject_id=${company.body.id}` });
    expect((companyTimeline.json() as { activities: Body[] }).activities.map((a) => [a.verb, a.agent_role])).toEqual([['created', 'researcher'], ['enriched', 'enricher']]);
  });
});
