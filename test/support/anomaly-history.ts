/**
 * A synthetic traffic history with chosen timestamps, and exactly the alerts the detectors of
 * docs/anomalies.md raise on it under the default rules. Credential A works 09:00-16:59 UTC for
 * three days (its first day is its learning period), then on day four: activity at 03:00, new
 * query shapes and a volume spike, an error spike, an egress spike, and honeytokens touched twice
 * in one hour and once in the next. Its volume threshold that day is statistical, not the floor:
 * 24 hours of 60 statements and one of 12 give mean 58.08 and deviation 9.41, so
 * ⌊58.08 + 4.5 × 9.41⌋ + 1 = 101 > 100. Credential B starts on day four with a burst during its
 * learning period (nothing alerts but its honeytoken).
 */
import type { AuditEventKind } from '../../src/events/audit.js';

export const HISTORY_PROJECT = 'prj_anomalyhistoryaaaaaaaaaa';
export const CREDENTIAL_A = 'agt_anomalyhistoryaaaaaaaaaa';
export const CREDENTIAL_B = 'agt_anomalyhistorybbbbbbbbbb';

const DAY0 = Date.parse('2026-03-02T00:00:00.000Z');
const HOUR = 3_600_000;
const MIB = 1024 * 1024;

export interface SyntheticEntry {
  readonly ts: string;
  readonly credentialId: string;
  readonly event: AuditEventKind;
  readonly bytesOut: number;
  readonly queryHash: string;
  readonly rule: string;
}

/** A query hash (lowercase hex, as the proxy's) named after its shape. */
const hash = (name: string) => Buffer.from(name).toString('hex').padEnd(16, '0');

/** `count` entries spread over the hour starting at `hourStart`, in order, `each(i)` making the i-th. */
function hour(hourStart: number, count: number, each: (i: number) => Omit<SyntheticEntry, 'ts'>): SyntheticEntry[] {
  return Array.from({ length: count }, (_, i) => ({ ts: new Date(hourStart + Math.floor((i * HOUR) / count)).toISOString(), ...each(i) }));
}

const query = (credentialId: string, shape: string, bytesOut = 10_000) => ({ credentialId, event: 'query' as const, bytesOut, queryHash: hash(shape), rule: 'allowed' });
const refused = (credentialId: string, shape: string) => ({ credentialId, event: 'blocked' as const, bytesOut: 0, queryHash: hash(shape), rule: 'allowed_tables.not_allowed' });
const canary = (credentialId: string) => ({ credentialId, event: 'canary_tripped' as const, bytesOut: 0, queryHash: hash('c4'), rule: 'honeytoken.table' });

export function syntheticHistory(): SyntheticEntry[] {
  const at = (day: number, h: number) => DAY0 + day * 24 * HOUR + h * HOUR;
  const entries: SyntheticEntry[] = [];
  for (let day = 0; day < 3; day++) {
    for (let h = 9; h < 17; h++) {
      // 60 a working hour: 58 queries over three shapes and 2 refusals.
      entries.push(...hour(at(day, h), 60, (i) => (i % 30 === 29 ? refused(CREDENTIAL_A, 's9') : query(CREDENTIAL_A, `s${i % 3}`))));
    }
  }
  entries.push(...hour(at(3, 3), 12, () => query(CREDENTIAL_A, 's0')));
  entries.push(...hour(at(3, 9), 150, (i) => query(CREDENTIAL_A, i < 6 ? `n${i}` : `s${i % 3}`)));
  entries.push(...hour(at(3, 10), 25, () => refused(CREDENTIAL_A, 's1')));
  entries.push(...hour(at(3, 11), 3, () => query(CREDENTIAL_A, 's2', 5 * MIB)));
  entries.push(...hour(at(3, 12), 2, () => canary(CREDENTIAL_A)));
  entries.push(...hour(at(3, 13), 1, () => canary(CREDENTIAL_A)));
  entries.push(...hour(at(3, 2), 500, (i) => (i % 5 === 4 ? refused(CREDENTIAL_B, `b${i % 50}`) : i === 250 ? canary(CREDENTIAL_B) : query(CREDENTIAL_B, `b${i % 50}`, 50_000))));
  // Stable: entries of one instant keep the order they were made in.
  return entries.sort((a, b) => a.ts.localeCompare(b.ts));
}

export interface ExpectedAlert {
  readonly credential_id: string;
  readonly kind: string;
  readonly severity: string;
  readonly window_start: string;
  readonly observed: number;
  readonly threshold?: number;
  readonly sample_query_hashes: readonly string[];
}

const day3 = (h: number) => new Date(DAY0 + 3 * 24 * HOUR + h * HOUR).toISOString();

/** In the order they are raised (the order of the entries that trip them). */
export const EXPECTED_ALERTS: readonly ExpectedAlert[] = [
  { credential_id: CREDENTIAL_B, kind: 'canary_tripped', severity: 'critical', window_start: day3(2), observed: 1, sample_query_hashes: [hash('c4')] },
  { credential_id: CREDENTIAL_A, kind: 'off_hours', severity: 'info', window_start: day3(3), observed: 10, threshold: 10, sample_query_hashes: [hash('s0')] },
  { credential_id: CREDENTIAL_A, kind: 'novel_query_shape', severity: 'warning', window_start: day3(9), observed: 5, threshold: 5, sample_query_hashes: ['n0', 'n1', 'n2', 'n3', 'n4'].map(hash) },
  { credential_id: CREDENTIAL_A, kind: 'volume_spike', severity: 'warning', window_start: day3(9), observed: 101, threshold: 101, sample_query_hashes: ['n0', 'n1', 'n2', 'n3', 'n4'].map(hash) },
  { credential_id: CREDENTIAL_A, kind: 'error_spike', severity: 'warning', window_start: day3(10), observed: 20, threshold: 20, sample_query_hashes: [hash('s1')] },
  { credential_id: CREDENTIAL_A, kind: 'egress_spike', severity: 'warning', window_start: day3(11), observed: 10 * MIB, threshold: 10 * MIB, sample_query_hashes: [hash('s2')] },
  { credential_id: CREDENTIAL_A, kind: 'canary_tripped', severity: 'critical', window_start: day3(12), observed: 1, sample_query_hashes: [hash('c4')] },
  { credential_id: CREDENTIAL_A, kind: 'canary_tripped', severity: 'critical', window_start: day3(13), observed: 1, sample_query_hashes: [hash('c4')] },
];
