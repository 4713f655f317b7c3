import type { Projection } from './projection.js';
import { apiKeysProjection } from './api-keys.js';
import { databasesProjection, replicasProjection } from './databases.js';
import { organizationsProjection } from './organizations.js';
import { projectsProjection } from './projects.js';

/** Every projection the projector role runs. */
export const projections: readonly Projection[] = [organizationsProjection, apiKeysProjection, projectsProjection, databasesProjection, replicasProjection];

export function projectionNamed(name: string): Projection | undefined {
  return projections.find((p) => p.name === name);
}
