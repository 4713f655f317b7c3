/**
 * The agent usage report of spec §2.4, assembled from what SQL aggregates: entries grouped by
 * credential, event, cache status and whether a latency was recorded, the nearest-rank latency
 * percentiles, and the oldest gap markers of the window. Every rule that classifies an entry lives
 * here, so the SQL only groups and sums.
 */
import { z } from 'zod';
import { decisionGroup, type AuditDecision, type CacheStatus } from '../events/audit.js';
import type { PlanTerms } from '../plans.js';
import { GAP_MARKER, type AuditEntryEvent } from './entry.js';

const Count = z.int().min(0);
const Instant = z.string().describe('ISO 8601 date-time');

export const AgentUsageLine = z
  .object({
    credential_id: z.string().nullable().describe('null on the unattributed and totals lines'),
    entries: Count.describe('Audit entries of every kind, not a statement count'),
    allowed: Count,
    blocked: Count.describe('Refused by the gateway, including budget, honeytoken and approval refusals'),
    masked: Count,
    truncated: Count,
    rows_returned: Count,
    bytes_out: Count.describe('Bytes returned to the client; what the bytes meter bills on'),
    cache_hit: Count,
    cache_stale: Count,
    cache_miss: Count,
    cache_bypass: Count,
    cache_none: Count.describe('No cache outcome: every entry that did not run'),
    latency_measured: Count.describe('Entries that ran (allowed, masked, truncated) with a recorded latency'),
    latency_unmeasured: Count,
    latency_ms_total: z.number().min(0),
    latency_p50_ms: z.number().min(0),
    latency_p95_ms: z.number().min(0),
    latency_p99_ms: z.number().min(0),
    first_seen: Instant.nullable(),
    last_seen: Instant.nullable(),
  })
  .meta({ id: 'AgentUsageLine' });
export type AgentUsageLine = z.infer<typeof AgentUsageLine>;

export const AgentUsageMarginalRates = z
  .object({
    plan: z.string(),
    queries_per_day: Count.describe('0 means no limit'),
    bytes_per_month: Count.describe('0 means no limit'),
    overage_per_1k_queries: z.number().min(0).describe('0 means a hard cap'),
    overage_per_gb: z.number().min(0).describe('0 means a hard cap'),
    query_overage_billable: z.boolean(),
    bytes_overage_billable: z.boolean(),
  })
  .meta({ id: 'AgentUsageMarginalRates' });
export type AgentUsageMarginalRates = z.infer<typeof AgentUsageMarginalRates>;

export const AgentUsageDropMarkers = z
  .object({
    markers: Count.describe('Gap markers read, oldest first, at most 1000'),
    truncated: z.boolean().describe('More gap markers existed than were read'),
    entries_dropped: Count.describe('A floor: the counts of the markers read whose count is known'),
    markers_unparsed: Count.describe('Markers read whose count is unknown'),
    reasons: z.array(z.string()),
  })
  .meta({ id: 'AgentUsageDropMarkers' });
export type AgentUsageDropMarkers = z.infer<typeof AgentUsageDropMarkers>;

export const AgentUsageReport = z
  .object({
    project_id: z.string(),
    requested_start: Instant,
    requested_end: Instant.describe('Exclusive'),
    window_start: Instant,
    window_end: Instant,
    complete: z.boolean(),
    agents: z.array(AgentUsageLine),
    unattributed: AgentUsageLine,
    totals: AgentUsageLine,
    marginal_rates: AgentUsageMarginalRates,
    drop_markers: AgentUsageDropMarkers,
  })
  .meta({ id: 'AgentUsageReport' });
export type AgentUsageReport = z.infer<typeof AgentUsageReport>;

/** Spec §8: the usage report reads at most this many gap markers. */
export const DROP_MARKERS_READ = 1000;

export interface EntryOutcome {
  /** The decision count the entry falls under; null for approval progress rows and gap markers. */
  readonly decision: AuditDecision | null;
  /** The statement ran, so its cache status and latency are outcomes (allowed, masked, truncated). */
  readonly ran: boolean;
}

export function outcomeOf(event: AuditEntryEvent): EntryOutcome {
  const decision = event === GAP_MARKER ? null : decisionGroup(event);
  return { decision, ran: decision !== null && decision !== 'block' };
}

/** Entries of one credential (null: unattributed) sharing event, cache status and whether latency_us was recorded. */
export interface EntryGroup {
  readonly credential_id: string | null;
  readonly event: AuditEntryEvent;
  readonly cache_status: CacheStatus;
  readonly timed: boolean;
  readonly entries: number;
  readonly rows_returned: number;
  readonly bytes_out: number;
  /** Sum of the entries' latency_us (0 when not timed). */
  readonly latency_us: number;
  readonly first_seen: string;
  readonly last_seen: string;
}

/** Nearest-rank p50, p95 and p99 of the measured latencies, in microseconds. */
export type LatencyPercentiles = readonly [number, number, number];

export interface DropMarker {
  readonly reason: string;
  readonly count: number | null;
}

export interface UsageInput {
  readonly projectId: string;
  readonly requestedStart: string;
  readonly requestedEnd: string;
  readonly groups: readonly EntryGroup[];
  /** Per credential (null: unattributed); only lines with a measured latency have one. */
  readonly percentiles: ReadonlyMap<string | null, LatencyPercentiles>;
  readonly totalPercentiles: LatencyPercentiles | undefined;
  /** The window's gap markers, oldest first; up to DROP_MARKERS_READ + 1 of them to tell truncation. */
  readonly markers: readonly DropMarker[];
  readonly plan: string;
  readonly terms: PlanTerms;
}

/** The count each decision group adds to. */
export const decisionCount = { allow: 'allowed', block: 'blocked', mask: 'masked', truncate: 'truncated' } as const;
const cacheField = { hit: 'cache_hit', stale: 'cache_stale', miss: 'cache_miss', bypass: 'cache_bypass', none: 'cache_none' } as const;

/** The fields of a line that add up: the totals line is their sum over the other lines. */
const additive = [
  'entries', 'allowed', 'blocked', 'masked', 'truncated', 'rows_returned', 'bytes_out', 'cache_hit', 'cache_stale', 'cache_miss', 'cache_bypass', 'cache_none',
  'latency_measured', 'latency_unmeasured', 'latency_ms_total',
] as const;

function emptyLine(credentialId: string | null): AgentUsageLine {
  const line = Object.fromEntries(additive.map((field) => [field, 0])) as Record<(typeof additive)[number], number>;
  return { credential_id: credentialId, ...line, latency_p50_ms: 0, latency_p95_ms: 0, latency_p99_ms: 0, first_seen: null, last_seen: null };
}

const earlier = (a: string | null, b: string | null) => (a === null || (b !== null && b < a) ? b : a);
const later = (a: string | null, b: string | null) => (a === null || (b !== null && b > a) ? b : a);

function withPercentiles(line: AgentUsageLine, percentiles: LatencyPercentiles | undefined): AgentUsageLine {
  if (line.latency_measured === 0 || !percentiles) return line;
  const [p50, p95, p99] = percentiles;
  return { ...line, latency_p50_ms: p50 / 1000, latency_p95_ms: p95 / 1000, latency_p99_ms: p99 / 1000 };
}

/** One credential's line from its groups. first_seen/last_seen compare as strings: every timestamp is a `toISOString` UTC instant. */
function usageLine(credentialId: string | null, groups: readonly EntryGroup[], percentiles: LatencyPercentiles | undefined): AgentUsageLine {
  const line = emptyLine(credentialId);
  let latencyUs = 0;
  for (const group of groups) {
    const { decision, ran } = outcomeOf(group.event);
    line.entries += group.entries;
    if (decision) line[decisionCount[decision]] += group.entries;
    line[cacheField[ran ? group.cache_status : 'none']] += group.entries;
    line.rows_returned += group.rows_returned;
    line.bytes_out += group.bytes_out;
    if (ran && group.timed) {
      line.latency_measured += group.entries;
      latencyUs += group.latency_us;
    } else {
      line.latency_unmeasured += group.entries;
    }
    line.first_seen = earlier(line.first_seen, group.first_seen);
    line.last_seen = later(line.last_seen, group.last_seen);
  }
  // The exact microsecond sum, divided once: latency_ms_total is as close to the true total as a double gets.
  line.latency_ms_total = latencyUs / 1000;
  return withPercentiles(line, percentiles);
}

/** The sum of `lines`, added in the order given, so summing the lines as listed reproduces every total exactly. */
function totalsLine(lines: readonly AgentUsageLine[], percentiles: LatencyPercentiles | undefined): AgentUsageLine {
  const totals = emptyLine(null);
  for (const line of lines) {
    for (const field of additive) totals[field] += line[field];
    totals.first_seen = earlier(totals.first_seen, line.first_seen);
    totals.last_seen = later(totals.last_seen, line.last_seen);
  }
  return withPercentiles(totals, percentiles);
}

/** Busiest first: most entries, then credential id. */
function busiestFirst(a: AgentUsageLine, b: AgentUsageLine): number {
  if (a.entries !== b.entries) return b.entries - a.entries;
  return a.credential_id! < b.credential_id! ? -1 : a.credential_id! > b.credential_id! ? 1 : 0;
}

export function marginalRates(plan: string, terms: PlanTerms): AgentUsageMarginalRates {
  return {
    plan,
    queries_per_day: terms.queriesPerDay,
    bytes_per_month: Number(terms.bytesPerMonth),
    overage_per_1k_queries: terms.overagePer1kQueries,
    overage_per_gb: terms.overagePerGb,
    query_overage_billable: terms.queriesPerDay > 0 && terms.overagePer1kQueries > 0,
    bytes_overage_billable: terms.bytesPerMonth > 0n && terms.overagePerGb > 0,
  };
}

/** What the oldest DROP_MARKERS_READ gap markers say; `read` may hold one more, which only tells that more exist. */
export function dropMarkers(read: readonly DropMarker[]): AgentUsageDropMarkers {
  const markers = read.slice(0, DROP_MARKERS_READ);
  const counted = markers.filter((marker) => marker.count !== null);
  return {
    markers: markers.length,
    truncated: read.length > DROP_MARKERS_READ,
    entries_dropped: counted.reduce((sum, marker) => sum + marker.count!, 0),
    markers_unparsed: markers.length - counted.length,
    reasons: [...new Set(markers.map((marker) => marker.reason))].sort(),
  };
}

export function agentUsageReport(input: UsageInput): AgentUsageReport {
  const byCredential = new Map<string | null, EntryGroup[]>();
  for (const group of input.groups) {
    const groups = byCredential.get(group.credential_id);
    if (groups) groups.push(group);
    else byCredential.set(group.credential_id, [group]);
  }
  const lineFor = (credentialId: string | null) => usageLine(credentialId, byCredential.get(credentialId) ?? [], input.percentiles.get(credentialId));
  const agents = [...byCredential.keys()].filter((id): id is string => id !== null).map(lineFor).sort(busiestFirst);
  const unattributed = lineFor(null);
  const totals = totalsLine([...agents, unattributed], input.totalPercentiles);
  const drops = dropMarkers(input.markers);
  return {
    project_id: input.projectId,
    requested_start: input.requestedStart,
    requested_end: input.requestedEnd,
    // An empty window collapses onto requested_end: nothing was covered before it.
    window_start: totals.first_seen ?? input.requestedEnd,
    window_end: totals.last_seen ?? input.requestedEnd,
    complete: drops.markers === 0,
    agents,
    unattributed,
    totals,
    marginal_rates: marginalRates(input.plan, input.terms),
    drop_markers: drops,
  };
}
