/** Beyond this many credentials, a write sweeps out those whose window has closed (once a window at most). */
const SWEEP_OVER = 1_024;

/**
 * When each credential last wrote, as one proxy process knows it: its own sessions' writes, and
 * those the invalidation fan-out reports from the hosted MCP and other proxies. Read routing keeps
 * every session of a credential on the primary while its window is open (docs/replicas.md).
 */
export class RecentWrites {
  private readonly wroteAt = new Map<string, number>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  constructor(
    readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `credentialId` wrote (or may have: a statement that is not a pure read ran or ended) now. */
  wrote(credentialId: string): void {
    const now = this.now();
    if (this.wroteAt.size >= SWEEP_OVER && now - this.sweptAt >= this.windowMs) {
      this.sweptAt = now;
      for (const [id, at] of this.wroteAt) if (now - at >= this.windowMs) this.wroteAt.delete(id);
    }
    this.wroteAt.set(credentialId, now);
  }

  /** Milliseconds since the credential last wrote; infinite when it did not within the window. */
  msSince(credentialId: string): number {
    const at = this.wroteAt.get(credentialId);
    return at === undefined ? Number.POSITIVE_INFINITY : this.now() - at;
  }
}
