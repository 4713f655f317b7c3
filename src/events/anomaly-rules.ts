/**
 * Anomaly rules (docs/anomalies.md): per project, each detector's settings; per credential, any of
 * them overridden. Events carry no floats, so a stored rule keeps its sigma in thousandths
 * (`sigma_milli`); the API speaks `sigma` as a number with at most three decimals.
 */
import { z } from 'zod';
import { CredentialId } from './fields.js';

export const SPIKE_KINDS = ['volume_spike', 'egress_spike', 'novel_query_shape', 'error_spike'] as const;
export type SpikeKind = (typeof SPIKE_KINDS)[number];
export const AnomalyKind = z.enum([...SPIKE_KINDS, 'off_hours', 'canary_tripped']);
export type AnomalyKind = z.infer<typeof AnomalyKind>;

/** A kind's settings, resolved: what the detector uses. Kinds that have no sigma, floor or learning period ignore them. */
export interface Rule {
  readonly enabled: boolean;
  readonly sigmaMilli: number;
  readonly floor: number;
  readonly learningHours: number;
  readonly disableCredential: boolean;
}

const MAX_SIGMA = 100;
const MAX_LEARNING_HOURS = 8_760;
const MAX_OVERRIDDEN_CREDENTIALS = 1_000;

export const DEFAULT_RULES: Readonly<Record<AnomalyKind, Rule>> = {
  volume_spike: { enabled: true, sigmaMilli: 4_500, floor: 100, learningHours: 24, disableCredential: false },
  egress_spike: { enabled: true, sigmaMilli: 4_500, floor: 10 * 1024 * 1024, learningHours: 24, disableCredential: false },
  novel_query_shape: { enabled: true, sigmaMilli: 4_500, floor: 5, learningHours: 24, disableCredential: false },
  error_spike: { enabled: true, sigmaMilli: 4_500, floor: 20, learningHours: 24, disableCredential: false },
  off_hours: { enabled: true, sigmaMilli: 0, floor: 10, learningHours: 24, disableCredential: false },
  canary_tripped: { enabled: true, sigmaMilli: 0, floor: 0, learningHours: 0, disableCredential: false },
};

const enabled = z.boolean().describe('Whether the detector raises alerts');
const floor = z.int().min(0).max(Number.MAX_SAFE_INTEGER).describe('The least hourly value that may alert, whatever the baseline');
const learningHours = z.int().min(0).max(MAX_LEARNING_HOURS).describe('Hours from the credential’s first activity that only build its baseline');
const disableCredential = z.boolean().describe('Also disable the credential when the alert is raised');
const sigmaMilli = z.int().min(0).max(MAX_SIGMA * 1000);
const sigma = z
  .number()
  .min(0)
  .max(MAX_SIGMA)
  .refine((n) => Math.abs(n * 1000 - Math.round(n * 1000)) < 1e-6, { message: 'at most three decimals' })
  .describe('How many standard deviations above the credential’s mean an hour must be to alert');

const common = { enabled, floor, learning_hours: learningHours, disable_credential: disableCredential };

/** The schema of one set of rules, given its spike detectors' (which carry the sigma); every kind and member optional (a partial override). */
function ruleSet<Spike extends z.ZodType>(spike: Spike) {
  const offHours = z.strictObject(common).partial();
  const canary = z.strictObject({ enabled, disable_credential: disableCredential }).partial();
  return z
    .strictObject({ volume_spike: spike, egress_spike: spike, novel_query_shape: spike, error_spike: spike, off_hours: offHours, canary_tripped: canary })
    .partial();
}

export const StoredRuleSet = ruleSet(z.strictObject({ ...common, sigma_milli: sigmaMilli }).partial());
export type StoredRuleSet = z.infer<typeof StoredRuleSet>;
export const ApiRuleSet = ruleSet(z.strictObject({ ...common, sigma }).partial());
export type ApiRuleSet = z.infer<typeof ApiRuleSet>;

const credentials = <S extends z.ZodType>(set: S) =>
  z.record(CredentialId, set).refine((r) => Object.keys(r).length <= MAX_OVERRIDDEN_CREDENTIALS, { message: `at most ${MAX_OVERRIDDEN_CREDENTIALS} credentials` });

/** A project's rules as stored (the payload of AnomalyRulesSet, less the project). */
export const StoredRules = z.strictObject({ rules: StoredRuleSet, credentials: credentials(StoredRuleSet) });
export type StoredRules = z.infer<typeof StoredRules>;

/** A PUT body: the project's rules and the per-credential overrides, each replacing what was stored. */
export const AnomalyRulesRequest = z
  .strictObject({
    rules: ApiRuleSet.default({}).describe('Per detector kind, the project’s settings; members left out take the defaults'),
    credentials: credentials(ApiRuleSet).default({}).describe('Per credential id, settings that override the project’s'),
  })
  .meta({ title: 'AnomalyRulesRequest' });
export type AnomalyRulesRequest = z.infer<typeof AnomalyRulesRequest>;

type AnyRule = { sigma?: number; sigma_milli?: number; [key: string]: unknown };

function mapSets<From extends object, To>(set: From, each: (rule: AnyRule) => To): Partial<Record<AnomalyKind, To>> {
  return Object.fromEntries(Object.entries(set).map(([kind, rule]) => [kind, each(rule as AnyRule)])) as Partial<Record<AnomalyKind, To>>;
}

const toStoredRule = ({ sigma: s, ...rest }: AnyRule) => (s === undefined ? rest : { ...rest, sigma_milli: Math.round(s * 1000) });
const toApiRule = ({ sigma_milli: s, ...rest }: AnyRule) => (s === undefined ? rest : { ...rest, sigma: s / 1000 });

export function storedRules(request: AnomalyRulesRequest): StoredRules {
  return StoredRules.parse({
    rules: mapSets(request.rules, toStoredRule),
    credentials: Object.fromEntries(Object.entries(request.credentials).map(([id, set]) => [id, mapSets(set, toStoredRule)])),
  });
}

/** The stored overrides of a set, in the API's form. */
export function apiRuleSet(set: StoredRuleSet): ApiRuleSet {
  return mapSets(set, toApiRule) as ApiRuleSet;
}

function merged(base: Rule, stored: AnyRule | undefined): Rule {
  if (!stored) return base;
  return {
    enabled: (stored.enabled as boolean | undefined) ?? base.enabled,
    sigmaMilli: stored.sigma_milli ?? base.sigmaMilli,
    floor: (stored.floor as number | undefined) ?? base.floor,
    learningHours: (stored.learning_hours as number | undefined) ?? base.learningHours,
    disableCredential: (stored.disable_credential as boolean | undefined) ?? base.disableCredential,
  };
}

/** The rule a kind runs under for a credential: the default, then the project's settings, then the credential's. */
export function effectiveRule(rules: StoredRules | undefined, credentialId: string, kind: AnomalyKind): Rule {
  const project = merged(DEFAULT_RULES[kind], rules?.rules[kind]);
  return merged(project, rules?.credentials[credentialId]?.[kind]);
}

/** Every kind's project-level rule in the API's form, defaults filled in. */
export function projectRulesView(rules: StoredRules | undefined): Required<ApiRuleSet> {
  const rule = (kind: AnomalyKind) => merged(DEFAULT_RULES[kind], rules?.rules[kind]);
  const common = (r: Rule) => ({ enabled: r.enabled, floor: r.floor, learning_hours: r.learningHours, disable_credential: r.disableCredential });
  const spike = (kind: SpikeKind) => {
    const r = rule(kind);
    return { ...common(r), sigma: r.sigmaMilli / 1000 };
  };
  const canary = rule('canary_tripped');
  return {
    volume_spike: spike('volume_spike'),
    egress_spike: spike('egress_spike'),
    novel_query_shape: spike('novel_query_shape'),
    error_spike: spike('error_spike'),
    off_hours: common(rule('off_hours')),
    canary_tripped: { enabled: canary.enabled, disable_credential: canary.disableCredential },
  };
}
