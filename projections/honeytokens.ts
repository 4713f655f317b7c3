import { decodeWith } from '../src/events/envelope.js';
import { HoneytokenCreated, HoneytokenDeleted, type HoneytokenKind } from '../src/events/honeytokens.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type HoneytokenRow = {
  honeytoken_id: string;
  project_id: string;
  kind: HoneytokenKind;
  target: string;
  disable_credential: boolean;
  status: 'active' | 'deleted';
  revision: number;
  created_at: string;
  updated_at: string;
};

const STREAM = 'honeytoken-';

export function evolveHoneytoken(row: HoneytokenRow | undefined, event: RecordedEvent): HoneytokenRow | null {
  switch (event.type) {
    case HoneytokenCreated.type: {
      const { data, metadata } = decodeWith(HoneytokenCreated, event);
      return { ...data, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case HoneytokenDeleted.type:
      return row ? { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(HoneytokenDeleted, event).metadata.at } : null;
    default:
      return row ?? null;
  }
}

/** The honeytoken an event of its stream concerns. */
export function honeytokenIdOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(STREAM) ? event.stream.slice(STREAM.length) : undefined;
}

export const honeytokensProjection = rowProjection<HoneytokenRow>({
  name: 'honeytokens',
  streamPrefixes: [STREAM],
  table: {
    name: 'honeytokens',
    key: 'honeytoken_id',
    columnNames: ['honeytoken_id', 'project_id', 'kind', 'target', 'disable_credential', 'status', 'revision', 'created_at', 'updated_at'],
    columns: `honeytoken_id text primary key, project_id text not null, kind text not null, target text not null, disable_credential boolean not null,
      status text not null, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'honeytoken_id',
    indexes: ['project_id, honeytoken_id'],
  },
  keyOf: honeytokenIdOf,
  evolve: evolveHoneytoken,
});
