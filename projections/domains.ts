import { decodeWith } from '../src/events/envelope.js';
import { DomainCreated, DomainDeleted, DomainVerified } from '../src/events/domains.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A custom domain as of its last event. */
export type DomainRow = {
  domain_id: string;
  project_id: string;
  domain: string;
  dns_verification_token: string;
  verified_at: string | null;
  status: 'active' | 'deleted';
  revision: number;
  created_at: string;
  updated_at: string;
};

export const DOMAIN_STREAM = 'domain-';

export function evolveDomain(row: DomainRow | undefined, event: RecordedEvent): DomainRow | null {
  switch (event.type) {
    case DomainCreated.type: {
      const { data, metadata } = decodeWith(DomainCreated, event);
      return { ...data, verified_at: null, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case DomainVerified.type: {
      const { metadata } = decodeWith(DomainVerified, event);
      return row ? { ...row, verified_at: metadata.at, revision: event.revision, updated_at: metadata.at } : null;
    }
    case DomainDeleted.type:
      return row ? { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(DomainDeleted, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

export function domainIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(DOMAIN_STREAM) ? event.stream.slice(DOMAIN_STREAM.length) : undefined;
}

export const domainsProjection = rowProjection<DomainRow>({
  name: 'domains',
  streamPrefixes: [DOMAIN_STREAM],
  table: {
    name: 'domains',
    key: 'domain_id',
    columnNames: ['domain_id', 'project_id', 'domain', 'dns_verification_token', 'verified_at', 'status', 'revision', 'created_at', 'updated_at'],
    columns: `domain_id text primary key, project_id text not null, domain text not null, dns_verification_token text not null, verified_at timestamptz,
      status text not null, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'domain_id',
    indexes: ['project_id, domain_id', 'domain'],
  },
  keyOf: domainIdOf,
  evolve: evolveDomain,
});
