import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { DatabaseRegistered, DatabaseRemoved, DatabaseUpdated, ReplicaAdded, ReplicaRemoved, ReplicaUpdated } from '../../src/events/databases.js';
import { ProjectCreated, ProjectDeleted, ProjectUpdated } from '../../src/events/projects.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/**
 * A project and the databases registered under it share one stream (`project-<id>`), so creating
 * a project with its primary database is one atomic append in every event store. Each database's
 * `revision` is the stream revision of its last change: its ETag.
 */
export interface DatabaseState {
  readonly removed: boolean;
  readonly revision: number;
  /** Each live replica's revision: the stream revision of its last change, its ETag. */
  readonly replicas: ReadonlyMap<string, number>;
}

export interface ProjectState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly projectId?: string;
  readonly orgId?: string;
  /** Stream revision of the last project-level event: the project's ETag. */
  readonly revision: number;
  readonly databases: ReadonlyMap<string, DatabaseState>;
}

type ProjectCreatedData = z.input<typeof ProjectCreated.schema>;
type DatabaseData = z.input<typeof DatabaseRegistered.schema>;
type ProjectChanges = z.input<typeof ProjectUpdated.schema>['changes'];
type DatabaseChanges = z.input<typeof DatabaseUpdated.schema>['changes'];
type ReplicaData = z.input<typeof ReplicaAdded.schema>;
type ReplicaChanges = z.input<typeof ReplicaUpdated.schema>['changes'];

export type ProjectCommand =
  | { readonly kind: 'create'; readonly project: ProjectCreatedData; readonly database: DatabaseData }
  | { readonly kind: 'update'; readonly changes: ProjectChanges; readonly ifRevision?: number }
  /** `liveCredentials` counts the project's agent credentials not revoked; the route looks it up. */
  | { readonly kind: 'delete'; readonly liveCredentials: number; readonly ifRevision?: number }
  | { readonly kind: 'add-database'; readonly database: DatabaseData }
  | { readonly kind: 'update-database'; readonly databaseId: string; readonly changes: DatabaseChanges; readonly ifRevision?: number }
  | { readonly kind: 'remove-database'; readonly databaseId: string; readonly ifRevision?: number }
  | { readonly kind: 'add-replica'; readonly replica: ReplicaData }
  | { readonly kind: 'update-replica'; readonly databaseId: string; readonly replicaId: string; readonly changes: ReplicaChanges; readonly ifRevision?: number }
  | { readonly kind: 'remove-replica'; readonly databaseId: string; readonly replicaId: string };

function withDatabase(state: ProjectState, id: string, change: (db: DatabaseState) => DatabaseState, revision: number): ProjectState {
  const current = state.databases.get(id) ?? { removed: false, revision, replicas: new Map<string, number>() };
  return { ...state, databases: new Map(state.databases).set(id, { ...change(current), revision }) };
}

/** A replica's change moves the replica's revision, not its database's (the database's ETag stays). */
function withReplica(state: ProjectState, databaseId: string, replicaId: string, revision: number | undefined): ProjectState {
  const db = state.databases.get(databaseId);
  if (!db) return state;
  const replicas = new Map(db.replicas);
  if (revision === undefined) replicas.delete(replicaId);
  else replicas.set(replicaId, revision);
  return { ...state, databases: new Map(state.databases).set(databaseId, { ...db, replicas }) };
}

function evolve(state: ProjectState, event: CatalogEvent): ProjectState {
  switch (event.type) {
    case ProjectCreated.type:
      return { ...state, revision: event.revision, exists: true, projectId: event.data.project_id, orgId: event.data.org_id };
    case ProjectUpdated.type:
      return { ...state, revision: event.revision };
    case ProjectDeleted.type:
      return { ...state, revision: event.revision, deleted: true };
    case DatabaseRegistered.type:
      return withDatabase(state, event.data.database_id, (db) => db, event.revision);
    case DatabaseUpdated.type:
      return withDatabase(state, event.data.database_id, (db) => db, event.revision);
    case DatabaseRemoved.type:
      return withDatabase(state, event.data.database_id, (db) => ({ ...db, removed: true }), event.revision);
    case ReplicaAdded.type:
    case ReplicaUpdated.type:
      return withReplica(state, event.data.database_id, event.data.replica_id, event.revision);
    case ReplicaRemoved.type:
      return withReplica(state, event.data.database_id, event.data.replica_id, undefined);
    default:
      return state;
  }
}

function precondition(actual: number, expected: number | undefined, what: string): DomainError | undefined {
  if (expected !== undefined && expected !== actual) {
    return new DomainError('PRECONDITION_FAILED', `${what} is at revision ${actual}, not ${expected}: fetch it again and retry with its ETag`);
  }
  return undefined;
}

function liveDatabase(state: ProjectState, id: string): DatabaseState | DomainError {
  const db = state.databases.get(id);
  if (!db || db.removed) return new DomainError('NOT_FOUND', `database ${id} not found`);
  return db;
}

function decide(state: ProjectState, command: ProjectCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `project ${command.project.project_id} already exists`);
    return [emit(ProjectCreated, command.project), emit(DatabaseRegistered, command.database)];
  }
  if (!state.exists || state.deleted) return new DomainError('NOT_FOUND', 'project not found');
  switch (command.kind) {
    case 'update':
      return precondition(state.revision, command.ifRevision, 'the project') ?? [emit(ProjectUpdated, { project_id: state.projectId!, changes: command.changes })];
    case 'delete': {
      const stale = precondition(state.revision, command.ifRevision, 'the project');
      if (stale) return stale;
      // A deleted project's credentials would keep reaching its databases, and no route could revoke them any more.
      if (command.liveCredentials > 0) {
        return new DomainError('CONFLICT', `the project has ${command.liveCredentials} agent credential(s) not revoked; revoke them first (DELETE .../agents/{agent_id})`);
      }
      return [emit(ProjectDeleted, { project_id: state.projectId! })];
    }
    case 'add-database':
      return [emit(DatabaseRegistered, command.database)];
    case 'update-database': {
      const db = liveDatabase(state, command.databaseId);
      if (db instanceof DomainError) return db;
      return precondition(db.revision, command.ifRevision, 'the database') ?? [emit(DatabaseUpdated, { database_id: command.databaseId, changes: command.changes })];
    }
    case 'remove-database': {
      const db = liveDatabase(state, command.databaseId);
      if (db instanceof DomainError) return db;
      const live = [...state.databases.values()].filter((d) => !d.removed).length;
      if (live === 1) return new DomainError('CONFLICT', 'a project keeps at least one database; delete the project instead');
      return precondition(db.revision, command.ifRevision, 'the database') ?? [emit(DatabaseRemoved, { database_id: command.databaseId })];
    }
    case 'add-replica': {
      const db = liveDatabase(state, command.replica.database_id);
      return db instanceof DomainError ? db : [emit(ReplicaAdded, command.replica)];
    }
    case 'update-replica': {
      const db = liveDatabase(state, command.databaseId);
      if (db instanceof DomainError) return db;
      const revision = db.replicas.get(command.replicaId);
      if (revision === undefined) return new DomainError('NOT_FOUND', `replica ${command.replicaId} not found`);
      return (
        precondition(revision, command.ifRevision, 'the replica') ??
        [emit(ReplicaUpdated, { replica_id: command.replicaId, database_id: command.databaseId, changes: command.changes })]
      );
    }
    case 'remove-replica': {
      const db = liveDatabase(state, command.databaseId);
      if (db instanceof DomainError) return db;
      if (!db.replicas.has(command.replicaId)) return new DomainError('NOT_FOUND', `replica ${command.replicaId} not found`);
      return [emit(ReplicaRemoved, { replica_id: command.replicaId, database_id: command.databaseId })];
    }
  }
}

export const project: Aggregate<ProjectState, ProjectCommand> = {
  initial: { exists: false, deleted: false, revision: -1, databases: new Map() },
  evolve,
  decide,
};
