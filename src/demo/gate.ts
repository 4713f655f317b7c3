/**
 * Admission control for demo vends: at most `maxWaiting` vends are admitted at once, and they run
 * one after another, so each counts the live credentials with the previous one already among them.
 * Each process gates its own vends; a deployment with several API processes may overshoot the
 * ceiling by the vends running at one instant.
 */
export class VendGate {
  #admitted = 0;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly maxWaiting: number) {}

  /** Runs `work` after every exclusive work admitted before it. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(work, work);
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /** Like exclusive, or undefined (nothing run) while `maxWaiting` vends are already admitted. */
  admit<T>(work: () => Promise<T>): Promise<T> | undefined {
    if (this.#admitted >= this.maxWaiting) return undefined;
    this.#admitted++;
    return this.exclusive(work).finally(() => this.#admitted--);
  }
}
