/**
 * The approval requests of every project as they change, for the API's live streams
 * (GET …/approvals/events): one subscription of the process to the `approval-` streams, woken by
 * the store's notifications (never a poll), shared by every watcher. It starts with the first
 * watcher, at the store's head: a watcher hears every change committed after `watch` resolved.
 */
import { evolveApproval, type ApprovalRow } from '../../projections/approvals.js';
import type { EventStore, RecordedEvent, Subscription } from '../store/port.js';

const PREFIX = 'approval-';

/** One stream's ears: each change of a request of its project, and the end of the feed (a failed subscription). */
export interface ApprovalWatcher {
  change(row: ApprovalRow): void;
  end(): void;
}

export class ApprovalFeed {
  private readonly watchers = new Map<string, Set<ApprovalWatcher>>();
  private subscription: Promise<Subscription> | undefined;

  constructor(
    private readonly store: Pick<EventStore, 'subscribe' | 'readStream' | 'headPosition'>,
    /** Hears a failure of the subscription; every watcher is then ended, and the next watch starts it again. */
    private readonly onFailure: (error: unknown) => void,
  ) {}

  /** Tells `watcher` each request of `projectId` as each of its events leaves it; resolves, with the unwatch function, once the feed is live. */
  async watch(projectId: string, watcher: ApprovalWatcher): Promise<() => void> {
    let listeners = this.watchers.get(projectId);
    if (!listeners) this.watchers.set(projectId, (listeners = new Set()));
    listeners.add(watcher);
    const unwatch = () => {
      listeners.delete(watcher);
      if (listeners.size === 0 && this.watchers.get(projectId) === listeners) this.watchers.delete(projectId);
    };
    try {
      await (this.subscription ??= this.start());
    } catch (error) {
      unwatch();
      throw error;
    }
    return unwatch;
  }

  /** How many watchers there are now, over every project. */
  get size(): number {
    let count = 0;
    for (const listeners of this.watchers.values()) count += listeners.size;
    return count;
  }

  async close(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    await (await subscription?.catch(() => undefined))?.close();
  }

  private async start(): Promise<Subscription> {
    const started = this.store.subscribe(await this.store.headPosition(), { streamPrefixes: [PREFIX] });
    void this.follow(started);
    return started;
  }

  private async follow(subscription: Subscription): Promise<void> {
    try {
      for await (const event of subscription) {
        if (this.watchers.size === 0) continue;
        const row = await this.rowAt(event);
        for (const watcher of (row && this.watchers.get(row.project_id)) ?? []) watcher.change(row!);
      }
    } catch (error) {
      if (this.subscription === undefined) return;
      this.subscription = undefined;
      this.onFailure(error);
      const ended = [...this.watchers.values()].flatMap((listeners) => [...listeners]);
      this.watchers.clear();
      for (const watcher of ended) watcher.end();
    }
  }

  /** The request as of `event`: a request's first event makes its row; a later one folds its stream up to it. */
  private async rowAt(event: RecordedEvent): Promise<ApprovalRow | null> {
    if (event.revision === 0) return evolveApproval(undefined, event);
    const events = await this.store.readStream(event.stream);
    return events.filter((e) => e.revision <= event.revision).reduce<ApprovalRow | null>((row, e) => evolveApproval(row ?? undefined, e), null);
  }
}
