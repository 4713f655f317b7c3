/**
 * Rows each portal has handed out under a row cap, across every Execute and FETCH of it. Portals
 * made by Bind and cursors made by DECLARE share one namespace in PostgreSQL (FETCH reads a bound
 * portal, Execute reads a declared cursor), so one count serves both.
 *
 * Counts are taken when a request is sent, not when its rows come back: a client that pipelines
 * Executes must not see the cap's room twice. A request asks for at most the room left, so the
 * count is an upper bound on what the portal delivered (or it ended, and gives nothing more).
 *
 * A name made again (Bind, DECLARE) starts a new count at once, while the old count is kept
 * until the server confirms the new portal: a Bind or DECLARE that fails (a name that still
 * exists, a wrong parameter count) leaves the old portal in place. It cannot be read while the
 * transaction is aborted, and ROLLBACK drops it, but ROLLBACK TO SAVEPOINT brings it back: from
 * that request on, every unconfirmed old count counts again.
 */
export class PortalRows {
  private readonly portals = new Map<string, { taken: number; carried: number; made: number }>();
  private makes = 0;

  /** Rows the portal may still hand out under `cap`. */
  left(name: string, cap: number): number {
    const entry = this.portals.get(name);
    return entry ? Math.max(0, cap - entry.taken) : cap;
  }

  /** The portal was asked for `rows` more rows. */
  take(name: string, rows: number): void {
    const entry = this.portals.get(name);
    if (entry) entry.taken += rows;
    else this.portals.set(name, { taken: rows, carried: 0, made: 0 });
  }

  /** A ROLLBACK TO SAVEPOINT was sent: a portal whose remaking failed is alive again, with its old count. */
  revived(): void {
    for (const entry of this.portals.values()) {
      entry.taken += entry.carried;
      entry.carried = 0;
    }
  }

  /** A request to make portal `name` was sent; call the result when the server confirms it. */
  made(name: string): () => void {
    const made = ++this.makes;
    const entry = this.portals.get(name);
    if (!entry) {
      this.portals.set(name, { taken: 0, carried: 0, made });
    } else {
      entry.carried += entry.taken;
      entry.taken = 0;
      entry.made = made;
    }
    return () => {
      const current = this.portals.get(name);
      // A later make of the name is still unconfirmed: its old counts stay.
      if (current?.made === made) current.carried = 0;
    };
  }

  /** A request to close portal `name` (all portals: null) was sent; call the result when the server confirms it. */
  closed(name: string | null): () => void {
    const mark = this.makes;
    return () => {
      for (const [key, entry] of name === null ? this.portals : [[name, this.portals.get(name)] as const]) {
        if (!entry) continue;
        // Made again since the CLOSE was sent: the new one lives on, and only the old one's count goes.
        if (entry.made > mark) entry.carried = 0;
        else this.portals.delete(key);
      }
    };
  }
}
