import { parseArgs } from 'node:util';
import type pg from 'pg';
import { auditStream, chainEvents } from '../../projections/audit.js';
import { auditCheckpoints, auditEntries, auditEntryCount, auditEntryPages } from '../../queries/audit.js';
import type { Config } from '../config.js';
import { canonicalize } from '../crypto/canonical-json.js';
import type { EventStore } from '../store/port.js';
import { sharedDigestPool } from './digest-pool.js';
import { auditKeysFrom, loadAnchor } from './keys.js';
import type { AuditEntry } from './entry.js';
import type { ChainTip, HmacKeyring } from './chain.js';
import { verifyChainPages, type AuditChainVerification } from './verify.js';

export interface AuditVerifyReport extends AuditChainVerification {
  /** With --from-events: the chain recomputed from the event store, and the first read-model row that differs from it. */
  readonly from_events?: { verification: AuditChainVerification; first_diverging_row_seq: number | null; entries: number };
}

/**
 * `pgward audit export --project ID`: JSON Lines an auditor verifies with docs/audit-verification.md
 * alone — one `anchor` line (the public key), then every `entry` in seq order, then every `checkpoint`.
 */
export async function auditExport(config: Config, args: string[], state: { store: EventStore; pool: pg.Pool }, write: (line: string) => void): Promise<number> {
  const { values } = parseArgs({ args, options: { project: { type: 'string' } } });
  if (!values.project) throw new RangeError('audit export needs --project ID');
  const anchor = await loadAnchor(config);
  write(canonicalize({ type: 'anchor', project_id: values.project, public_key: anchor.publicKey.export({ type: 'spki', format: 'pem' }).toString() }));
  let entries = 0;
  for await (const page of auditEntryPages(state.pool, values.project)) {
    for (const entry of page) write(canonicalize({ type: 'entry', ...entry }));
    entries += page.length;
  }
  for (const checkpoint of await auditCheckpoints(state.store, values.project)) write(canonicalize({ type: 'checkpoint', ...checkpoint }));
  return entries;
}

/** Audit events read from the store at a time by `audit verify --from-events`. */
const EVENT_PAGE = 10_000;

/** The project's audit trail recomputed from its events, a page at a time, each page chained onto the last. */
async function* recomputedPages(store: EventStore, projectId: string, keys: HmacKeyring, pageSize: number): AsyncGenerator<AuditEntry[]> {
  const tips = new Map<string, ChainTip>();
  for (let from = 0; ; ) {
    const events = await store.readStream(auditStream(projectId), from, pageSize);
    const entries = chainEvents(events, tips, keys).map(({ entry }) => entry);
    if (entries.length > 0) yield entries;
    if (events.length < pageSize) return;
    from = events[events.length - 1]!.revision + 1;
  }
}

/**
 * How many entries the events give, and the first seq whose read-model row differs from the
 * recomputed entry (a row missing, or one more row than entries, counts), comparing a page at a time.
 */
async function divergence(state: { store: EventStore; pool: pg.Pool }, projectId: string, keys: HmacKeyring, pageSize: number): Promise<{ entries: number; firstDiverging: number | null }> {
  let entries = 0;
  let firstDiverging: number | null = null;
  for await (const page of recomputedPages(state.store, projectId, keys, pageSize)) {
    entries += page.length;
    if (firstDiverging !== null) continue;
    const stored = new Map((await auditEntries(state.pool, projectId, page[0]!.seq, page[page.length - 1]!.seq)).map((entry) => [entry.seq, canonicalize(entry)]));
    firstDiverging = page.find((entry) => stored.get(entry.seq) !== canonicalize(entry))?.seq ?? null;
  }
  if (firstDiverging === null && (await auditEntryCount(state.pool, projectId)) > entries) firstDiverging = entries + 1;
  return { entries, firstDiverging };
}

/**
 * `pgward audit verify --project ID [--from-events]`: prints the verification; exit 1 when anything
 * is not ok. The entries and events are read a page at a time: a trail of millions fits in memory.
 */
export async function auditVerify(config: Config, args: string[], state: { store: EventStore; pool: pg.Pool }, pageSize = EVENT_PAGE): Promise<{ report: AuditVerifyReport; ok: boolean }> {
  const { values } = parseArgs({ args, options: { project: { type: 'string' }, 'from-events': { type: 'boolean', default: false } } });
  if (!values.project) throw new RangeError('audit verify needs --project ID');
  const projectId = values.project;
  // The digest workers load while the entries are read.
  sharedDigestPool().start();
  const keys = auditKeysFrom(config);
  const anchor = await loadAnchor(config);
  const options = { projectId, checkpoints: await auditCheckpoints(state.store, projectId), hmacKeys: keys.keys, anchorPublicKey: anchor.publicKey, verifiedAt: new Date().toISOString() };
  const report: AuditVerifyReport = await verifyChainPages(options, auditEntryPages(state.pool, projectId, 1, undefined, pageSize));
  if (!values['from-events']) return { report, ok: report.ok };

  const { entries, firstDiverging } = await divergence(state, projectId, keys, pageSize);
  const fromEvents = { verification: await verifyChainPages(options, recomputedPages(state.store, projectId, keys, pageSize)), first_diverging_row_seq: firstDiverging, entries };
  return { report: { ...report, from_events: fromEvents }, ok: report.ok && fromEvents.verification.ok && firstDiverging === null };
}
