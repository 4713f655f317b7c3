/** What the benchmarks share: settings from the environment, per-round results and their medians, tables. */
import type { Mode, Outcome } from './proxy-pgbench.js';

export const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
export const ratio = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** A whole number of at least `min` from the environment, or `fallback` when the variable is unset or empty. */
export function wholeNumber(variable: string, what: string, min: number, fallback: number): number;
export function wholeNumber(variable: string, what: string, min: number, fallback?: number): number | undefined;
export function wholeNumber(variable: string, what: string, min: number, fallback?: number): number | undefined {
  const given = process.env[variable];
  if (given === undefined || given === '') return fallback;
  const value = Number(given);
  if (!Number.isInteger(value) || value < min) throw new Error(`${variable} must be a whole number of ${what} (at least ${min}), not ${JSON.stringify(given)}`);
  return value;
}

/** A comma-separated subset from the environment (for quick partial runs), or all of `all`. */
export function subset<T extends string | number>(variable: string, all: readonly T[]): readonly T[] {
  const given = process.env[variable];
  if (!given) return all;
  const chosen = all.filter((item) => given.split(',').map((part) => part.trim()).includes(String(item)));
  if (chosen.length === 0) throw new Error(`${variable} must list some of ${all.join(', ')}, not ${JSON.stringify(given)}`);
  return chosen;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export type Succeeded = Extract<Outcome, { ok: true }>;
/** A figure of one round from the outcomes of the targets asked for, in that order. */
export type Pick = (...outcomes: Succeeded[]) => number;

/** Outcomes of one (mode, clients, target) by round; undefined where the target cannot serve the mode. */
export class Results<Target extends string> {
  private readonly cells = new Map<string, (Outcome | undefined)[]>();

  private key(mode: Mode, clients: number, target: Target): string {
    return `${mode}/${clients}/${target}`;
  }

  add(mode: Mode, clients: number, target: Target, outcome: Outcome | undefined): void {
    const key = this.key(mode, clients, target);
    this.cells.set(key, [...this.rounds(mode, clients, target), outcome]);
  }

  rounds(mode: Mode, clients: number, target: Target): readonly (Outcome | undefined)[] {
    return this.cells.get(this.key(mode, clients, target)) ?? [];
  }

  /** `pick` applied to each round's outcomes, for the rounds where all of `targets` succeeded. */
  perRound(mode: Mode, clients: number, targets: readonly Target[], pick: Pick): number[] {
    const perTarget = targets.map((target) => this.rounds(mode, clients, target));
    const values: number[] = [];
    for (let round = 0; round < (perTarget[0]?.length ?? 0); round++) {
      const outcomes = perTarget.map((rounds) => rounds[round]);
      if (outcomes.every((outcome) => outcome?.ok)) values.push(pick(...(outcomes as Succeeded[])));
    }
    return values;
  }

  /** Median over rounds of `pick` applied to each round's outcomes, counting only rounds where all of `targets` succeeded. */
  median(mode: Mode, clients: number, targets: readonly Target[], pick: Pick): number {
    return median(this.perRound(mode, clients, targets, pick));
  }

  /** 'n/a' when the target cannot serve the mode, 'fail' when a round failed, else undefined. */
  status(mode: Mode, clients: number, target: Target): 'n/a' | 'fail' | undefined {
    const rounds = this.rounds(mode, clients, target);
    if (rounds.every((outcome) => outcome === undefined)) return 'n/a';
    return rounds.some((outcome) => outcome && !outcome.ok) ? 'fail' : undefined;
  }

  /** The median figure of `targets` as a table cell: 'n/a' or 'fail' where that is their status. */
  cell(mode: Mode, clients: number, targets: readonly Target[], pick: Pick, format: (n: number) => string): string {
    const status = targets.map((target) => this.status(mode, clients, target)).find((s) => s !== undefined);
    return status ?? format(this.median(mode, clients, targets, pick));
  }

  /** One line per failed run, for the report. */
  failures(modes: readonly Mode[], clientCounts: readonly number[], targets: readonly Target[]): string[] {
    return modes.flatMap((mode) =>
      clientCounts.flatMap((clients) =>
        targets.flatMap((target) => this.rounds(mode, clients, target).flatMap((outcome, round) => (outcome && !outcome.ok ? [`  round ${round + 1} ${mode} c=${clients} ${target}: ${outcome.reason}`] : []))),
      ),
    );
  }
}

export function describeOutcome(outcome: Outcome | undefined): string {
  if (!outcome) return 'n/a';
  if (!outcome.ok) return `failed (${outcome.reason})`;
  const latency = outcome.latency ? `, p50 ${number.format(outcome.latency.p50)} µs, p99 ${number.format(outcome.latency.p99)} µs` : '';
  return `${number.format(outcome.tps)} tps${latency}`;
}

/** A plain-text table: the first two columns left-aligned, the rest right-aligned. */
export function table(header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]): string => cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export const verdict = (ok: boolean): string => (ok ? 'PASS' : 'BELOW');
