import { auditStream, checkpointStream, prepareStreamEvents, type AuditEventPayload } from '../../projections/audit.js';
import { MerkleBuilder } from '../crypto/merkle.js';
import { AuditCheckpointSigned } from '../events/audit.js';
import { encodeEvent } from '../events/envelope.js';
import type { EventStore, NewEvent } from '../store/port.js';
import { leafDigestOf, type HmacKeyring, type PreparedEntry } from './chain.js';
import { signAuditCheckpoint, type AnchorSigner } from './checkpoints.js';
import { derivedUuid } from '../crypto/derived-uuid.js';
import type { PreparedEntries } from './prepared-entries.js';

/** What a checkpointer has read of one project's chain: the Merkle frontier and the next revision to read. */
interface ChainProgress {
  readonly tree: MerkleBuilder;
  revision: number;
}

export interface Checkpointer {
  /** Signs a checkpoint of everything the project's chain holds now; undefined when it holds nothing. */
  sign(projectId: string, now: Date): Promise<AuditCheckpointSigned | undefined>;
  /**
   * Events the caller has just appended to the project's audit stream in one append, the first at
   * revision `firstRevision`, exactly as committed (each with the decision it encoded, when it has
   * it): when they are the next ones the tree needs, it takes them without reading them back;
   * otherwise the next signing reads them.
   */
  appended(projectId: string, firstRevision: number, events: readonly (AuditEventPayload & Pick<NewEvent, 'id'>)[]): Promise<void>;
}

/**
 * Signs checkpoints of projects' chains as the event log has them (never the read model, which an
 * attacker may have edited): size = every entry so far, root = RFC 6962 Merkle root of their
 * canonical bytes. Each project's stream is read once: later checkpoints read only the events
 * appended since the last one (the stream is append-only), and none that the appender handed over
 * as committed (`appended`). The leaves are not hashes of the chain, so the entries are not chained
 * here, only decoded and serialized. Stored as an AuditCheckpointSigned event; signing the same
 * size twice appends once. The entries prepared from events handed over go to `handOn`, for the
 * audit projection of the same process.
 */
export function createCheckpointer(store: EventStore, keys: HmacKeyring, anchor: AnchorSigner, handOn?: PreparedEntries): Checkpointer {
  const progress = new Map<string, ChainProgress>();
  const pending = new Map<string, Promise<unknown>>();

  /** Runs one project's signings one after another, so two never read the same events into one tree. */
  function serially<T>(projectId: string, work: () => Promise<T>): Promise<T> {
    const next = (pending.get(projectId) ?? Promise.resolve()).then(work);
    pending.set(projectId, next.catch(() => undefined));
    return next;
  }

  function chainOf(projectId: string): ChainProgress {
    const chain = progress.get(projectId) ?? { tree: new MerkleBuilder(), revision: 0 };
    progress.set(projectId, chain);
    return chain;
  }

  /** Adds the stream's events from the chain's next revision on, in revision order; returns their entries. */
  function grow(chain: ChainProgress, events: readonly AuditEventPayload[]): (PreparedEntry | undefined)[] {
    // Decoded in full before the tree grows, so a failure leaves the tree and the revision as they were.
    const prepared = prepareStreamEvents(events, chain.revision, keys);
    for (const entry of prepared) if (entry) chain.tree.appendLeafDigest(leafDigestOf(entry));
    chain.revision += events.length;
    return prepared;
  }

  async function caughtUp(projectId: string): Promise<ChainProgress> {
    const chain = chainOf(projectId);
    grow(chain, await store.readStream(auditStream(projectId), chain.revision));
    return chain;
  }

  async function signNow(projectId: string, now: Date): Promise<AuditCheckpointSigned | undefined> {
    const { tree } = await caughtUp(projectId);
    if (tree.size === 0) return undefined;
    const record = signAuditCheckpoint({ origin: projectId, size: tree.size, root: tree.root(), chainStartSeq: 1 }, anchor, now.toISOString());
    const event = encodeEvent(AuditCheckpointSigned, record, { event_id: derivedUuid(`pgward-checkpoint\0${projectId}\0${tree.size}`), correlation_id: 'checkpoint', actor: 'audit-checkpointer', at: record.signed_at });
    const stored = await store.append(checkpointStream(projectId), [event], 'any');
    if (!stored.duplicate) return record;
    const existing = (await store.readStream(checkpointStream(projectId))).find((e) => e.id === event.id);
    return existing ? (JSON.parse(Buffer.from(existing.data).toString('utf8')) as AuditCheckpointSigned) : record;
  }

  return {
    sign: (projectId, now) => serially(projectId, () => signNow(projectId, now)),
    appended: (projectId, firstRevision, events) =>
      serially(projectId, async () => {
        const chain = chainOf(projectId);
        if (chain.revision !== firstRevision) return;
        const entries = grow(chain, events);
        const stream = auditStream(projectId);
        entries.forEach((entry, i) => {
          if (entry) handOn?.put(stream, events[i]!, firstRevision + i, entry);
        });
      }),
  };
}

/** A one-off checkpoint (on demand): reads the project's whole stream. */
export function signProjectCheckpoint(store: EventStore, projectId: string, keys: HmacKeyring, anchor: AnchorSigner, now: Date): Promise<AuditCheckpointSigned | undefined> {
  return createCheckpointer(store, keys, anchor).sign(projectId, now);
}
