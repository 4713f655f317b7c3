import {
  CredentialDisabled,
  CredentialEnabled,
  CredentialExpired,
  CredentialIpRulesSet,
  CredentialRegistered,
  CredentialRenamed,
  CredentialRevoked,
  CredentialRotated,
  CredentialUsed,
} from '../src/events/credentials.js';
import { decodeWith } from '../src/events/envelope.js';
import type { ScramVerifier } from '../src/events/fields.js';
import type { IpRuleLists } from '../src/net/ip-rules.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type CredentialRow = {
  credential_id: string;
  project_id: string;
  database_id: string;
  policy_profile_id: string;
  name: string;
  pg_username: string;
  principal_type: string;
  status: 'active' | 'disabled' | 'revoked';
  /** The password's SCRAM verifier and the MCP token's hash: read by the proxy and the hosted MCP, never by an API response. */
  scram: ScramVerifier;
  token_hash: string;
  token_prefix: string;
  secret_version: number;
  expires_at: string | null;
  /** When a sweep recorded the expiry (the expiry instant itself); the credential was unusable from expires_at regardless. */
  expired_at: string | null;
  last_used_at: string | null;
  /** The credential's own IP rules, checked beside its project's; both lists empty when none were set. */
  ip_rules: IpRuleLists;
  /** Stream revision of the last event, CredentialUsed included: the ETag. */
  revision: number;
  created_at: string;
  updated_at: string;
};

/** A credential's IP rules until some are set: every address its project's rules allow. */
export const NO_IP_RULES: IpRuleLists = { allow: [], deny: [] };

/** The later of two instants; CredentialUsed events of several proxies may arrive out of order. */
function later(current: string | null, candidate: string): string {
  return current !== null && Date.parse(current) >= Date.parse(candidate) ? current : candidate;
}

export function evolveCredential(row: CredentialRow | undefined, event: RecordedEvent): CredentialRow | null {
  if (event.type === CredentialRegistered.type) {
    const { data, metadata } = decodeWith(CredentialRegistered, event);
    return { ...data, status: 'active', secret_version: 1, expired_at: null, last_used_at: null, ip_rules: NO_IP_RULES, revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
  }
  if (!row) return null;
  switch (event.type) {
    case CredentialRotated.type: {
      const { data, metadata } = decodeWith(CredentialRotated, event);
      return { ...row, scram: data.scram, token_hash: data.token_hash, token_prefix: data.token_prefix, secret_version: data.secret_version, revision: event.revision, updated_at: metadata.at };
    }
    case CredentialRenamed.type: {
      const { data, metadata } = decodeWith(CredentialRenamed, event);
      return { ...row, name: data.name, revision: event.revision, updated_at: metadata.at };
    }
    case CredentialDisabled.type:
      return { ...row, status: 'disabled', revision: event.revision, updated_at: decodeWith(CredentialDisabled, event).metadata.at };
    case CredentialEnabled.type:
      return { ...row, status: 'active', revision: event.revision, updated_at: decodeWith(CredentialEnabled, event).metadata.at };
    case CredentialRevoked.type:
      return { ...row, status: 'revoked', revision: event.revision, updated_at: decodeWith(CredentialRevoked, event).metadata.at };
    case CredentialExpired.type: {
      const { data, metadata } = decodeWith(CredentialExpired, event);
      return { ...row, expired_at: data.expired_at, revision: event.revision, updated_at: metadata.at };
    }
    case CredentialIpRulesSet.type: {
      const { data, metadata } = decodeWith(CredentialIpRulesSet, event);
      return { ...row, ip_rules: { allow: data.allow, deny: data.deny }, revision: event.revision, updated_at: metadata.at };
    }
    case CredentialUsed.type:
      // Usage is not a modification: it moves last_used_at and the ETag, not updated_at.
      return { ...row, last_used_at: later(row.last_used_at, decodeWith(CredentialUsed, event).data.used_at), revision: event.revision };
    default:
      return row;
  }
}

const IP_RULES_COLUMN = `ip_rules jsonb not null default '{"allow": [], "deny": []}'`;

export const credentialsProjection = rowProjection<CredentialRow>({
  name: 'credentials',
  streamPrefixes: ['credential-'],
  table: {
    name: 'credentials',
    key: 'credential_id',
    columnNames: [
      'credential_id', 'project_id', 'database_id', 'policy_profile_id', 'name', 'pg_username', 'principal_type', 'status', 'scram', 'token_hash',
      'token_prefix', 'secret_version', 'expires_at', 'expired_at', 'last_used_at', 'revision', 'created_at', 'updated_at', 'ip_rules',
    ],
    columns: `credential_id text primary key, project_id text not null, database_id text not null, policy_profile_id text not null, name text not null,
      pg_username text not null unique, principal_type text not null, status text not null, scram jsonb not null, token_hash text not null unique,
      token_prefix text not null, secret_version integer not null, expires_at timestamptz, expired_at timestamptz, last_used_at timestamptz,
      revision integer not null, created_at timestamptz not null, updated_at timestamptz not null, ${IP_RULES_COLUMN}`,
    addedColumns: [IP_RULES_COLUMN],
    orderBy: 'credential_id',
    indexes: ['project_id, credential_id', 'policy_profile_id', 'expires_at'],
  },
  keyOf: (event) => (event.stream.startsWith('credential-') ? event.stream.slice('credential-'.length) : undefined),
  evolve: evolveCredential,
});
