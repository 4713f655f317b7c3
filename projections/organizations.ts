import { decodeWith } from '../src/events/envelope.js';
import { OrganizationBillingChanged, OrganizationCreated, OrganizationPlanChanged } from '../src/events/organizations.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type OrganizationRow = {
  org_id: string;
  name: string;
  plan: string;
  features: string[];
  /** Who bills it and its subscription's state (OrganizationBillingChanged); `none` until an operator records them. */
  billing_provider: string;
  subscription_status: string;
  created_at: string;
  updated_at: string;
};

const handled: ReadonlySet<string> = new Set([OrganizationCreated.type, OrganizationPlanChanged.type, OrganizationBillingChanged.type]);

export function evolveOrganization(row: OrganizationRow | undefined, event: RecordedEvent): OrganizationRow | null {
  switch (event.type) {
    case OrganizationCreated.type: {
      const { data, metadata } = decodeWith(OrganizationCreated, event);
      return { org_id: data.org_id, name: data.name, plan: data.plan, features: data.features, billing_provider: 'none', subscription_status: 'none', created_at: metadata.at, updated_at: metadata.at };
    }
    case OrganizationPlanChanged.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(OrganizationPlanChanged, event);
      return { ...row, plan: data.plan, features: data.features, updated_at: metadata.at };
    }
    case OrganizationBillingChanged.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(OrganizationBillingChanged, event);
      return { ...row, billing_provider: data.billing_provider, subscription_status: data.subscription_status, updated_at: metadata.at };
    }
    default:
      return row ?? null;
  }
}

export const organizationsProjection = rowProjection<OrganizationRow>({
  name: 'organizations',
  streamPrefixes: ['org-'],
  table: {
    name: 'organizations',
    key: 'org_id',
    columnNames: ['org_id', 'name', 'plan', 'features', 'billing_provider', 'subscription_status', 'created_at', 'updated_at'],
    columns: `org_id text primary key, name text not null, plan text not null, features jsonb not null, billing_provider text not null default 'none',
      subscription_status text not null default 'none', created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'org_id',
    addedColumns: [`billing_provider text not null default 'none'`, `subscription_status text not null default 'none'`],
  },
  keyOf: (event) => (handled.has(event.type) ? event.stream.slice('org-'.length) : undefined),
  evolve: evolveOrganization,
});
