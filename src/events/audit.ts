import { z } from 'zod';
import { canonicalDecisionText } from './canonical-decision.js';
import type { RecordedEvent } from '../store/port.js';
import { decodeData, defineEvent } from './envelope.js';
import {
  ApprovalId,
  base64Bytes,
  CredentialId,
  Int64String,
  KeyId,
  ProjectId,
  Region,
  ReplicaId,
  SessionId,
  StatementKind,
  TableName,
  text,
  Timestamp,
} from './fields.js';

/** The audit event kinds of spec §6. */
export const AuditEventKind = z.enum([
  'query',
  'blocked',
  'budget_exhausted',
  'auth_failed',
  'credential_expired',
  'canary_tripped',
  'rejected',
  'approval_expired',
  'masked',
  'truncated',
  'approval_requested',
  'approved',
  'migration_flagged',
]);
export type AuditEventKind = z.infer<typeof AuditEventKind>;

export const AuditSource = z.enum(['wire', 'mcp', 'rest', 'control']);
export type AuditSource = z.infer<typeof AuditSource>;

export const AuditDecision = z.enum(['allow', 'block', 'mask', 'truncate']);
export type AuditDecision = z.infer<typeof AuditDecision>;

export const CacheStatus = z.enum(['hit', 'stale', 'miss', 'bypass', 'none']);
export type CacheStatus = z.infer<typeof CacheStatus>;

const decisionGroups: Readonly<Record<AuditEventKind, AuditDecision | null>> = {
  query: 'allow',
  blocked: 'block',
  budget_exhausted: 'block',
  auth_failed: 'block',
  credential_expired: 'block',
  canary_tripped: 'block',
  rejected: 'block',
  approval_expired: 'block',
  masked: 'mask',
  truncated: 'truncate',
  approval_requested: null,
  approved: null,
  migration_flagged: null,
};

/** The coarse outcome of spec §2.14; null for progress rows, which decide nothing. */
export function decisionGroup(event: AuditEventKind): AuditDecision | null {
  return decisionGroups[event];
}

const approvalKinds: ReadonlySet<unknown> = new Set<AuditEventKind>(['approval_requested', 'approved', 'rejected', 'approval_expired']);

/** The rules across a StatementDecided's members, beyond each member's own schema. */
export const decisionRules = {
  proxyFieldsTogether: (e: { proxy_id: unknown; boot_epoch: unknown; seq: unknown }) => (e.proxy_id === null) === (e.boot_epoch === null) && (e.boot_epoch === null) === (e.seq === null),
  proxiedSourcesCarryProxy: (e: { proxy_id: unknown; source: unknown }) => e.proxy_id !== null || (e.source !== 'wire' && e.source !== 'mcp'),
  approvalsCarryApprovalId: (e: { approval_id: unknown; event: unknown }) => e.approval_id !== null || !approvalKinds.has(e.event),
};

/** Audit entries keep at most this many characters (UTF-16 code units) of statement text. */
export const AUDIT_SQL_MAX = 4096;

/** Names the emitting proxy instance; with its boot epoch and sequence it derives the event id. */
export const PROXY_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;
const ProxyId = z.string().regex(PROXY_ID_PATTERN, { message: 'expected a proxy id' });
export const QUERY_HASH_PATTERN = /^([0-9a-f]{16,64})?$/;
export const DECISION_RULE_PATTERN = /^[a-z0-9_.:-]{0,128}$/;
/** Tables a decision lists at most, in each of its three lists. */
export const DECISION_TABLES_MAX = 1_000;
const BootEpoch = z.int().min(0);

/** The members of every StatementDecided version, v1's. */
const decisionMembers = {
  event: AuditEventKind,
  project_id: ProjectId,
  credential_id: CredentialId.nullable(),
  session_id: SessionId.or(z.literal('')),
  source: AuditSource,
  region: Region,
  client_ip: z.union([z.ipv4(), z.ipv6(), z.literal('')]),
  /** When the statement executed. */
  ts: Timestamp,
  sql: text(AUDIT_SQL_MAX),
  normalized_sql: text(AUDIT_SQL_MAX),
  query_hash: z.string().regex(QUERY_HASH_PATTERN, { message: 'expected a lowercase hex hash or empty' }),
  statement_kind: StatementKind.or(z.literal('')),
  /** Machine-readable rule that produced the decision, '' when none. */
  decision_rule: z.string().regex(DECISION_RULE_PATTERN, { message: 'expected a machine-readable rule name' }),
  reason: text(2_000),
  cache_status: CacheStatus,
  rows_returned: Int64String,
  bytes_out: Int64String,
  /** null when the statement did not run or its latency was not finite. */
  latency_us: z.int().min(0).nullable(),
  tables_read: z.array(TableName).max(DECISION_TABLES_MAX),
  tables_written: z.array(TableName).max(DECISION_TABLES_MAX),
  tables_blocked: z.array(TableName).max(DECISION_TABLES_MAX),
  /** false means the three table lists may be incomplete. */
  parsed: z.boolean(),
  proxy_id: ProxyId.nullable(),
  boot_epoch: BootEpoch.nullable(),
  seq: Int64String.nullable(),
  approval_id: ApprovalId.nullable(),
};

/** The rules every version keeps across its members. */
function withDecisionRules<S extends z.ZodType<{ proxy_id: unknown; boot_epoch: unknown; seq: unknown; source: unknown; approval_id: unknown; event: unknown }>>(schema: S) {
  return schema
    .refine(decisionRules.proxyFieldsTogether, {
      message: 'proxy_id, boot_epoch and seq are set together',
      path: ['proxy_id'],
    })
    .refine(decisionRules.proxiedSourcesCarryProxy, {
      message: 'entries from wire and mcp carry their proxy_id, boot_epoch and seq',
      path: ['proxy_id'],
    })
    .refine(decisionRules.approvalsCarryApprovalId, {
      message: 'approval events carry their approval_id',
      path: ['approval_id'],
    });
}

/**
 * One audit entry of any kind, as recorded before v2: without where the statement ran. Stores
 * keep such events; readers upcast them (`upcastDecision`). `proxy_id`, `boot_epoch` and `seq` are
 * set together by the proxy that decided (always for `wire` and `mcp`) and null on entries the
 * control plane writes.
 */
export const StatementDecidedV1 = defineEvent(
  'StatementDecided',
  1,
  withDecisionRules(z.strictObject(decisionMembers)),
  // Ingest writes one for every decision: a fixed-order encoder, the bytes of canonicalize.
  canonicalDecisionText,
);
export type StatementDecidedV1 = z.infer<typeof StatementDecidedV1.schema>;

/** Where a statement that ran was answered from: the primary or a replica of its database, the result cache, or another region's data plane. */
export const RanOn = z.enum(['primary', 'replica', 'cache', 'relay']);
export type RanOn = z.infer<typeof RanOn>;

const answeredFromCache: ReadonlySet<unknown> = new Set<CacheStatus>(['hit', 'stale']);

/** The rules of v2's placement members, beside the members' own schemas. */
export const placementRules = {
  /** A statement ran exactly when it has a cache outcome; it ran on the cache exactly when the cache answered it. */
  ranWhenCached: (e: { ran_on: unknown; cache_status: unknown }) => (e.ran_on === null) === (e.cache_status === 'none') && (e.ran_on === 'cache') === answeredFromCache.has(e.cache_status),
  replicaNamed: (e: { ran_on: unknown; replica_id: unknown }) => (e.replica_id !== null) === (e.ran_on === 'replica'),
  /** An upstream connection ran it exactly when it ran neither nowhere nor from the cache. */
  upstreamRegionNamed: (e: { ran_on: unknown; upstream_region: unknown }) => (e.upstream_region !== null) === (e.ran_on !== null && e.ran_on !== 'cache'),
};

/**
 * One audit entry of any kind (v2): v1's members, and where the statement ran. `ran_on` is null
 * for what did not run (refusals, progress rows); `replica_id` names the replica when it ran on
 * one; `upstream_region` is the region of the data plane whose upstream connection ran it (the
 * proxy's own `region`, or the peer's for a relay), null when none did (not run, or the cache).
 */
export const StatementDecided = defineEvent(
  'StatementDecided',
  2,
  withDecisionRules(
    z.strictObject({
      ...decisionMembers,
      ran_on: RanOn.nullable(),
      replica_id: ReplicaId.nullable(),
      upstream_region: Region.nullable(),
    }),
  )
    .refine(placementRules.ranWhenCached, { message: 'ran_on is null exactly for cache_status none, and cache exactly for hit and stale', path: ['ran_on'] })
    .refine(placementRules.replicaNamed, { message: 'replica_id is set exactly when ran_on is replica', path: ['replica_id'] })
    .refine(placementRules.upstreamRegionNamed, { message: 'upstream_region is set exactly when an upstream connection ran the statement', path: ['upstream_region'] }),
  canonicalDecisionText,
);
export type StatementDecided = z.infer<typeof StatementDecided.schema>;

/** v2's members that v1 lacks. */
export type Placement = Pick<StatementDecided, 'ran_on' | 'replica_id' | 'upstream_region'>;

/**
 * A StatementDecided as every reader sees it, whichever version the store holds: v2, or v1
 * upcast, whose placement members are absent (where a v1 statement ran was not recorded). Absent,
 * not null: null says the statement did not run, and the audit entry of a v1 event leaves them
 * out of its hash, so it hashes as it always did.
 */
export type DecisionRecord = StatementDecidedV1 & Partial<Placement>;

/** The v1 -> v2 upcaster: a v1 payload is a DecisionRecord as it stands, its placement absent. */
export function upcastDecision(v1: StatementDecidedV1): DecisionRecord {
  return v1;
}

/** A stored StatementDecided of either version, parsed by its version's schema and upcast. */
export function decodeDecision(event: Pick<RecordedEvent, 'type' | 'data'>): DecisionRecord {
  return event.type === StatementDecided.type ? decodeData(StatementDecided, event) : upcastDecision(decodeData(StatementDecidedV1, event));
}

/** Whether a stored event type is a StatementDecided of any version. */
export function isDecisionType(type: string): boolean {
  return type === StatementDecided.type || type === StatementDecidedV1.type;
}

/** The version a decision record is written as: v2 when it carries its placement. */
export function decisionDefinition(decision: DecisionRecord): typeof StatementDecided | typeof StatementDecidedV1 {
  return 'ran_on' in decision ? StatementDecided : StatementDecidedV1;
}

/**
 * Entries were lost between a proxy and the trail. The seqs are those of the sequence that
 * revealed the gap: the proxy's when `proxy_id` is known, else the bus's.
 */
export const AuditGapRecorded = defineEvent(
  'AuditGapRecorded',
  1,
  z
    .strictObject({
      project_id: ProjectId,
      proxy_id: ProxyId.nullable(),
      boot_epoch: BootEpoch.nullable(),
      from_seq: Int64String,
      to_seq: Int64String,
      /** Entries lost; null when the count could not be known. */
      count: Int64String.nullable(),
      reason: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { message: 'expected a machine-readable reason' }),
      ts: Timestamp,
    })
    .refine((g) => (g.proxy_id === null) === (g.boot_epoch === null), { message: 'proxy_id and boot_epoch are set together', path: ['boot_epoch'] })
    .refine((g) => BigInt(g.from_seq) <= BigInt(g.to_seq), { message: 'from_seq exceeds to_seq', path: ['from_seq'] }),
);
export type AuditGapRecorded = z.infer<typeof AuditGapRecorded.schema>;

/** A checkpoint of a project's audit chain was signed (Ed25519 over the Merkle root of entries 1..size). */
export const AuditCheckpointSigned = defineEvent(
  'AuditCheckpointSigned',
  1,
  z.strictObject({
    project_id: ProjectId,
    size: Int64String,
    root: base64Bytes(32),
    chain_start_seq: Int64String,
    key_id: KeyId,
    signature: base64Bytes(64),
    signed_at: Timestamp,
  }),
);
export type AuditCheckpointSigned = z.infer<typeof AuditCheckpointSigned.schema>;
