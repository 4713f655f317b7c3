import { auditStream, chainEvents, checkpointStream } from '../../projections/audit.js';
import { MerkleBuilder } from '../crypto/merkle.js';
import { AuditCheckpointSigned } from '../events/audit.js';
import { encodeEvent } from '../events/envelope.js';
import type { EventStore } from '../store/port.js';
import type { HmacKeyring } from './chain.js';
import { signAuditCheckpoint, type AnchorSigner } from './checkpoints.js';
import { canonicalEntryBytes } from './entry.js';
import { derivedUuid } from '../crypto/derived-uuid.js';

/**
 * Signs a checkpoint of a project's chain as the event log has it (never the read model, which an
 * attacker may have edited): size = every entry so far, root = RFC 6962 Merkle root of their
 * canonical bytes. Stored as an AuditCheckpointSigned event; signing the same size twice appends once.
 */
export async function signProjectCheckpoint(store: EventStore, projectId: string, keys: HmacKeyring, anchor: AnchorSigner, now: Date): Promise<AuditCheckpointSigned | undefined> {
  const entries = chainEvents(await store.readStream(auditStream(projectId)), new Map(), keys).map(({ entry }) => entry);
  if (entries.length === 0) return undefined;
  const tree = new MerkleBuilder();
  for (const entry of entries) tree.append(canonicalEntryBytes(entry));
  const record = signAuditCheckpoint({ origin: projectId, size: entries.length, root: tree.root(), chainStartSeq: 1 }, anchor, now.toISOString());
  const event = encodeEvent(AuditCheckpointSigned, record, { event_id: derivedUuid(`pgward-checkpoint\0${projectId}\0${entries.length}`), correlation_id: 'checkpoint', actor: 'audit-checkpointer', at: record.signed_at });
  const stored = await store.append(checkpointStream(projectId), [event], 'any');
  if (stored.duplicate) {
    const existing = (await store.readStream(checkpointStream(projectId))).find((e) => e.id === event.id);
    return existing ? (JSON.parse(Buffer.from(existing.data).toString('utf8')) as AuditCheckpointSigned) : record;
  }
  return record;
}
