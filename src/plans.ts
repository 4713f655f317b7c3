import type { Plan } from './events/organizations.js';

export interface PlanTerms {
  /** 0 means no limit. */
  readonly queriesPerDay: number;
  /** 0 means no limit. */
  readonly bytesPerMonth: bigint;
  /** Price of 1,000 queries over the limit; 0 means a hard cap. */
  readonly overagePer1kQueries: number;
  /** Price of a GB over the limit; 0 means a hard cap. */
  readonly overagePerGb: number;
  readonly selfHostedAllowed: boolean;
  /** Feature flags a new organization on this plan gets. */
  readonly defaultFeatures: readonly string[];
}

const GiB = 1024n ** 3n;

export const plans: Readonly<Record<Plan, PlanTerms>> = {
  free: { queriesPerDay: 10_000, bytesPerMonth: 1n * GiB, overagePer1kQueries: 0, overagePerGb: 0, selfHostedAllowed: false, defaultFeatures: ['agent-gateway'] },
  pro: { queriesPerDay: 1_000_000, bytesPerMonth: 100n * GiB, overagePer1kQueries: 0.05, overagePerGb: 0.09, selfHostedAllowed: false, defaultFeatures: ['agent-gateway'] },
  scale: { queriesPerDay: 10_000_000, bytesPerMonth: 1024n * GiB, overagePer1kQueries: 0.03, overagePerGb: 0.05, selfHostedAllowed: true, defaultFeatures: ['agent-gateway'] },
  enterprise: { queriesPerDay: 0, bytesPerMonth: 0n, overagePer1kQueries: 0, overagePerGb: 0, selfHostedAllowed: true, defaultFeatures: ['agent-gateway'] },
};
