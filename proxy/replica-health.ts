/**
 * Whether a read replica is in rotation, as a pure state machine over the outcomes of its health
 * probes (replica-monitor.ts runs them). A replica starts out of rotation and enters it after
 * `successesToRestore` good probes in a row. It leaves it after `failuresToEject` failed probes in
 * a row (it could not be reached or could not answer), and at once when a probe finds it too far
 * behind (`maxLagMs`) or no longer in recovery (promoted: it no longer follows the primary), since
 * then every read routed to it may be stale.
 */

export interface HealthThresholds {
  readonly failuresToEject: number;
  readonly successesToRestore: number;
  readonly maxLagMs: number;
}

export const DEFAULT_HEALTH_THRESHOLDS: HealthThresholds = { failuresToEject: 3, successesToRestore: 2, maxLagMs: 10_000 };

/** What one probe saw: the replica answered (in recovery or not, with its replay lag; null when unknown), or it did not. */
export type Probe = { readonly ok: true; readonly inRecovery: boolean; readonly lagMs: number | null } | { readonly ok: false; readonly error: string };

export interface ReplicaHealth {
  readonly healthy: boolean;
  /** Consecutive failed probes, and consecutive good ones: one of the two is 0 once a probe ran. */
  readonly failures: number;
  readonly successes: number;
  readonly lagMs: number | null;
  /** Why it is out of rotation, '' when it is in. */
  readonly reason: string;
}

export const UNCHECKED: ReplicaHealth = { healthy: false, failures: 0, successes: 0, lagMs: null, reason: 'not checked yet' };

type Verdict = { readonly kind: 'good' } | { readonly kind: 'unreachable' | 'stale'; readonly reason: string };

function verdictOf(probe: Probe, thresholds: HealthThresholds): Verdict {
  if (!probe.ok) return { kind: 'unreachable', reason: probe.error };
  if (!probe.inRecovery) return { kind: 'stale', reason: 'not in recovery (promoted or not a standby): it no longer follows the primary' };
  if (probe.lagMs === null) return { kind: 'stale', reason: 'its replay lag is unknown (no WAL received)' };
  if (probe.lagMs > thresholds.maxLagMs) return { kind: 'stale', reason: `replay lag ${Math.round(probe.lagMs)} ms is over ${thresholds.maxLagMs} ms` };
  return { kind: 'good' };
}

/** The replica's health after one more probe. */
export function observe(state: ReplicaHealth, probe: Probe, thresholds: HealthThresholds): ReplicaHealth {
  const verdict = verdictOf(probe, thresholds);
  const lagMs = probe.ok ? probe.lagMs : state.lagMs;
  if (verdict.kind === 'good') {
    const successes = state.successes + 1;
    const healthy = state.healthy || successes >= thresholds.successesToRestore;
    return { healthy, failures: 0, successes, lagMs, reason: healthy ? '' : `${successes} of ${thresholds.successesToRestore} good probes to rejoin` };
  }
  const failures = state.failures + 1;
  const healthy = state.healthy && verdict.kind === 'unreachable' && failures < thresholds.failuresToEject;
  return { healthy, failures, successes: 0, lagMs, reason: healthy ? '' : verdict.reason };
}
