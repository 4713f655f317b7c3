import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anomalyId, Detector, thresholdOf, type Activity, type Baseline, type Detection } from '../../src/anomalies/detect.js';
import { DEFAULT_RULES, effectiveRule, storedRules, type StoredRules } from '../../src/events/anomaly-rules.js';
import type { AuditEventKind } from '../../src/events/audit.js';
import { CREDENTIAL_A, CREDENTIAL_B, EXPECTED_ALERTS, HISTORY_PROJECT, syntheticHistory, type SyntheticEntry } from '../support/anomaly-history.js';

/** The detectors over a whole history, one credential's state and shapes each, as the projection keeps them. */
function run(entries: readonly SyntheticEntry[], rules?: StoredRules, projectId = HISTORY_PROJECT): Detection[] {
  const baselines = new Map<string, Baseline>();
  const shapes = new Map<string, Set<string>>();
  const out: Detection[] = [];
  const detector = new Detector(new Map([[projectId, rules]]));
  entries.forEach((e, i) => {
    const activity: Activity = { projectId, credentialId: e.credentialId, ts: e.ts, event: e.event, bytesOut: e.bytesOut, queryHash: e.queryHash, rule: e.rule, position: BigInt(i) };
    const seen = shapes.get(e.credentialId) ?? new Set<string>();
    shapes.set(e.credentialId, seen);
    const result = detector.observe(baselines.get(e.credentialId), activity, seen);
    baselines.set(e.credentialId, result.baseline);
    out.push(...result.detections);
  });
  return out;
}

const summary = (d: Detection) => ({
  credential_id: d.credential_id,
  kind: d.kind,
  severity: d.severity,
  window_start: d.window_start,
  observed: d.details.observed,
  ...(d.details.threshold === undefined ? {} : { threshold: d.details.threshold }),
  sample_query_hashes: d.details.sample_query_hashes,
});

describe('anomaly detectors on a synthetic history', () => {
  it('raise exactly the expected alerts, in order, each once per credential, kind and hour', () => {
    expect(run(syntheticHistory()).map(summary)).toEqual(EXPECTED_ALERTS);
  });

  it('describe each alert: window, id from (project, credential, kind, window), baseline, a readable title', () => {
    const detections = run(syntheticHistory());
    const volume = detections.find((d) => d.kind === 'volume_spike')!;
    expect(volume).toMatchObject({
      anomaly_id: anomalyId(HISTORY_PROJECT, CREDENTIAL_A, 'volume_spike', '2026-03-05T09:00:00.000Z'),
      window_start: '2026-03-05T09:00:00.000Z',
      window_end: '2026-03-05T10:00:00.000Z',
      disable_credential: false,
      title: `Credential ${CREDENTIAL_A} ran 101 statements in one hour; its usual is 58.1 an hour (alerts from 101)`,
      details: { baseline: { mean: '58.08', stddev: '9.41', hours: 25 }, sigma: '4.500', floor: 100 },
    });
    expect(volume.anomaly_id).toMatch(/^ano_[a-z2-7]{26}$/);
    expect(detections.find((d) => d.kind === 'off_hours')!.title).toBe(`Credential ${CREDENTIAL_A} ran 10 statements between 03:00 and 03:59 UTC, an hour of day it had never been active in`);
    expect(detections.find((d) => d.kind === 'egress_spike')!.title).toMatch(/^Credential agt_\w+ read 10\.0 MiB out in one hour; its usual is 562\.\d KiB an hour \(alerts from 10\.0 MiB\)$/);
    expect(detections.find((d) => d.credential_id === CREDENTIAL_B)!.title).toBe(`Credential ${CREDENTIAL_B} touched a honeytoken (rule honeytoken.table)`);
  });

  it('follow the rules: a disabled kind, a credential override, a longer learning period, the disable action', () => {
    const rules = storedRules({
      rules: { volume_spike: { enabled: false }, error_spike: { floor: 26 }, canary_tripped: { disable_credential: true } },
      credentials: { [CREDENTIAL_A]: { off_hours: { learning_hours: 24 * 4 } }, [CREDENTIAL_B]: { canary_tripped: { enabled: false } } },
    });
    const detections = run(syntheticHistory(), rules);
    expect(detections.map((d) => `${d.credential_id === CREDENTIAL_A ? 'A' : 'B'} ${d.kind}`)).toEqual(['A novel_query_shape', 'A egress_spike', 'A canary_tripped', 'A canary_tripped']);
    expect(detections.filter((d) => d.kind === 'canary_tripped').every((d) => d.disable_credential && d.details.action === 'disable_credential')).toBe(true);
  });

  it('sums an hour’s bytes exactly past 2^53 - 1 (a double would round), and folds the exact sum into the moments', () => {
    const detector = new Detector(new Map());
    const at = (ts: string, bytesOut: Activity['bytesOut']): Activity => ({ projectId: 'prj_x', credentialId: 'cred_x', ts, event: 'query', bytesOut, queryHash: '', rule: '', position: 0n });
    let baseline = detector.observe(undefined, at('2026-11-26T10:00:00.000Z', Number.MAX_SAFE_INTEGER), new Set()).baseline;
    expect(baseline.bytes_out).toBe(Number.MAX_SAFE_INTEGER);
    baseline = detector.observe(baseline, at('2026-11-26T10:10:00.000Z', 2), new Set()).baseline;
    expect(baseline.bytes_out).toBe('9007199254740993');
    baseline = detector.observe(baseline, at('2026-11-26T10:20:00.000Z', 9007199254740993n), new Set()).baseline;
    expect(baseline.bytes_out).toBe('18014398509481986');
    const next = detector.observe(baseline, at('2026-11-26T11:00:00.000Z', 1), new Set()).baseline;
    expect(next.moments.egress_spike.sum).toBe('18014398509481986');
    expect(next.bytes_out).toBe(1);
  });

  it('a sigma of 0 alerts one above the mean, once over the floor', () => {
    const rule = { ...DEFAULT_RULES.volume_spike, sigmaMilli: 0, floor: 0 };
    expect(thresholdOf({ n: 4, sum: '40', sumsq: '400' }, rule).threshold).toBe(11n);
    expect(thresholdOf({ n: 0, sum: '0', sumsq: '0' }, rule).threshold).toBe(1n);
    // Bytes squared overflow 2^63: the moments are exact decimal strings.
    const big = 2n ** 40n;
    expect(thresholdOf({ n: 2, sum: String(2n * big), sumsq: String(2n * big * big) }, rule)).toMatchObject({ stddev: 0, threshold: big + 1n });
  });

  it('resolves a credential’s rule over the project’s over the defaults', () => {
    const rules = storedRules({ rules: { egress_spike: { sigma: 3.25, floor: 5 } }, credentials: { [CREDENTIAL_A]: { egress_spike: { floor: 7 } } } });
    expect(effectiveRule(rules, CREDENTIAL_A, 'egress_spike')).toEqual({ ...DEFAULT_RULES.egress_spike, sigmaMilli: 3250, floor: 7 });
    expect(effectiveRule(rules, CREDENTIAL_B, 'egress_spike')).toEqual({ ...DEFAULT_RULES.egress_spike, sigmaMilli: 3250, floor: 5 });
    expect(effectiveRule(undefined, CREDENTIAL_B, 'off_hours')).toEqual(DEFAULT_RULES.off_hours);
  });
});

const HOUR = 3_600_000;
const START = Date.parse('2026-01-05T00:00:00.000Z');
const MIB = 1024 * 1024;

/** Traffic whose every hour stays under every floor: at most 4 entries an hour per credential (4 new shapes, 4 refusals, 4 statements), 2 MiB each. */
const quietHistory = fc
  .array(
    fc.record({
      hour: fc.integer({ min: 0, max: 24 * 14 }),
      credential: fc.constantFrom(CREDENTIAL_A, CREDENTIAL_B),
      entries: fc.array(
        fc.record({
          offset: fc.integer({ min: 0, max: HOUR - 1 }),
          event: fc.constantFrom<AuditEventKind>('query', 'blocked', 'masked', 'truncated', 'budget_exhausted', 'auth_failed'),
          bytes: fc.integer({ min: 0, max: 2 * MIB }),
          shape: fc.integer({ min: 0, max: 1_000 }),
        }),
        { minLength: 1, maxLength: 4 },
      ),
    }),
    { maxLength: 60 },
  )
  .map((hours) => {
    const unique = new Map(hours.map((h) => [`${h.credential} ${h.hour}`, h]));
    return [...unique.values()]
      .flatMap((h) =>
        h.entries.map((e): SyntheticEntry => ({ ts: new Date(START + h.hour * HOUR + e.offset).toISOString(), credentialId: h.credential, event: e.event, bytesOut: e.bytes, queryHash: e.shape.toString(16).padStart(16, '0'), rule: 'r' })),
      )
      .sort((a, b) => a.ts.localeCompare(b.ts));
  });

describe('anomaly detector invariants', () => {
  it('a history that stays under every floor never alerts, whatever its shape and learning period', () => {
    fc.assert(
      fc.property(quietHistory, fc.integer({ min: 0, max: 48 }), fc.integer({ min: 0, max: 10_000 }), (history, learning, sigmaMilli) => {
        const spike = { sigma: sigmaMilli / 1000, learning_hours: learning };
        const rules = storedRules({ rules: { volume_spike: spike, egress_spike: spike, novel_query_shape: spike, error_spike: spike, off_hours: { learning_hours: learning } }, credentials: {} });
        expect(run(history, rules)).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

});
