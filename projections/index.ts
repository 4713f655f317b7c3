import type { Projection } from './projection.js';
import { apiKeysProjection } from './api-keys.js';
import { credentialsProjection } from './credentials.js';
import { databasesProjection, replicasProjection } from './databases.js';
import { organizationsProjection } from './organizations.js';
import { policiesProjection } from './policies.js';
import { projectsProjection } from './projects.js';

/** Every projection the projector role runs. */
export const projections: readonly Projection[] = [organizationsProjection, apiKeysProjection, projectsProjection, databasesProjection, replicasProjection, policiesProjection, credentialsProjection];

export function projectionNamed(name: string): Projection | undefined {
  return projections.find((p) => p.name === name);
}
