import { decodeWith } from '../src/events/envelope.js';
import { IpRulesSet, type StoredCidrEntry } from '../src/events/ip-rules.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A project's IP rules; a project without a row has none (every address allowed). `version` is their ETag. */
export type IpRulesRow = {
  project_id: string;
  allow: StoredCidrEntry[];
  deny: StoredCidrEntry[];
  version: number;
  updated_at: string;
};

const STREAM = 'iprules-';

export function evolveIpRules(row: IpRulesRow | undefined, event: RecordedEvent): IpRulesRow | null {
  if (event.type !== IpRulesSet.type) return row ?? null;
  const { data, metadata } = decodeWith(IpRulesSet, event);
  return { project_id: data.project_id, allow: data.allow, deny: data.deny, version: (row?.version ?? 0) + 1, updated_at: metadata.at };
}

/** The project an event of its rules' stream concerns. */
export function ipRulesProjectOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(STREAM) ? event.stream.slice(STREAM.length) : undefined;
}

export const ipRulesProjection = rowProjection<IpRulesRow>({
  name: 'ip_rules',
  streamPrefixes: [STREAM],
  table: {
    name: 'ip_rules',
    key: 'project_id',
    columnNames: ['project_id', 'allow', 'deny', 'version', 'updated_at'],
    columns: 'project_id text primary key, allow jsonb not null, deny jsonb not null, version integer not null, updated_at timestamptz not null',
    orderBy: 'project_id',
  },
  keyOf: ipRulesProjectOf,
  evolve: evolveIpRules,
});
