/**
 * The anomaly windows (docs/anomalies.md): per credential, hourly windows of its audit entries and
 * the baseline of its closed hours, the query shapes it has run, its project's rules, and what the
 * detectors found. Detections are rows here, computed from the events alone (event time, never the
 * clock), so a rebuild reproduces them; src/anomalies/raiser.ts turns each into an AnomalyRaised event.
 */
import { exactCount } from '../src/audit/exact-sum.js';
import { Detector, type Activity, type Baseline, type Detection } from '../src/anomalies/detect.js';
import { AnomalyRulesSet } from '../src/events/anomalies.js';
import { isDecisionType, type AuditEventKind } from '../src/events/audit.js';
import type { StoredRules } from '../src/events/anomaly-rules.js';
import { decodeWith, parseJson } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { AUDIT_STREAM_PREFIX, type AuditEventPayload } from './audit.js';
import { ROLLUP_FILLFACTOR, type Projection, type ProjectionTx, type ReadModelTable } from './projection.js';
import { upsertAll } from './upserts.js';

export const ANOMALY_RULES_PREFIX = 'anomalyrules-';
export const ANOMALY_WINDOWS = 'anomaly_windows';

export function anomalyRulesStream(projectId: string): string {
  return `${ANOMALY_RULES_PREFIX}${projectId}`;
}

type Input = { readonly kind: 'activity'; readonly activity: Activity } | { readonly kind: 'rules'; readonly projectId: string; readonly rules: StoredRules; readonly at: string; readonly revision: number };

/** The members of a decision the detectors read; the rest of the payload is never looked at. */
interface DecisionFields {
  project_id: string;
  credential_id: string | null;
  ts: string;
  event: AuditEventKind;
  bytes_out: string;
  query_hash: string;
  decision_rule: string;
}

/** An event; a decision's with the StatementDecided ingest encoded it from, when ingest handed it over in this process (no parse then). */
function inputOf(event: RecordedEvent & AuditEventPayload): Input | undefined {
  if (isDecisionType(event.type)) {
    const d: DecisionFields = event.decision ?? (parseJson(event.data) as DecisionFields);
    if (d.credential_id === null) return undefined;
    const activity: Activity = {
      projectId: d.project_id,
      credentialId: d.credential_id,
      ts: d.ts,
      event: d.event,
      bytesOut: exactCount(d.bytes_out),
      queryHash: d.query_hash,
      rule: d.decision_rule,
      position: event.position,
    };
    return { kind: 'activity', activity };
  }
  if (event.type === AnomalyRulesSet.type) {
    const { data, metadata } = decodeWith(AnomalyRulesSet, event);
    const { project_id: projectId, ...rules } = data;
    return { kind: 'rules', projectId, rules, at: metadata.at, revision: event.revision };
  }
  return undefined;
}

const key = (projectId: string, credentialId: string) => `${projectId}\u0000${credentialId}`;

interface NewShape {
  project_id: string;
  credential_id: string;
  query_hash: string;
  first_seen: string;
}

/** The query hashes of one credential known in this batch; a new one is also queued for anomaly_shapes. */
class KnownShapes {
  readonly known = new Set<string>();
  constructor(
    private readonly projectId: string,
    private readonly credentialId: string,
    private readonly queued: NewShape[],
  ) {}

  has(queryHash: string): boolean {
    return this.known.has(queryHash);
  }

  add(queryHash: string, ts: string): void {
    this.known.add(queryHash);
    this.queued.push({ project_id: this.projectId, credential_id: this.credentialId, query_hash: queryHash, first_seen: ts });
  }
}

interface RulesRow {
  project_id: string;
  rules: StoredRules;
  revision: number;
  updated_at: string;
}

interface WindowRow {
  project_id: string;
  credential_id: string;
  hour: string;
  statements: number;
  bytes_out: number | string;
  refusals: number;
  novel_shapes: number;
}

interface Stored {
  readonly rules: Map<string, RulesRow>;
  readonly baselines: Map<string, Baseline>;
  /** Indexes of the triples not in anomaly_shapes yet: usually none. */
  readonly unseen: Set<number>;
}

/**
 * What a batch folds onto, in one round trip: the rules of its projects, the baselines of its
 * (project, credential) owners, and which of its (project, credential, query hash) triples
 * anomaly_shapes does not hold yet.
 */
async function loadStored(tx: ProjectionTx, projectIds: string[], owners: readonly Activity[], triples: readonly (readonly [string, string, string])[]): Promise<Stored> {
  const { rows } = await tx.query<{ rules: RulesRow[]; baselines: [string, string, Baseline][]; unseen: number[] }>(
    `select (select coalesce(jsonb_agg(to_jsonb(r)), '[]') from ${tx.table('anomaly_rules')} r where r.project_id = any($1::text[])) as rules,
            (select coalesce(jsonb_agg(jsonb_build_array(b.project_id, b.credential_id, b.state)), '[]') from ${tx.table('anomaly_baselines')} b
               join unnest($2::text[], $3::text[]) as k (project_id, credential_id) using (project_id, credential_id)) as baselines,
            array(select (k.i - 1)::int from unnest($4::text[], $5::text[], $6::text[]) with ordinality as k (project_id, credential_id, query_hash, i)
                   where not exists (select from ${tx.table('anomaly_shapes')} s
                                      where (s.project_id, s.credential_id, s.query_hash) = (k.project_id, k.credential_id, k.query_hash))) as unseen`,
    [projectIds, owners.map((a) => a.projectId), owners.map((a) => a.credentialId), triples.map((t) => t[0]), triples.map((t) => t[1]), triples.map((t) => t[2])],
  );
  const row = rows[0]!;
  return {
    rules: new Map(row.rules.map((rules) => [rules.project_id, rules])),
    baselines: new Map(row.baselines.map(([projectId, credentialId, state]) => [key(projectId, credentialId), state])),
    unseen: new Set(row.unseen),
  };
}

const replaceAll = (columns: readonly string[]) => columns.map((c) => `${c} = excluded.${c}`).join(', ');

/** Folds the inputs in order onto the stored state and writes what changed: one read and one write a batch. */
async function write(tx: ProjectionTx, inputs: readonly Input[]): Promise<void> {
  if (inputs.length === 0) return;
  const activities = inputs.flatMap((i) => (i.kind === 'activity' ? [i.activity] : []));
  const credentialKeys = new Map(activities.map((a) => [key(a.projectId, a.credentialId), a]));
  const shapeKeys = new Map(activities.filter((a) => a.queryHash !== '').map((a) => [`${key(a.projectId, a.credentialId)}\u0000${a.queryHash}`, [a.projectId, a.credentialId, a.queryHash] as [string, string, string]]));
  const projectIds = [...new Set(inputs.map((i) => (i.kind === 'activity' ? i.activity.projectId : i.projectId)))];
  const triples = [...shapeKeys.values()];
  const { rules, baselines, unseen } = await loadStored(tx, projectIds, [...credentialKeys.values()], triples);
  const changedRules = new Map<string, RulesRow>();
  const detector = new Detector(new Map([...rules].map(([projectId, row]) => [projectId, row.rules])));
  const newShapes: NewShape[] = [];
  const shapeMemory = new Map<string, KnownShapes>();
  const shapesOf = (projectId: string, credentialId: string, credential: string): KnownShapes => {
    let known = shapeMemory.get(credential);
    if (!known) shapeMemory.set(credential, (known = new KnownShapes(projectId, credentialId, newShapes)));
    return known;
  };
  for (const [i, [projectId, credentialId, queryHash]] of triples.entries()) {
    if (!unseen.has(i)) shapesOf(projectId, credentialId, key(projectId, credentialId)).known.add(queryHash);
  }
  // Each hour of a credential is one Baseline object: the windows to write are the objects touched.
  const windows = new Map<Baseline, Activity>();
  const detections: Detection[] = [];
  for (const input of inputs) {
    if (input.kind === 'rules') {
      const row = { project_id: input.projectId, rules: input.rules, revision: input.revision, updated_at: input.at };
      detector.setRules(input.projectId, input.rules);
      changedRules.set(input.projectId, row);
      continue;
    }
    const a = input.activity;
    const credential = key(a.projectId, a.credentialId);
    const result = detector.observe(baselines.get(credential), a, shapesOf(a.projectId, a.credentialId, credential));
    baselines.set(credential, result.baseline);
    windows.set(result.baseline, a);
    if (result.detections.length > 0) detections.push(...result.detections);
  }
  const windowRows: WindowRow[] = [...windows].map(([b, a]) => ({
    project_id: a.projectId, credential_id: a.credentialId, hour: b.hour, statements: b.statements, bytes_out: b.bytes_out, refusals: b.refusals, novel_shapes: b.novel_shapes,
  }));
  const touched = [...credentialKeys.values()].map((a) => ({ project_id: a.projectId, credential_id: a.credentialId, state: baselines.get(key(a.projectId, a.credentialId)) }));
  await upsertAll(tx, [
    { table: 'anomaly_rules', rows: [...changedRules.values()], onConflict: `(project_id) do update set ${replaceAll(['rules', 'revision', 'updated_at'])}` },
    { table: 'anomaly_baselines', rows: touched, onConflict: '(project_id, credential_id) do update set state = excluded.state' },
    { table: 'anomaly_windows', rows: windowRows, onConflict: `(project_id, credential_id, hour) do update set ${replaceAll(['statements', 'bytes_out', 'refusals', 'novel_shapes'])}` },
    { table: 'anomaly_shapes', rows: newShapes, onConflict: 'do nothing' },
    { table: 'anomaly_detections', rows: detections, onConflict: 'do nothing' },
  ]);
}

export const anomalyWindowsTables: readonly ReadModelTable[] = [
  {
    name: 'anomaly_rules',
    columns: 'project_id text primary key, rules jsonb not null, revision integer not null, updated_at timestamptz not null',
    orderBy: 'project_id',
  },
  {
    name: 'anomaly_baselines',
    fillfactor: ROLLUP_FILLFACTOR,
    columns: 'project_id text not null, credential_id text not null, state jsonb not null, primary key (project_id, credential_id)',
    orderBy: 'project_id, credential_id',
  },
  {
    name: 'anomaly_windows',
    fillfactor: ROLLUP_FILLFACTOR,
    columns: `project_id text not null, credential_id text not null, hour timestamptz not null, statements bigint not null, bytes_out numeric not null,
      refusals bigint not null, novel_shapes bigint not null, primary key (project_id, credential_id, hour)`,
    orderBy: 'project_id, credential_id, hour',
  },
  {
    name: 'anomaly_shapes',
    columns: 'project_id text not null, credential_id text not null, query_hash text not null, first_seen timestamptz not null, primary key (project_id, credential_id, query_hash)',
    orderBy: 'project_id, credential_id, query_hash',
  },
  {
    name: 'anomaly_detections',
    columns: `anomaly_id text primary key, project_id text not null, credential_id text not null, kind text not null, severity text not null, title text not null,
      details jsonb not null, window_start timestamptz not null, window_end timestamptz not null, detected_at timestamptz not null, position bigint not null,
      disable_credential boolean not null`,
    orderBy: 'anomaly_id',
    indexes: ['position, anomaly_id'],
  },
];

export const anomalyWindowsProjection: Projection = {
  name: ANOMALY_WINDOWS,
  streamPrefixes: [AUDIT_STREAM_PREFIX, ANOMALY_RULES_PREFIX],
  tables: anomalyWindowsTables,
  prepare: async (events) => {
    const inputs = events.map(inputOf).filter((i): i is Input => i !== undefined);
    return (tx) => write(tx, inputs);
  },
  apply: (tx, events) => write(tx, events.map(inputOf).filter((i): i is Input => i !== undefined)),
};
