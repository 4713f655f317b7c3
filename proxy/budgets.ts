/**
 * Query budgets on the wire (spec §1, issue #6): statements per UTC day and bytes sent per UTC
 * month, per credential (its policy's queries_per_day and bytes_per_month) and per organization
 * (its plan's limits); 0 means no limit. One tally per process: the wire and the hosted MCP of a
 * process count against the same figures at once. What a scope spent elsewhere (before this
 * process started counting, or in other processes of a split deployment) comes from the audit
 * trail's usage rollups, read at the first statement of a period and again at most every
 * BUDGET_REFRESH_MS while statements of the scope are checked; this process adds what it admits in
 * between. Another process's statements therefore count here within BUDGET_REFRESH_MS plus the
 * trail's ingest and projection lag (docs/policy.md, Budgets).
 */
import type { CredentialRow } from '../projections/credentials.js';
import type { PolicyRow } from '../projections/policies.js';
import type { BudgetScope, SpentSince } from '../queries/budget-usage.js';
import type { PlanTerms } from '../src/plans.js';

export type SpentSource = (scope: BudgetScope, day: Date, month: Date) => Promise<SpentSince>;

const DAY_MS = 86_400_000;
/** After a failed read of the trail, how long before the next statement tries again. */
const RETRY_MS = 5_000;
/** How often a scope's figures are read again from the trail while its statements are checked. */
export const BUDGET_REFRESH_MS = 5_000;

interface Tally {
  /** Start of the UTC day and month counted, epoch ms. */
  day: number;
  month: number;
  queries: number;
  /** Bytes as a number: exact to 8 PiB a month. */
  bytes: number;
  /** 'unread' until the trail's figures are added; 'failed' when they could not be read. */
  state: 'unread' | 'read' | 'failed';
  retryAt: number;
  /** When the trail is read again (epoch ms); a read in flight pushes it forward. */
  refreshAt: number;
}

export interface BudgetRefusal {
  readonly rule: string;
  readonly reason: string;
}

function monthStartOf(dayStart: number): number {
  const day = new Date(dayStart);
  return Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), 1);
}

function nextMonthOf(monthStart: number): number {
  const month = new Date(monthStart);
  return Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 1);
}

/** The limits that apply to one statement of a credential: its policy's and its organization's plan's. */
export interface Limits {
  readonly policy: Pick<PolicyRow, 'name' | 'queries_per_day' | 'bytes_per_month'>;
  readonly org?: { readonly id: string; readonly plan: string; readonly terms: PlanLimits };
}

export class Budgets {
  /** Tallies by scope kind, then id: no key string to build per statement, and no lookup keyed by the kind. */
  private readonly credentialTallies = new Map<string, Tally>();
  private readonly orgTallies = new Map<string, Tally>();

  constructor(
    private readonly source: SpentSource | undefined,
    private readonly onError: (error: unknown, scope: BudgetScope) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The scope's tally for the current period, rolled over when a day or month has passed. */
  private tally(scope: BudgetScope): Tally {
    const now = this.now();
    const day = now - (now % DAY_MS);
    const tallies = scope.kind === 'credential' ? this.credentialTallies : this.orgTallies;
    let tally = tallies.get(scope.id);
    if (!tally) {
      tally = { day, month: monthStartOf(day), queries: 0, bytes: 0, state: 'unread', retryAt: 0, refreshAt: 0 };
      tallies.set(scope.id, tally);
    } else if (tally.day !== day) {
      const month = monthStartOf(day);
      // A new period starts from what the trail holds for it: read it again.
      Object.assign(tally, { day, queries: 0, state: 'unread', retryAt: 0, refreshAt: 0 }, month !== tally.month ? { month, bytes: 0 } : {});
    }
    return tally;
  }

  /**
   * Reads what the trail says the scope spent this period, once per period; never rejects. What
   * this proxy counted before the read is in the trail already (or will be within the projection's
   * lag), so the read replaces it; what it counts during the read is added.
   */
  async prepare(scope: BudgetScope): Promise<void> {
    const tally = this.tally(scope);
    if (tally.state === 'read' || !this.source) {
      tally.state = 'read';
      return;
    }
    tally.retryAt = this.now() + RETRY_MS;
    try {
      await this.read(scope, tally, false);
    } catch (error) {
      tally.state = 'failed';
      this.onError(error, scope);
    }
  }

  /**
   * Reads the trail's figures for the tally's period into it. The first read replaces what was
   * counted before it (the trail holds it, or will within its lag); a later one only raises the
   * figures, by what other processes spent: what this process admitted is never forgotten because
   * the trail has not caught up with it yet. What is admitted during the read is added.
   */
  private async read(scope: BudgetScope, tally: Tally, refresh: boolean): Promise<void> {
    const { day, month, queries, bytes } = tally;
    tally.refreshAt = this.now() + BUDGET_REFRESH_MS;
    const spent = await this.source!(scope, new Date(day), new Date(month));
    // The period may have rolled over, or another first read finished, during the await.
    if (tally.day !== day || (!refresh && tally.state === 'read')) return;
    const trailQueries = spent.queries + (tally.queries - queries);
    tally.queries = refresh ? Math.max(tally.queries, trailQueries) : trailQueries;
    if (tally.month === month) {
      const trailBytes = Number(spent.bytes) + (tally.bytes - bytes);
      tally.bytes = refresh ? Math.max(tally.bytes, trailBytes) : trailBytes;
    }
    tally.state = 'read';
  }

  /** Reads the trail again in the background when the tally's figures are older than BUDGET_REFRESH_MS; a failed refresh keeps them. */
  private refresh(scope: BudgetScope, tally: Tally): void {
    if (!this.source || this.now() < tally.refreshAt) return;
    this.read(scope, tally, true).catch((error: unknown) => this.onError(error, scope));
  }

  /** Why a statement may not run now, or undefined. Unknown spending refuses (fail closed) and is read again shortly. */
  refusal(credentialId: string, limits: Limits): BudgetRefusal | undefined {
    const queries = limits.policy.queries_per_day;
    const bytes = Number(limits.policy.bytes_per_month);
    const own = queries > 0 || bytes > 0 ? this.over({ kind: 'credential', id: credentialId }, queries, bytes, `this credential’s policy “${limits.policy.name}”`, 'budget') : undefined;
    if (own || !limits.org) return own;
    const { terms, plan, id } = limits.org;
    // A limit the plan prices overage for is billed beyond, not enforced (spec §8: overage rate 0 means a hard cap).
    const planQueries = terms.overagePer1kQueries === 0 ? terms.queriesPerDay : 0;
    const planBytes = terms.overagePerGb === 0 ? Number(terms.bytesPerMonth) : 0;
    if (planQueries === 0 && planBytes === 0) return undefined;
    return this.over({ kind: 'org', id }, planQueries, planBytes, `the organization’s ${plan} plan`, 'budget.plan');
  }

  private over(scope: BudgetScope, queriesPerDay: number, bytesPerMonth: number, whose: string, rule: string): BudgetRefusal | undefined {
    const tally = this.tally(scope);
    if (tally.state === 'read') this.refresh(scope, tally);
    else {
      if (this.now() >= tally.retryAt) void this.prepare(scope);
      return {
        rule: `${rule}.unknown`,
        reason: `the gateway cannot read how much of the budget of ${whose} is spent right now, so it refuses statements until it can (rule ${rule}.unknown); retry in a few seconds`,
      };
    }
    if (queriesPerDay > 0 && tally.queries >= queriesPerDay) {
      return {
        rule: `${rule}.queries_per_day`,
        reason: `the daily budget of ${queriesPerDay} statements set by ${whose} is spent (rule ${rule}.queries_per_day); it resets at ${new Date(tally.day + DAY_MS).toISOString()}`,
      };
    }
    if (bytesPerMonth > 0 && tally.bytes >= bytesPerMonth) {
      return {
        rule: `${rule}.bytes_per_month`,
        reason: `the monthly budget of ${bytesPerMonth} bytes of results set by ${whose} is spent (rule ${rule}.bytes_per_month); it resets at ${new Date(nextMonthOf(tally.month)).toISOString()}`,
      };
    }
    return undefined;
  }

  /** What the scope spent this period as far as this process knows; undefined until the trail was read. */
  spentBy(scope: BudgetScope): { readonly queries: number; readonly bytes: number } | undefined {
    const tally = this.tally(scope);
    return tally.state === 'read' ? { queries: tally.queries, bytes: tally.bytes } : undefined;
  }

  /**
   * A statement was admitted to run: it counts from now, not from when it ends, so statements
   * pipelined or batched before the first of them ends cannot overrun the daily budget.
   */
  admit(scopes: readonly BudgetScope[]): void {
    for (const scope of scopes) this.tally(scope).queries += 1;
  }

  /** A statement of the credential ran and sent `bytes` to the client. */
  spent(scopes: readonly BudgetScope[], bytes: number): void {
    for (const scope of scopes) this.tally(scope).bytes += bytes;
  }
}

/** What a session asks of the budgets, for its credential. */
export interface SessionBudgets {
  prepare(credential: Pick<CredentialRow, 'credential_id' | 'project_id'>): Promise<void>;
  refusal(credential: Pick<CredentialRow, 'credential_id' | 'project_id'>, policy: PolicyRow): BudgetRefusal | undefined;
  /** A statement of the credential is about to run: one more against the daily budgets. */
  admit(credential: Pick<CredentialRow, 'credential_id' | 'project_id'>): void;
  /** A statement of the credential ran and sent `bytes`: against the monthly budgets. */
  spent(credential: Pick<CredentialRow, 'credential_id' | 'project_id'>, bytes: number): void;
  /** What the credential spent today and this month, when known. */
  spentBy(credential: Pick<CredentialRow, 'credential_id'>): { readonly queries: number; readonly bytes: number } | undefined;
}

/** A credential's organization and its plan's terms, when known. */
/** What of a plan's terms budgets enforce: its limits, and whether overage is priced beyond them. */
export type PlanLimits = Pick<PlanTerms, 'queriesPerDay' | 'bytesPerMonth' | 'overagePer1kQueries' | 'overagePerGb'>;

export type OrgOf = (projectId: string) => { readonly id: string; readonly plan: string; readonly terms: PlanLimits } | undefined;

/** Budgets as sessions use them: the credential's own scope and its organization's. */
export function sessionBudgets(budgets: Budgets, orgOf: OrgOf): SessionBudgets {
  // A project never moves to another organization: its credentials' scopes are kept once known.
  const known = new Map<string, readonly BudgetScope[]>();
  const scopes = (credential: Pick<CredentialRow, 'credential_id' | 'project_id'>): readonly BudgetScope[] => {
    const hit = known.get(credential.credential_id);
    if (hit) return hit;
    const org = orgOf(credential.project_id);
    if (!org) return [{ kind: 'credential', id: credential.credential_id }];
    const found: readonly BudgetScope[] = [{ kind: 'credential', id: credential.credential_id }, { kind: 'org', id: org.id }];
    known.set(credential.credential_id, found);
    return found;
  };
  return {
    prepare: async (credential) => void (await Promise.all(scopes(credential).map((scope) => budgets.prepare(scope)))),
    refusal: (credential, policy) => {
      const org = orgOf(credential.project_id);
      return budgets.refusal(credential.credential_id, { policy, ...(org ? { org } : {}) });
    },
    admit: (credential) => budgets.admit(scopes(credential)),
    spent: (credential, bytes) => budgets.spent(scopes(credential), bytes),
    spentBy: (credential) => budgets.spentBy({ kind: 'credential', id: credential.credential_id }),
  };
}
