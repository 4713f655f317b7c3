export interface Hole {
  readonly proxyId: string;
  readonly bootEpoch: number;
  readonly from: bigint;
  readonly to: bigint;
  /** The project of the record that revealed the hole: the lost entries' own projects cannot be known. */
  readonly projectId: string;
}

interface Pending extends Hole {
  readonly dueAt: number;
}

export interface Range {
  readonly from: bigint;
  readonly to: bigint;
}

/** The runs of `range`'s sequence numbers that `present` lacks, in order. */
export function missingRuns(range: Range, present: ReadonlySet<bigint>): Range[] {
  const runs: Range[] = [];
  let start: bigint | undefined;
  for (let seq = range.from; seq <= range.to; seq++) {
    if (!present.has(seq)) start ??= seq;
    else if (start !== undefined) {
      runs.push({ from: start, to: seq - 1n });
      start = undefined;
    }
  }
  if (start !== undefined) runs.push({ from: start, to: range.to });
  return runs;
}

/** The parts of `part` that none of `ranges` covers, in order. */
function uncovered(part: Range, ranges: readonly Range[]): Range[] {
  let parts = [part];
  for (const range of ranges) {
    parts = parts.flatMap((p) => {
      if (range.to < p.from || p.to < range.from) return [p];
      const left: Range[] = [];
      if (p.from < range.from) left.push({ from: p.from, to: range.from - 1n });
      if (range.to < p.to) left.push({ from: range.to + 1n, to: p.to });
      return left;
    });
  }
  return parts;
}

/**
 * Follows each proxy's sequence (per boot epoch). A jump opens a hole; records arriving late and a
 * gap marker from the proxy covering it close it; a hole still open after the grace period is due
 * to be recorded by ingest.
 * The first record of a proxy that ingest sees (after a restart too) starts its sequence.
 */
export class HoleTracker {
  private readonly last = new Map<string, bigint>();
  private readonly explained = new Map<string, { from: bigint; to: bigint }[]>();
  private pending: Pending[] = [];

  constructor(private readonly graceMs: number) {}

  saw(proxyId: string, bootEpoch: number, seq: bigint, projectId: string, at = Date.now()): void {
    const key = `${proxyId}\0${bootEpoch}`;
    const last = this.last.get(key);
    if (last !== undefined && seq <= last) {
      this.fill(key, seq);
      return;
    }
    if (last !== undefined && seq > last + 1n) {
      // Only what no gap marker of the proxy explains already: a marker may cover part of the hole.
      for (const part of uncovered({ from: last + 1n, to: seq - 1n }, this.explained.get(key) ?? [])) {
        this.pending.push({ proxyId, bootEpoch, ...part, projectId, dueAt: at + this.graceMs });
      }
    }
    this.last.set(key, seq);
  }

  /** A record that arrived late closes its part of a pending hole. */
  private fill(key: string, seq: bigint): void {
    this.pending = this.pending.flatMap((hole) => {
      if (`${hole.proxyId}\0${hole.bootEpoch}` !== key || seq < hole.from || seq > hole.to) return [hole];
      const parts: Pending[] = [];
      if (hole.from < seq) parts.push({ ...hole, to: seq - 1n });
      if (seq < hole.to) parts.push({ ...hole, from: seq + 1n });
      return parts;
    });
  }

  explain(proxyId: string, bootEpoch: number, from: bigint, to: bigint): void {
    const key = `${proxyId}\0${bootEpoch}`;
    const ranges = this.explained.get(key) ?? [];
    ranges.push({ from, to });
    this.explained.set(key, ranges);
    // The part of each pending hole the marker covers is explained, also when it covers only part of it.
    this.pending = this.pending.flatMap((hole) =>
      `${hole.proxyId}\0${hole.bootEpoch}` !== key ? [hole] : uncovered(hole, [{ from, to }]).map((part) => ({ ...hole, ...part })),
    );
  }

  /** Holes that `due` gave out but that could not be recorded: due again at once, at the next sweep. */
  retry(holes: readonly Hole[], at = Date.now()): void {
    for (const hole of holes) this.pending.push({ ...hole, dueAt: at });
  }

  /** Holes whose grace period passed without an explaining marker; they leave the tracker (see `retry`). */
  due(at: number): Hole[] {
    const due = this.pending.filter((hole) => hole.dueAt <= at);
    this.pending = this.pending.filter((hole) => hole.dueAt > at);
    return due.map(({ dueAt: _dueAt, ...hole }) => hole);
  }
}
