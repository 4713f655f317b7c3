/**
 * CPU time of groups of processes over one run, from /proc/<pid>/stat. The pids of a group are read
 * again at every sample: backends connect during the run and may leave before its end. A process
 * seen at the start counts from its reading then; one that appeared later counts from zero (a
 * forked process starts with no CPU time). One that left before the end counts up to its last
 * sample, so a group whose processes come and go is under-counted by at most a sample interval.
 */
import { processCpu } from './proxy-servers.js';

const SAMPLE_MS = 250;

async function cpuOf(pid: number): Promise<number | undefined> {
  try {
    const usage = await processCpu(pid);
    return usage.user + usage.system;
  } catch {
    return undefined;
  }
}

export class CpuMeter {
  private readonly start = new Map<string, Map<number, number>>();
  private readonly last = new Map<string, Map<number, number>>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  constructor(private readonly groups: Record<string, () => Promise<number[]>>) {}

  /** Reads every group now, and then every SAMPLE_MS until stop(). */
  async begin(): Promise<void> {
    for (const name of Object.keys(this.groups)) {
      this.start.set(name, new Map());
      this.last.set(name, new Map());
    }
    await this.sample(true);
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample(false));
    }, SAMPLE_MS);
  }

  /** Stops sampling on the timer; end() still takes its last reading. */
  stop(): void {
    clearInterval(this.timer);
  }

  /** Microseconds of CPU each group used since begin(). */
  async end(): Promise<Record<string, number>> {
    this.stop();
    await this.sampling;
    await this.sample(false);
    const used: Record<string, number> = {};
    for (const [name, last] of this.last) {
      const start = this.start.get(name)!;
      used[name] = [...last].reduce((sum, [pid, cpu]) => sum + cpu - (start.get(pid) ?? 0), 0);
    }
    return used;
  }

  private async sample(first: boolean): Promise<void> {
    await Promise.all(
      Object.entries(this.groups).map(async ([name, pids]) => {
        const last = this.last.get(name)!;
        for (const pid of await pids().catch(() => [])) {
          const cpu = await cpuOf(pid);
          if (cpu === undefined) continue;
          if (first) this.start.get(name)!.set(pid, cpu);
          last.set(pid, cpu);
        }
      }),
    );
  }
}
