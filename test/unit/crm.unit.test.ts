import { describe, expect, it } from 'vitest';
import { DomainError } from '../../commands/domain-error.js';
import { crmRecord, type CrmRecordCommand, type CrmRecordState } from '../../commands/crm/record.js';
import { activityOf } from '../../src/crm/activity.js';
import { CRM_PERMISSIONS } from '../../src/crm/permissions.js';
import { decodeEvent } from '../../src/events/catalog.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { Emit } from '../../commands/handle.js';

const ORG = 'org_01j9zq8x4m7k2n5p6r3s8t0v1w';
const CMP = 'cmp_01j9zq8x4m7k2n5p6r3s8t0v1w';
const CNT = 'cnt_01j9zq8x4m7k2n5p6r3s8t0v1w';
const ART = 'art_01j9zq8x4m7k2n5p6r3s8t0v1w';
const TSK = 'tsk_01j9zq8x4m7k2n5p6r3s8t0v1w';
const AT = '2026-01-01T00:00:00.000Z';
const EVENT_ID = '6f1c2a4e-9b7d-4c3a-8e5f-0a1b2c3d4e5f';

/** Runs commands through decide and evolve as the handler does; the last command's outcome. */
function run(type: Parameters<typeof crmRecord>[0], commands: CrmRecordCommand[], actor = 'api_key:key_1'): { state: CrmRecordState; last: Emit[] | DomainError; events: ReturnType<typeof decodeEvent>[] } {
  const aggregate = crmRecord(type);
  let state = aggregate.initial;
  let last: Emit[] | DomainError = [];
  const events: ReturnType<typeof decodeEvent>[] = [];
  for (const command of commands) {
    last = aggregate.decide(state, command, AT);
    if (last instanceof DomainError) continue;
    for (const emitted of last) {
      const encoded = encodeEvent(emitted.definition, emitted.data, { event_id: EVENT_ID, correlation_id: 'test', actor, at: AT });
      const event = decodeEvent({ ...encoded, stream: `crm${type}-x`, revision: state.revision + 1, position: BigInt(events.length + 1) });
      events.push(event);
      state = aggregate.evolve(state, event);
    }
  }
  return { state, last, events };
}

const createArtifact: CrmRecordCommand = { kind: 'create', recordId: ART, orgId: ORG, agentRole: 'outreach', fields: { subject_type: 'contact', subject_id: CNT, task_id: null, kind: 'outreach_email', title: 't', body: '' } };
const move = (transition: 'approve' | 'send' | 'discard'): CrmRecordCommand => ({ kind: 'transition', transition, agentRole: null });
const codeOf = (outcome: Emit[] | DomainError) => (outcome instanceof DomainError ? outcome.code : outcome.map((e) => e.definition.name).join());

describe('artifact transitions', () => {
  it.each([
    [['approve'], 'ArtifactApproved'],
    [['approve', 'send'], 'ArtifactSent'],
    [['discard'], 'ArtifactDiscarded'],
    [['approve', 'discard'], 'ArtifactDiscarded'],
    [['send'], 'INVALID_STATE'],
    [['approve', 'approve'], 'INVALID_STATE'],
    [['approve', 'send', 'discard'], 'INVALID_STATE'],
    [['approve', 'send', 'send'], 'INVALID_STATE'],
    [['discard', 'approve'], 'INVALID_STATE'],
    [['discard', 'discard'], 'INVALID_STATE'],
  ] as const)('%j ends in %s', (moves, outcome) => {
    expect(codeOf(run('artifact', [createArtifact, ...moves.map(move)]).last)).toBe(outcome);
  });

  it('changes only a draft’s content', () => {
    const edit: CrmRecordCommand = { kind: 'update', changes: { body: 'new' }, agentRole: 'outreach' };
    expect(codeOf(run('artifact', [createArtifact, edit]).last)).toBe('ArtifactUpdated');
    expect(codeOf(run('artifact', [createArtifact, move('approve'), edit]).last)).toBe('INVALID_STATE');
  });
});

describe('records', () => {
  it('lowercases a company’s domain on create and update, and refuses a stale If-Match', () => {
    const created = run('company', [{ kind: 'create', recordId: CMP, orgId: ORG, agentRole: null, fields: { name: 'E', description: '', domain: 'Example.COM', industry: null, location: null, logo_url: null } }, { kind: 'update', changes: { domain: 'WWW.Example.com' }, agentRole: 'enricher' }]);
    expect(created.events.map((e) => e.data)).toMatchObject([{ fields: { domain: 'example.com' } }, { changes: { domain: 'www.example.com' } }]);
    expect(codeOf(run('company', [{ kind: 'create', recordId: CMP, orgId: ORG, agentRole: null, fields: { name: 'E', description: '', domain: null, industry: null, location: null, logo_url: null } }, { kind: 'delete', agentRole: null, ifRevision: 4 }]).last)).toBe('PRECONDITION_FAILED');
  });

  it('moves a task open → in_progress → done and refuses anything after done', () => {
    const task: CrmRecordCommand = { kind: 'create', recordId: TSK, orgId: ORG, agentRole: null, fields: { subject_type: 'company', subject_id: CMP, role: 'researcher', title: 't', instructions: '', status: 'open' } };
    const status = (value: string): CrmRecordCommand => ({ kind: 'update', changes: { status: value }, agentRole: 'researcher' });
    expect(codeOf(run('task', [task, status('in_progress'), status('done')]).last)).toBe('ResearchTaskUpdated');
    expect(codeOf(run('task', [task, status('done'), status('open')]).last)).toBe('INVALID_STATE');
    expect(codeOf(run('task', [task, status('cancelled'), { kind: 'update', changes: { title: 'x' }, agentRole: null }]).last)).toBe('INVALID_STATE');
    expect(codeOf(run('task', [task, status('cancelled'), { kind: 'delete', agentRole: null }]).last)).toBe('ResearchTaskDeleted');
  });

  it('lets an agent change only its own role’s task, never its role, decided on the stream (a reassignment it raced is seen)', () => {
    const task: CrmRecordCommand = { kind: 'create', recordId: TSK, orgId: ORG, agentRole: null, fields: { subject_type: 'company', subject_id: CMP, role: 'outreach', title: 't', instructions: '', status: 'open' } };
    const change = (agentRole: 'researcher' | 'outreach' | null, changes: Record<string, unknown>): CrmRecordCommand => ({ kind: 'update', changes, agentRole });
    expect(codeOf(run('task', [task, change('outreach', { role: 'researcher' })]).last)).toBe('FORBIDDEN');
    expect(codeOf(run('task', [task, change('researcher', { status: 'in_progress' })]).last)).toBe('FORBIDDEN');
    expect(codeOf(run('task', [task, change(null, { role: 'researcher' }), change('outreach', { title: 'late' })]).last)).toBe('FORBIDDEN');
    expect(codeOf(run('task', [task, change('outreach', { role: 'outreach', status: 'in_progress' })]).last)).toBe('ResearchTaskUpdated');
    expect(codeOf(run('task', [task, change('researcher', { status: 'cancelled' }), change('researcher', { title: 'x' })]).last)).toBe('FORBIDDEN');
  });
});

describe('activities', () => {
  it('places an artifact’s activity on its subject’s timeline, with agent or person as actor', () => {
    const { events } = run('artifact', [createArtifact, move('approve')], 'api_key:key_9');
    expect(events.map((event) => activityOf(event, EVENT_ID))).toEqual([
      { activity_id: 'act_6f1c2a4e9b7d4c3a8e5f0a1b2c3d4e5f', org_id: ORG, subject_type: 'contact', subject_id: CNT, record_type: 'artifact', record_id: ART, actor: 'agent', agent_role: 'outreach', principal: 'api_key:key_9', verb: 'drafted', fields: [], at: AT },
      { activity_id: 'act_6f1c2a4e9b7d4c3a8e5f0a1b2c3d4e5f', org_id: ORG, subject_type: 'contact', subject_id: CNT, record_type: 'artifact', record_id: ART, actor: 'api_key:key_9', agent_role: null, principal: 'api_key:key_9', verb: 'approved', fields: [], at: AT },
    ]);
  });

  it('names an update by who made it and what it changed', () => {
    const company: CrmRecordCommand = { kind: 'create', recordId: CMP, orgId: ORG, agentRole: null, fields: { name: 'E', description: '', domain: null, industry: null, location: null, logo_url: null } };
    const { events } = run('company', [company, { kind: 'update', changes: { location: 'Berlin', industry: 'Retail' }, agentRole: 'enricher' }, { kind: 'update', changes: { name: 'F' }, agentRole: null }]);
    expect(events.map((event) => activityOf(event, EVENT_ID)).map((a) => [a?.verb, a?.actor, a?.fields])).toEqual([
      ['created', 'api_key:key_1', []],
      ['enriched', 'agent', ['industry', 'location']],
      ['updated', 'api_key:key_1', ['name']],
    ]);
  });
});

describe('permissions', () => {
  it('lets no agent role approve, only outreach send, and every role read', () => {
    expect(CRM_PERMISSIONS.approveArtifact.agents).toEqual([]);
    expect(CRM_PERMISSIONS.sendArtifact.agents).toEqual(['outreach']);
    for (const [operation, permission] of Object.entries(CRM_PERMISSIONS)) {
      if (/^(list|get)/.test(operation)) expect([operation, permission.human, permission.agents]).toEqual([operation, 'viewer', ['researcher', 'enricher', 'outreach']]);
      else expect([operation, permission.human]).toEqual([operation, 'member']);
    }
  });
});
