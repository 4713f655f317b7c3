import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { changes, OrgId, ProjectId, SealedSecret, text } from './fields.js';

export const Cloud = z.enum(['aws', 'azure', 'gcp']);
export type Cloud = z.infer<typeof Cloud>;

/** Limits of spec §8: name 1-100, description at most 500, at most 10 tags of at most 50 characters. */
const projectFields = {
  name: text(100, 1),
  description: text(500),
  tags: z.array(text(50, 1)).max(10),
};

/** A project was created in an organization (with its primary database, registered alongside). */
export const ProjectCreated = defineEvent(
  'ProjectCreated',
  1,
  z.strictObject({
    project_id: ProjectId,
    org_id: OrgId,
    ...projectFields,
    cloud: Cloud,
    self_hosted: z.boolean(),
  }),
);
export type ProjectCreated = z.infer<typeof ProjectCreated.schema>;

/** A project's name, description or tags changed; `changes` holds only the fields that changed. */
export const ProjectUpdated = defineEvent(
  'ProjectUpdated',
  1,
  z.strictObject({ project_id: ProjectId, changes: changes(projectFields) }),
);
export type ProjectUpdated = z.infer<typeof ProjectUpdated.schema>;

/** A project was deleted. */
export const ProjectDeleted = defineEvent('ProjectDeleted', 1, z.strictObject({ project_id: ProjectId }));
export type ProjectDeleted = z.infer<typeof ProjectDeleted.schema>;

/**
 * A project's key for the `hash` mask, generated once (on its stream `hashkey-<project id>`, whose
 * first event wins): 32 random bytes, hex, sealed under the keyring with `hash-key:<project id>` as
 * associated data. Never shown, logged or sent to an agent.
 */
export const ProjectHashKeyGenerated = defineEvent('ProjectHashKeyGenerated', 1, z.strictObject({ project_id: ProjectId, key: SealedSecret }));
export type ProjectHashKeyGenerated = z.infer<typeof ProjectHashKeyGenerated.schema>;
