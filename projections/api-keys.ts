import { decodeWith } from '../src/events/envelope.js';
import { ApiKeyCreated, ApiKeyRevoked } from '../src/events/organizations.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type ApiKeyRow = {
  key_id: string;
  org_id: string;
  name: string;
  role: string;
  prefix: string;
  token_hash: string;
  status: 'active' | 'revoked';
  created_at: string;
  revoked_at: string | null;
};

function keyIdOf(event: RecordedEvent): string | undefined {
  if (event.type === ApiKeyCreated.type) return decodeWith(ApiKeyCreated, event).data.key_id;
  if (event.type === ApiKeyRevoked.type) return decodeWith(ApiKeyRevoked, event).data.key_id;
  return undefined;
}

export function evolveApiKey(row: ApiKeyRow | undefined, event: RecordedEvent): ApiKeyRow | null {
  if (event.type === ApiKeyCreated.type) {
    const { data, metadata } = decodeWith(ApiKeyCreated, event);
    return { ...data, status: 'active', created_at: metadata.at, revoked_at: null };
  }
  if (event.type === ApiKeyRevoked.type && row) return { ...row, status: 'revoked', revoked_at: decodeWith(ApiKeyRevoked, event).metadata.at };
  return row ?? null;
}

export const apiKeysProjection = rowProjection<ApiKeyRow>({
  name: 'api_keys',
  streamPrefixes: ['org-'],
  table: {
    name: 'api_keys',
    key: 'key_id',
    columnNames: ['key_id', 'org_id', 'name', 'role', 'prefix', 'token_hash', 'status', 'created_at', 'revoked_at'],
    columns: `key_id text primary key, org_id text not null, name text not null, role text not null, prefix text not null,
      token_hash text not null unique, status text not null, created_at timestamptz not null, revoked_at timestamptz`,
    orderBy: 'key_id',
    indexes: ['org_id, key_id'],
  },
  keyOf: keyIdOf,
  evolve: evolveApiKey,
});
