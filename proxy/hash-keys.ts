import { randomBytes, randomUUID } from 'node:crypto';
import { openSecret, sealSecret, type Keyring } from '../src/crypto/seal.js';
import { decodeWith, encodeEvent } from '../src/events/envelope.js';
import { ProjectHashKeyGenerated } from '../src/events/projects.js';
import type { EventStore } from '../src/store/port.js';
import type { PolicyRow } from '../projections/policies.js';
import { hashKeyOf, masksWithHash, type HashKey } from './policy/hash-key.js';

const streamOf = (projectId: string) => `hashkey-${projectId}`;
const aadOf = (projectId: string) => `hash-key:${projectId}`;

/**
 * Each project's key for the `hash` mask: read from its stream, or generated and appended there
 * when it has none (the stream's first event wins a race, and every process then reads that one).
 * Kept in memory once known: a project's key never changes.
 */
export class HashKeys {
  private readonly known = new Map<string, HashKey>();
  private readonly loading = new Map<string, Promise<HashKey>>();

  constructor(
    private readonly store: Pick<EventStore, 'readStream' | 'append'>,
    private readonly keyring: Keyring,
    private readonly actor: string,
  ) {}

  /** The key, when this process knows it already: for the hot path, which does no I/O. */
  get(projectId: string): HashKey | undefined {
    return this.known.get(projectId);
  }

  /**
   * The key for a decision of `policy`, without I/O: when the policy masks with hash and the key is
   * not known yet, it is loaded in the background (the statement is refused meanwhile).
   */
  forPolicy(policy: PolicyRow | undefined, onFailure: (error: unknown) => void): HashKey | undefined {
    if (!policy || !masksWithHash(policy)) return undefined;
    const known = this.known.get(policy.project_id);
    if (!known) this.load(policy.project_id).catch(onFailure);
    return known;
  }

  /** The key, read or generated once. */
  load(projectId: string): Promise<HashKey> {
    const known = this.known.get(projectId);
    if (known) return Promise.resolve(known);
    let loading = this.loading.get(projectId);
    if (!loading) {
      loading = this.readOrGenerate(projectId).finally(() => this.loading.delete(projectId));
      this.loading.set(projectId, loading);
    }
    return loading;
  }

  private async readOrGenerate(projectId: string): Promise<HashKey> {
    const stream = streamOf(projectId);
    let first = (await this.store.readStream(stream))[0];
    if (!first) {
      const sealed = sealSecret(randomBytes(32).toString('hex'), this.keyring, aadOf(projectId));
      const at = new Date().toISOString();
      // Appended whatever the stream holds by now; the stream's first event is the key either way.
      await this.store.append(stream, [encodeEvent(ProjectHashKeyGenerated, { project_id: projectId, key: sealed }, { event_id: randomUUID(), correlation_id: `hash-key:${projectId}`, actor: this.actor, at })], 'any');
      first = (await this.store.readStream(stream))[0]!;
    }
    const { data } = decodeWith(ProjectHashKeyGenerated, first);
    const key = hashKeyOf(Buffer.from(openSecret(data.key, this.keyring, aadOf(projectId)), 'hex'));
    this.known.set(projectId, key);
    return key;
  }
}
