import type { StatementContext, StatementDecision } from './policy/hook.js';
import type { UpstreamCatalog } from './policy/upstream-catalog.js';
import type { CatalogUnavailable } from './upstream/catalog-snapshot.js';

/** What a wire session's decision is made on (statement-gate.ts decideOn), less the catalog. */
export type DecisionInputs = Omit<StatementContext, 'catalog'>;

/**
 * A session's last allowed decision and what it was made on. A statement is decided at its Parse
 * (twice: whether it must wait for a fresher catalog, then for good) and again at each Bind, and a
 * session mostly runs one text again and again: while every input is the one it was made on (the
 * same policy row at the same revision, catalog snapshot, hash key, session values, credential and
 * protocol), the decision is the one the policy engine would give again. Only allowed decisions
 * are kept (a refusal counts and may trip a honeytoken each time), and only under a policy that
 * plants no honeytoken (whose canaries follow the honeytoken rows, not the policy's).
 */
export class LastAllowed {
  private sql = '';
  private inputs: DecisionInputs | undefined;
  private revision = 0;
  private catalog: UpstreamCatalog | CatalogUnavailable | undefined;
  private decision: StatementDecision | undefined;

  /** The kept decision when `sql` and every input are those it was made on; else undefined. */
  of(sql: string, inputs: DecisionInputs, catalog: UpstreamCatalog | CatalogUnavailable): StatementDecision | undefined {
    const last = this.inputs;
    if (last === undefined || sql !== this.sql || catalog !== this.catalog || inputs.policy !== last.policy || inputs.policy?.revision !== this.revision) return undefined;
    const same =
      inputs.credential === last.credential &&
      inputs.protocol === last.protocol &&
      inputs.hashKey === last.hashKey &&
      inputs.sessionValues === last.sessionValues &&
      inputs.sandboxed === last.sandboxed &&
      inputs.honeytokens === last.honeytokens;
    return same ? this.decision : undefined;
  }

  /** Keeps `decision` when it allowed `sql` under a policy with no honeytoken; returns it. */
  keep(sql: string, inputs: DecisionInputs, catalog: UpstreamCatalog | CatalogUnavailable, decision: StatementDecision): StatementDecision {
    if (decision.action !== 'allow' || inputs.policy === undefined || inputs.policy.honeytokens.length > 0) return decision;
    this.sql = sql;
    this.inputs = inputs;
    this.revision = inputs.policy.revision;
    this.catalog = catalog;
    this.decision = decision;
    return decision;
  }
}
