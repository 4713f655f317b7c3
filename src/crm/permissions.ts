/**
 * Who may call each CRM operation (docs/crm.md): the least human role, and the agent roles
 * allowed. Approving an artifact is for people only; an agent role not listed gets 403 FORBIDDEN.
 */
import type { AgentRole, HumanRole } from '../events/organizations.js';

export interface CrmPermission {
  readonly human: HumanRole;
  readonly agents: readonly AgentRole[];
}

const EVERY_AGENT: readonly AgentRole[] = ['researcher', 'enricher', 'outreach'];
const read: CrmPermission = { human: 'viewer', agents: EVERY_AGENT };
const people: CrmPermission = { human: 'member', agents: [] };
const finders: CrmPermission = { human: 'member', agents: ['researcher', 'enricher'] };
const drafters: CrmPermission = { human: 'member', agents: ['researcher', 'outreach'] };

export const CRM_PERMISSIONS = {
  listCompanies: read,
  getCompany: read,
  createCompany: finders,
  updateCompany: finders,
  deleteCompany: people,
  listContacts: read,
  getContact: read,
  createContact: finders,
  updateContact: finders,
  deleteContact: people,
  listDeals: read,
  getDeal: read,
  createDeal: people,
  updateDeal: { human: 'member', agents: ['enricher'] },
  deleteDeal: people,
  listResearchTasks: read,
  getResearchTask: read,
  createResearchTask: finders,
  /** An agent changes only the tasks assigned to its own role (checked against the task). */
  updateResearchTask: { human: 'member', agents: EVERY_AGENT },
  deleteResearchTask: people,
  listArtifacts: read,
  getArtifact: read,
  createArtifact: drafters,
  updateArtifact: drafters,
  discardArtifact: drafters,
  deleteArtifact: people,
  approveArtifact: people,
  sendArtifact: { human: 'member', agents: ['outreach'] },
  listActivities: read,
  getActivity: read,
  getCrmContext: read,
  setCrmContext: people,
} as const satisfies Record<string, CrmPermission>;

export type CrmOperation = keyof typeof CRM_PERMISSIONS;
