/**
 * The anomaly detectors (docs/anomalies.md): a pure fold of one credential's audit entries, in
 * event order, over hourly windows of event time. No clock and no randomness: the same entries
 * give the same state and the same detections, however they are batched.
 */
import { hash } from 'node:crypto';
import { addExact, type ExactSum } from '../audit/exact-sum.js';
import { decisionGroup, type AuditEventKind } from '../events/audit.js';
import { AnomalyKind, effectiveRule, type Rule, type SpikeKind, type StoredRules } from '../events/anomaly-rules.js';
import type { AnomalySeverity } from '../events/anomalies.js';
import { base32Id } from '../ids.js';

export const HOUR_MS = 3_600_000;
const SAMPLES = 5;

/** One audit entry of a credential, as the detectors see it. */
export interface Activity {
  readonly projectId: string;
  readonly credentialId: string;
  /** The entry's time (ISO 8601, milliseconds). */
  readonly ts: string;
  readonly event: AuditEventKind;
  readonly bytesOut: ExactSum;
  readonly queryHash: string;
  readonly rule: string;
  /** The event's global position: detections are raised in this order. */
  readonly position: bigint;
}

/** Count, sum and sum of squares of one metric over closed hours; sums as decimal strings (bytes squared overflow 2^63). */
export interface Moments {
  n: number;
  sum: string;
  sumsq: string;
}

/** A credential's state: its open hour's counters and the moments of its closed hours. Stored as JSON. */
export interface Baseline {
  /** Start of the hour of the credential's first entry (ISO). */
  first_hour: string;
  /** Start of the open hour (ISO). */
  hour: string;
  statements: number;
  /** Summed exactly: a number up to 2^53 - 1, past that its decimal string (JSON has no bigint). */
  bytes_out: number | string;
  refusals: number;
  novel_shapes: number;
  samples: string[];
  novel_samples: string[];
  refused_samples: string[];
  /** Kinds already raised for the open hour. */
  fired: AnomalyKind[];
  /** Bit h set: the credential was active in a closed hour starting at h:00 UTC. */
  hours_of_day: number;
  moments: Record<SpikeKind, Moments>;
}

/** What a detector found: an AnomalyRaised to be, its id derived from (project, credential, kind, window). */
export interface Detection {
  anomaly_id: string;
  project_id: string;
  credential_id: string;
  kind: AnomalyKind;
  severity: AnomalySeverity;
  title: string;
  details: Record<string, unknown>;
  window_start: string;
  window_end: string;
  detected_at: string;
  position: string;
  disable_credential: boolean;
}

/** The knowledge of which query hashes a credential has run before. */
export interface ShapeMemory {
  has(queryHash: string): boolean;
  /** `ts`: when it was first run. */
  add(queryHash: string, ts: string): void;
}

export const SEVERITY: Readonly<Record<AnomalyKind, AnomalySeverity>> = {
  volume_spike: 'warning',
  egress_spike: 'warning',
  novel_query_shape: 'warning',
  error_spike: 'warning',
  off_hours: 'info',
  canary_tripped: 'critical',
};

/** `ano_` and 26 base32 characters of SHA-256 over the window's identity: a replay derives the same id. */
export function anomalyId(projectId: string, credentialId: string, kind: AnomalyKind, windowStart: string): string {
  return base32Id('ano_', hash('sha256', `${projectId}\u0000${credentialId}\u0000${kind}\u0000${windowStart}`, 'binary'));
}

const iso = (ms: number) => new Date(ms).toISOString();
/** The start of the UTC hour of a timestamp in the stored form (`YYYY-MM-DDTHH:mm:ss.sssZ`, which the decision's schema fixes). */
const hourStart = (ts: string) => `${ts.slice(0, 13)}:00:00.000Z`;
const hourOfDay = (hour: string) => Number(hour.slice(11, 13));
const emptyMoments = (): Moments => ({ n: 0, sum: '0', sumsq: '0' });

export function newBaseline(hour: string): Baseline {
  return {
    first_hour: hour,
    hour,
    statements: 0,
    bytes_out: 0,
    refusals: 0,
    novel_shapes: 0,
    samples: [],
    novel_samples: [],
    refused_samples: [],
    fired: [],
    hours_of_day: 0,
    moments: { volume_spike: emptyMoments(), egress_spike: emptyMoments(), novel_query_shape: emptyMoments(), error_spike: emptyMoments() },
  };
}

function addSample(list: string[], queryHash: string): void {
  if (queryHash !== '' && list.length < SAMPLES && !list.includes(queryHash)) list.push(queryHash);
}

function withValue(m: Moments, value: bigint): Moments {
  return { n: m.n + 1, sum: String(BigInt(m.sum) + value), sumsq: String(BigInt(m.sumsq) + value * value) };
}

/** Whole hours from the credential's first hour to the open one. */
const ageOf = (b: Baseline) => (Date.parse(b.hour) - Date.parse(b.first_hour)) / HOUR_MS;

/** Past its learning period: the open hour starts at least `learningHours` after the credential's first hour. */
const learned = (age: number, rule: Rule) => age >= rule.learningHours;

/** Folds the open hour into the moments (novel shapes only once learned) and opens `hour`. */
function closeHour(b: Baseline, hour: string, novelRule: Rule): Baseline {
  const moments = {
    volume_spike: withValue(b.moments.volume_spike, BigInt(b.statements)),
    egress_spike: withValue(b.moments.egress_spike, BigInt(b.bytes_out)),
    error_spike: withValue(b.moments.error_spike, BigInt(b.refusals)),
    novel_query_shape: learned(ageOf(b), novelRule) ? withValue(b.moments.novel_query_shape, BigInt(b.novel_shapes)) : b.moments.novel_query_shape,
  };
  const hoursOfDay = b.hours_of_day | (1 << hourOfDay(b.hour));
  return { ...newBaseline(hour), first_hour: b.first_hour, hours_of_day: hoursOfDay, moments };
}

export interface Threshold {
  readonly mean: number;
  readonly stddev: number;
  /** The least observed value that alerts: max(floor, ⌊mean + sigma × stddev⌋ + 1). */
  readonly threshold: bigint;
}

/** Mean and population standard deviation of the closed hours, and the alerting threshold (docs/anomalies.md). */
export function thresholdOf(m: Moments, rule: Rule): Threshold {
  const floor = BigInt(rule.floor);
  if (m.n === 0) return { mean: 0, stddev: 0, threshold: floor > 1n ? floor : 1n };
  const n = BigInt(m.n);
  const sum = BigInt(m.sum);
  // n²·variance = n·Σx² − (Σx)², exact in integers; never negative.
  const scaledVariance = n * BigInt(m.sumsq) - sum * sum;
  const stddev = Math.sqrt(Number(scaledVariance)) / m.n;
  const mean = Number(sum) / m.n;
  const statistical = BigInt(Math.floor(mean + (rule.sigmaMilli / 1000) * stddev)) + 1n;
  return { mean, stddev, threshold: statistical > floor ? statistical : floor };
}

/** An integer for JSON: a number when exact, else its decimal string. */
function integral(value: bigint): number | string {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : String(value);
}

const jsonCount = (value: ExactSum): number | string => (typeof value === 'bigint' ? integral(value) : value);

function bytesText(value: number | bigint | string): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(value);
  let unit = 0;
  while (v >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${v} B` : `${v.toFixed(1)} ${units[unit]}`;
}

const SPIKES: readonly { kind: SpikeKind; observed: (b: Baseline) => number | string; samples: (b: Baseline) => string[]; title: (c: string, o: number | string, t: Threshold) => string }[] = [
  {
    kind: 'volume_spike',
    observed: (b) => b.statements,
    samples: (b) => b.samples,
    title: (c, o, t) => `Credential ${c} ran ${o} statements in one hour; its usual is ${t.mean.toFixed(1)} an hour (alerts from ${t.threshold})`,
  },
  {
    kind: 'egress_spike',
    observed: (b) => b.bytes_out,
    samples: (b) => b.samples,
    title: (c, o, t) => `Credential ${c} read ${bytesText(o)} out in one hour; its usual is ${bytesText(Math.round(t.mean))} an hour (alerts from ${bytesText(t.threshold)})`,
  },
  {
    kind: 'novel_query_shape',
    observed: (b) => b.novel_shapes,
    samples: (b) => b.novel_samples,
    title: (c, o) => `Credential ${c} ran ${o} query shapes in one hour that it had never run before`,
  },
  {
    kind: 'error_spike',
    observed: (b) => b.refusals,
    samples: (b) => b.refused_samples,
    title: (c, o, t) => `Credential ${c} had ${o} statements refused in one hour; its usual is ${t.mean.toFixed(1)} an hour (alerts from ${t.threshold})`,
  },
];

function detection(a: Activity, b: Baseline, kind: AnomalyKind, rule: Rule, title: string, details: Record<string, unknown>): Detection {
  const start = Date.parse(b.hour);
  return {
    anomaly_id: anomalyId(a.projectId, a.credentialId, kind, b.hour),
    project_id: a.projectId,
    credential_id: a.credentialId,
    kind,
    severity: SEVERITY[kind],
    title,
    details: { ...details, observed_at: a.ts, ...(rule.disableCredential ? { action: 'disable_credential' } : {}) },
    window_start: b.hour,
    window_end: iso(start + HOUR_MS),
    detected_at: a.ts,
    position: String(a.position),
    disable_credential: rule.disableCredential,
  };
}

function detect(a: Activity, b: Baseline, memo: HourMemo, rules: Readonly<Record<AnomalyKind, Rule>>): Detection[] {
  const age = memo.age;
  const out: Detection[] = [];
  const armed = (kind: AnomalyKind, rule: Rule) => rule.enabled && !b.fired.includes(kind);
  for (const spike of SPIKES) {
    const rule = rules[spike.kind];
    if (!armed(spike.kind, rule) || !learned(age, rule)) continue;
    const value = spike.observed(b);
    // The threshold is never below the floor: most entries stop here without computing it (a decimal string is past 2^53 - 1, above any floor).
    if (typeof value === 'number' && value < rule.floor) continue;
    let t = memo.thresholds.get(spike.kind);
    if (!t) memo.thresholds.set(spike.kind, (t = thresholdOf(b.moments[spike.kind], rule)));
    const observed = BigInt(value);
    if (observed < t.threshold) continue;
    out.push(
      detection(a, b, spike.kind, rule, spike.title(a.credentialId, value, t), {
        observed: integral(observed),
        threshold: integral(t.threshold),
        baseline: { mean: t.mean.toFixed(2), stddev: t.stddev.toFixed(2), hours: b.moments[spike.kind].n },
        sigma: (rule.sigmaMilli / 1000).toFixed(3),
        floor: rule.floor,
        sample_query_hashes: [...spike.samples(b)],
      }),
    );
  }
  const offHours = rules.off_hours;
  const hour = hourOfDay(b.hour);
  const threshold = Math.max(offHours.floor, 1);
  if (armed('off_hours', offHours) && learned(age, offHours) && (b.hours_of_day & (1 << hour)) === 0 && b.statements >= threshold) {
    const hh = String(hour).padStart(2, '0');
    out.push(
      detection(a, b, 'off_hours', offHours, `Credential ${a.credentialId} ran ${b.statements} statements between ${hh}:00 and ${hh}:59 UTC, an hour of day it had never been active in`, {
        observed: b.statements,
        threshold,
        baseline: { active_hours_of_day: activeHours(b.hours_of_day) },
        floor: offHours.floor,
        sample_query_hashes: [...b.samples],
      }),
    );
  }
  const canary = rules.canary_tripped;
  if (a.event === 'canary_tripped' && armed('canary_tripped', canary)) {
    out.push(
      detection(a, b, 'canary_tripped', canary, `Credential ${a.credentialId} touched a honeytoken (rule ${a.rule})`, {
        observed: 1,
        rule: a.rule,
        sample_query_hashes: a.queryHash === '' ? [] : [a.queryHash],
      }),
    );
  }
  return out;
}

function activeHours(mask: number): number[] {
  const hours: number[] = [];
  for (let h = 0; h < 24; h++) if (mask & (1 << h)) hours.push(h);
  return hours;
}

/** What a Detector worked out for one hour of one credential (one Baseline object): its age and the thresholds computed so far. */
interface HourMemo {
  readonly age: number;
  readonly thresholds: Map<SpikeKind, Threshold>;
}

/**
 * The detectors of one batch: each project's rules, and the rules and thresholds worked out so far
 * (a credential's moments change only when an hour closes, its rules only with AnomalyRulesSet,
 * so most entries reuse them). The caches never change a result, only how often it is computed.
 */
export class Detector {
  private readonly rules = new Map<string, Record<AnomalyKind, Rule>>();
  private readonly hours = new Map<Baseline, HourMemo>();

  constructor(private readonly stored: Map<string, StoredRules | undefined> = new Map()) {}

  /** A project's rules were set: from this entry on, they apply. */
  setRules(projectId: string, rules: StoredRules): void {
    this.stored.set(projectId, rules);
    this.rules.clear();
    this.hours.clear();
  }

  private rulesOf(a: Activity): Record<AnomalyKind, Rule> {
    const key = `${a.projectId}\u0000${a.credentialId}`;
    let rules = this.rules.get(key);
    if (!rules) {
      const stored = this.stored.get(a.projectId);
      rules = Object.fromEntries(AnomalyKind.options.map((kind) => [kind, effectiveRule(stored, a.credentialId, kind)])) as Record<AnomalyKind, Rule>;
      this.rules.set(key, rules);
    }
    return rules;
  }

  private memoOf(b: Baseline): HourMemo {
    let memo = this.hours.get(b);
    if (!memo) this.hours.set(b, (memo = { age: ageOf(b), thresholds: new Map() }));
    return memo;
  }

  /**
   * One entry: closes the open hour when the entry's hour is later, counts the entry into the open
   * hour (an entry dated before it, from a proxy whose clock trails, counts there too), then runs
   * every detector once for the window. Updates `baseline` in place within an hour; a new hour is a
   * new object (the closed hour's stays as it was). Returns the credential's state and what fired.
   */
  observe(baseline: Baseline | undefined, a: Activity, shapes: ShapeMemory): { baseline: Baseline; detections: Detection[] } {
    const hour = hourStart(a.ts);
    const rules = this.rulesOf(a);
    let b: Baseline;
    if (!baseline) b = newBaseline(hour);
    else if (hour > baseline.hour) b = closeHour(baseline, hour, rules.novel_query_shape);
    else b = baseline;
    const memo = this.memoOf(b);
    b.statements += 1;
    b.bytes_out = jsonCount(addExact(typeof b.bytes_out === 'string' ? BigInt(b.bytes_out) : b.bytes_out, a.bytesOut));
    addSample(b.samples, a.queryHash);
    if (decisionGroup(a.event) === 'block') {
      b.refusals += 1;
      addSample(b.refused_samples, a.queryHash);
    }
    if (a.queryHash !== '' && !shapes.has(a.queryHash)) {
      shapes.add(a.queryHash, a.ts);
      if (learned(memo.age, rules.novel_query_shape)) {
        b.novel_shapes += 1;
        addSample(b.novel_samples, a.queryHash);
      }
    }
    const detections = detect(a, b, memo, rules);
    for (const d of detections) b.fired.push(d.kind);
    return { baseline: b, detections };
  }
}
