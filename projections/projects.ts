import { decodeWith } from '../src/events/envelope.js';
import { ProjectCreated, ProjectDeleted, ProjectUpdated } from '../src/events/projects.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type ProjectRow = {
  project_id: string;
  org_id: string;
  name: string;
  description: string;
  cloud: string;
  self_hosted: boolean;
  tags: string[];
  status: 'active' | 'deleted';
  /** Stream revision of the last project-level event: the ETag. */
  revision: number;
  created_at: string;
  updated_at: string;
};

const handled: ReadonlySet<string> = new Set([ProjectCreated.type, ProjectUpdated.type, ProjectDeleted.type]);

export function evolveProject(row: ProjectRow | undefined, event: RecordedEvent): ProjectRow | null {
  switch (event.type) {
    case ProjectCreated.type: {
      const { data, metadata } = decodeWith(ProjectCreated, event);
      return { ...data, status: 'active', revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case ProjectUpdated.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(ProjectUpdated, event);
      return { ...row, ...data.changes, revision: event.revision, updated_at: metadata.at };
    }
    case ProjectDeleted.type: {
      if (!row) return null;
      return { ...row, status: 'deleted', revision: event.revision, updated_at: decodeWith(ProjectDeleted, event).metadata.at };
    }
    default:
      return row ?? null;
  }
}

export const projectsProjection = rowProjection<ProjectRow>({
  name: 'projects',
  streamPrefixes: ['project-'],
  table: {
    name: 'projects',
    key: 'project_id',
    columnNames: ['project_id', 'org_id', 'name', 'description', 'cloud', 'self_hosted', 'tags', 'status', 'revision', 'created_at', 'updated_at'],
    columns: `project_id text primary key, org_id text not null, name text not null, description text not null, cloud text not null,
      self_hosted boolean not null, tags jsonb not null, status text not null, revision integer not null,
      created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'project_id',
    indexes: ['org_id, project_id'],
  },
  keyOf: (event) => (handled.has(event.type) ? event.stream.slice('project-'.length) : undefined),
  evolve: evolveProject,
});
