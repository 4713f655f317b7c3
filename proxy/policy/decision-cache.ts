import type { PolicyRow } from '../../projections/policies.js';
import type { Canary } from './rules.js';

interface PerPolicy<D> {
  readonly revision: number;
  readonly entries: Map<string, D>;
}

/**
 * Decisions that allowed a message's SQL, per policy row and the canaries in force. A policy row is
 * replaced when its events arrive (and a revision change also starts afresh), so a changed policy
 * never meets an old decision. Refusals are not kept: they are rare, and a canary trip has effects.
 * Least recently inserted entries are evicted beyond `capacity` per policy.
 */
export class AllowedDecisions<D> {
  private readonly byPolicy = new WeakMap<PolicyRow, PerPolicy<D>>();

  constructor(private readonly capacity = 10_000) {}

  private static key(canaries: readonly Canary[], sql: string): string {
    if (canaries.length === 0) return sql;
    return `${canaries.map((c) => `${c.honeytoken_id}\u0001${c.kind}\u0001${c.target}`).join('\u0002')}\u0000${sql}`;
  }

  get(policy: PolicyRow, canaries: readonly Canary[], sql: string): D | undefined {
    const known = this.byPolicy.get(policy);
    return known?.revision === policy.revision ? known.entries.get(AllowedDecisions.key(canaries, sql)) : undefined;
  }

  set(policy: PolicyRow, canaries: readonly Canary[], sql: string, decision: D): void {
    let known = this.byPolicy.get(policy);
    if (known?.revision !== policy.revision) this.byPolicy.set(policy, (known = { revision: policy.revision, entries: new Map() }));
    known.entries.set(AllowedDecisions.key(canaries, sql), decision);
    if (known.entries.size > this.capacity) known.entries.delete(known.entries.keys().next().value as string);
  }
}
