/** What the benchmarks share: settings from the environment, per-round results and their medians, tables. */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Mode, Outcome } from './proxy-pgbench.js';
import { findBinaries, run, serverUser, Teardown, type Binaries } from './proxy-servers.js';

export const PGBOUNCER = '/usr/sbin/pgbouncer';

export interface Workspace {
  readonly binaries: Binaries;
  /** The user PostgreSQL and PgBouncer run as, when the bench runs as root. */
  readonly runAs: ReturnType<typeof serverUser>;
  /** A temp dir, removed by the teardown. */
  readonly dir: string;
  /** Where pgbench writes its --log files. */
  readonly logs: string;
}

/** What every pgbench benchmark starts with: PgBouncer present, the PostgreSQL binaries, a temp dir; the machine logged. */
export async function prepareWorkspace(name: string, teardown: Teardown, log: (line: string) => void): Promise<Workspace> {
  if (!existsSync(PGBOUNCER)) throw new Error(`${PGBOUNCER} is missing: install the Debian package pgbouncer`);
  const binaries = await findBinaries();
  const runAs = serverUser();
  const dir = await mkdtemp(join(tmpdir(), `pgward-${name}-`));
  teardown.add(() => rm(dir, { recursive: true, force: true }));
  if (runAs) await chmod(dir, 0o711);
  const logs = join(dir, 'logs');
  await mkdir(logs);
  log(`machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim()}), Node ${process.version}, load average ${loadAverage()}`);
  log(`PostgreSQL binaries: ${binaries.source}; ${(await run(binaries.pgbench, ['--version'])).trim()}`);
  return { binaries, runAs, dir, logs };
}

export const loadAverage = (): string => loadavg().map((l) => l.toFixed(2)).join(' ');

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

/** The settings every pgbench benchmark reads: PGWARD_BENCH_SECONDS, _WARMUP_SECONDS, _ROUNDS, _MODES, _CLIENTS. */
export function benchSettings(allModes: readonly Mode[]): { seconds: number; warmupSeconds: number; rounds: number; modes: readonly Mode[]; clients: readonly number[] } {
  return {
    seconds: wholeNumber('PGWARD_BENCH_SECONDS', 'seconds', 1, 5),
    // Before the rounds, each target runs each mode unmeasured for this long: JIT compilation, caches and pools are warm when measuring starts.
    warmupSeconds: wholeNumber('PGWARD_BENCH_WARMUP_SECONDS', 'seconds', 0, 3),
    rounds: wholeNumber('PGWARD_BENCH_ROUNDS', 'rounds', 1, 3),
    modes: subset('PGWARD_BENCH_MODES', allModes),
    clients: subset('PGWARD_BENCH_CLIENTS', [1, 10, 50]),
  };
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

export interface Plan<Target extends string> {
  readonly rounds: number;
  readonly modes: readonly Mode[];
  readonly clients: readonly number[];
  readonly targets: readonly Target[];
  /** Whether the target can run the mode at all (PgBouncer before 1.21 cannot serve prepared statements). */
  serves(target: Target, mode: Mode): boolean;
}

export interface Run<Target extends string> {
  readonly round: number;
  readonly mode: Mode;
  readonly clients: number;
  readonly target: Target;
  /** "[n/total] round r/R" for the log line. */
  readonly progress: string;
}

/**
 * Every run of the plan, rounds outermost and targets innermost, so each round compares the
 * targets under the same conditions; a run the target cannot serve is recorded as n/a.
 */
export async function eachRun<Target extends string>(plan: Plan<Target>, results: Results<Target>, signal: AbortSignal, run: (run: Run<Target>) => Promise<Outcome>): Promise<void> {
  const total = plan.rounds * plan.modes.length * plan.clients.length * plan.targets.length;
  let done = 0;
  for (let round = 1; round <= plan.rounds; round++) {
    for (const mode of plan.modes) {
      for (const clients of plan.clients) {
        for (const target of plan.targets) {
          signal.throwIfAborted();
          done += 1;
          if (!plan.serves(target, mode)) {
            results.add(mode, clients, target, undefined);
            continue;
          }
          results.add(mode, clients, target, await run({ round, mode, clients, target, progress: `[${done}/${total}] round ${round}/${plan.rounds}` }));
        }
      }
    }
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

/**
 * Runs a benchmark: Ctrl-C aborts it through `signal`, and its teardown runs whatever happens. An
 * error sets exit code 1.
 */
export function runBench(name: string, bench: (teardown: Teardown, signal: AbortSignal) => Promise<void>): void {
  const main = async (): Promise<void> => {
    const teardown = new Teardown();
    const abort = new AbortController();
    const interrupt = (): void => abort.abort(new Error('interrupted'));
    process.on('SIGINT', interrupt);
    process.on('SIGTERM', interrupt);
    try {
      await bench(teardown, abort.signal);
    } finally {
      console.log(`[${name}] cleaning up`);
      await teardown.run((error) => console.error(`[${name}] cleanup step failed:`, error));
      process.off('SIGINT', interrupt);
      process.off('SIGTERM', interrupt);
    }
  };
  main().catch((error: unknown) => {
    console.error(`[${name}] failed:`, error);
    process.exitCode = 1;
  });
}
