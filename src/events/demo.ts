import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { DatabaseId, OrgId, PolicyId, ProjectId, Reason } from './fields.js';
import { Plan } from './organizations.js';

/** A tier of demo credentials is a plan name; each names the policy its credentials enforce. */
export const DemoTier = Plan;
export type DemoTier = z.infer<typeof DemoTier>;

/** The demo's organization, project, database and per-tier policies were set up (spec §4.8). */
export const DemoProvisioned = defineEvent(
  'DemoProvisioned',
  1,
  z.strictObject({
    org_id: OrgId,
    project_id: ProjectId,
    database_id: DatabaseId,
    tiers: z.array(z.strictObject({ tier: DemoTier, policy_id: PolicyId })).max(DemoTier.options.length),
  }),
);
export type DemoProvisioned = z.infer<typeof DemoProvisioned.schema>;

/** An operator paused the demo: no credentials are vended, and the live ones were disabled. */
export const DemoPaused = defineEvent('DemoPaused', 1, z.strictObject({ reason: Reason }));
export type DemoPaused = z.infer<typeof DemoPaused.schema>;

/** The demo vends credentials again. */
export const DemoResumed = defineEvent('DemoResumed', 1, z.strictObject({}));
export type DemoResumed = z.infer<typeof DemoResumed.schema>;
