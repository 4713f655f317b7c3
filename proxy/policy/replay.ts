/**
 * Replaying an audit trail under a candidate policy (pure): what a recorded statement's decision
 * was, what the candidate decides on the same text, whether that is a change, and the tally by
 * (old event, old rule) -> (new event, new rule) with a few examples of each.
 */
import { recordedRefusal } from '../decision-record.js';
import type { StatementDecision } from './hook.js';
import { isUpstreamRule } from '../upstream/failure.js';

/** The audit events of statements a policy decided; a replay reads only these. */
export const REPLAYED_EVENTS = ['query', 'masked', 'truncated', 'blocked', 'canary_tripped', 'budget_exhausted'] as const;

/** A statement of the trail, as a replay reads and shows it. */
export interface RecordedStatement {
  readonly seq: number;
  readonly id: string;
  readonly ts: string;
  readonly credential_id: string;
  readonly session_id: string;
  readonly source: string;
  readonly sql: string;
  readonly event: string;
  readonly decision_rule: string;
}

/** What a decision was, as the audit trail records it. */
export interface Outcome {
  readonly event: string;
  readonly decision_rule: string;
}

/**
 * Why a recorded statement is not re-decided: its outcome was the state of the moment, not the
 * policy's (a budget, the upstream or its catalog), its text was not kept whole, or its credential
 * (so its database) is not known.
 */
export type SkipReason = 'budget' | 'upstream' | 'abridged' | 'credential';

/** The marker an abridged audit text carries (proxy/audit-text.ts): the text that ran is not the one kept. */
const ABRIDGED = /\/\* pgward: [^*]*; sha256 of the whole text: [0-9a-f]{64} \*\//;

/** Whether a recorded statement can be re-decided, else why not. */
export function skipReason(statement: Pick<RecordedStatement, 'event' | 'decision_rule' | 'sql'>): SkipReason | undefined {
  if (statement.event === 'budget_exhausted') return 'budget';
  if (statement.decision_rule === 'catalog.unavailable' || isUpstreamRule(statement.decision_rule)) return 'upstream';
  if (ABRIDGED.test(statement.sql)) return 'abridged';
  return undefined;
}

/** The candidate's decision as the audit trail would record it (a tripped canary as the truth). */
export function decidedOutcome(decision: StatementDecision): Outcome {
  if (decision.action === 'allow') return { event: decision.event, decision_rule: decision.rule };
  const recorded = recordedRefusal(decision);
  return { event: recorded.event, decision_rule: recorded.rule };
}

/**
 * The decision a recorded outcome stands for: `ran` for a statement that was allowed and ran
 * (whatever happened while it ran: cut at the row cap, rolled back past the write cap or in
 * rehearsal, timed out, failed upstream), its event when the trail says whether it was masked,
 * else the refusal.
 */
function decisionClass(outcome: Outcome): string {
  if (outcome.event === 'truncated' || (outcome.event === 'blocked' && outcome.decision_rule === 'write_cap.exceeded')) return 'ran';
  if (outcome.event === 'query' || outcome.event === 'masked') return outcome.event;
  return `refused\u0000${outcome.event}\u0000${outcome.decision_rule}`;
}

/** Whether the candidate decides otherwise than the trail records: allowed against refused, masked against not, or another refusal. */
export function changed(recorded: Outcome, candidate: Outcome): boolean {
  const before = decisionClass(recorded);
  const after = decisionClass(candidate);
  return before === 'ran' ? after !== 'query' && after !== 'masked' : before !== after;
}

export interface ReplayGroup {
  readonly old: Outcome;
  readonly new: Outcome;
  readonly changed: boolean;
  count: number;
  readonly examples: RecordedStatement[];
}

/** Examples kept per group. */
export const EXAMPLES_PER_GROUP = 3;

/** The tally of one replayed page. */
export class ReplayTally {
  private readonly groups = new Map<string, ReplayGroup>();
  readonly skipped: Record<SkipReason, number> = { budget: 0, upstream: 0, abridged: 0, credential: 0 };
  changedCount = 0;
  unchangedCount = 0;

  skip(reason: SkipReason): void {
    this.skipped[reason] += 1;
  }

  add(statement: RecordedStatement, candidate: Outcome): void {
    const old = { event: statement.event, decision_rule: statement.decision_rule };
    const key = JSON.stringify([old.event, old.decision_rule, candidate.event, candidate.decision_rule]);
    let group = this.groups.get(key);
    if (!group) {
      group = { old, new: candidate, changed: changed(old, candidate), count: 0, examples: [] };
      this.groups.set(key, group);
    }
    group.count += 1;
    if (group.examples.length < EXAMPLES_PER_GROUP) group.examples.push(statement);
    if (group.changed) this.changedCount += 1;
    else this.unchangedCount += 1;
  }

  /** The groups, changed ones first, then by count. */
  sorted(): ReplayGroup[] {
    return [...this.groups.values()].sort((a, b) => Number(b.changed) - Number(a.changed) || b.count - a.count);
  }
}
