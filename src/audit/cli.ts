import { parseArgs } from 'node:util';
import type pg from 'pg';
import { auditStream, chainEvents } from '../../projections/audit.js';
import { auditCheckpoints, auditEntries } from '../../queries/audit.js';
import type { Config } from '../config.js';
import { canonicalize } from '../crypto/canonical-json.js';
import type { EventStore } from '../store/port.js';
import { sharedDigestPool } from './digest-pool.js';
import { auditKeysFrom, loadAnchor } from './keys.js';
import { verifyChainParallel, type AuditChainVerification, type VerifyChainInput } from './verify.js';

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
  const entries = await auditEntries(state.pool, values.project);
  for (const entry of entries) write(canonicalize({ type: 'entry', ...entry }));
  for (const checkpoint of await auditCheckpoints(state.store, values.project)) write(canonicalize({ type: 'checkpoint', ...checkpoint }));
  return entries.length;
}

/** `pgward audit verify --project ID [--from-events]`: prints the verification; exit 1 when anything is not ok. */
export async function auditVerify(config: Config, args: string[], state: { store: EventStore; pool: pg.Pool }): Promise<{ report: AuditVerifyReport; ok: boolean }> {
  const { values } = parseArgs({ args, options: { project: { type: 'string' }, 'from-events': { type: 'boolean', default: false } } });
  if (!values.project) throw new RangeError('audit verify needs --project ID');
  const projectId = values.project;
  // The digest workers load while the entries are read.
  sharedDigestPool().start();
  const keys = auditKeysFrom(config);
  const anchor = await loadAnchor(config);
  const checkpoints = await auditCheckpoints(state.store, projectId);
  const verifiedAt = new Date().toISOString();
  const verify = (entries: VerifyChainInput['entries']) =>
    verifyChainParallel({ projectId, entries, checkpoints, hmacKeys: keys.keys, anchorPublicKey: anchor.publicKey, verifiedAt });
  const stored = await auditEntries(state.pool, projectId);
  const report: AuditVerifyReport = await verify(stored);
  if (!values['from-events']) return { report, ok: report.ok };

  const recomputed = chainEvents(await state.store.readStream(auditStream(projectId)), new Map(), keys).map(({ entry }) => entry);
  const bySeq = new Map(stored.map((entry) => [entry.seq, canonicalize(entry)]));
  const diverging = recomputed.find((entry) => bySeq.get(entry.seq) !== canonicalize(entry))?.seq ?? (stored.length > recomputed.length ? recomputed.length + 1 : null);
  const fromEvents = { verification: await verify(recomputed), first_diverging_row_seq: diverging, entries: recomputed.length };
  return { report: { ...report, from_events: fromEvents }, ok: report.ok && fromEvents.verification.ok && diverging === null };
}
