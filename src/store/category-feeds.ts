/**
 * The feeds of one writer's category for every subscription of this process that reads it
 * (`pgward serve`'s pipeline: ingest's audit appends, for the audit projection and for
 * anomaly_windows). Each subscription takes its batches from a CommittedFeed of its own; the
 * batches themselves are shared.
 *
 * A subscription that also reads other categories (anomaly_windows reads `anomalyrules-` too)
 * takes a batch only when none of its other categories has an event beyond its position: the
 * batch follows the writer's category exactly, but an event of another category may have been
 * appended between. That is one small query (`countAfter` stops at the categories' newest event,
 * pgward.category_heads), instead of reading the batch's events back. When the other categories
 * moved, the store is read, as without a feed.
 */
import { CommittedFeed, recordedBatch, type CarriedEvent, type CommittedWriter } from './committed-feed.js';
import type { AppendResult, EventStore, RecordedEvent, SubscriptionFeed } from './port.js';

export class CategoryFeeds implements CommittedWriter {
  private readonly feeds: CommittedFeed[] = [];

  constructor(
    /** The writer's category, as subscriptions name it (e.g. `audit-`). */
    readonly streamPrefix: string,
    private readonly store: Pick<EventStore, 'countAfter'>,
    /** Of each feed (CommittedFeed's default unless given). */
    private readonly capacity?: number,
  ) {}

  /** A feed for a subscription of `streamPrefixes`; undefined when they do not name this category. */
  feedFor(streamPrefixes: readonly string[]): SubscriptionFeed | undefined {
    if (!streamPrefixes.includes(this.streamPrefix)) return undefined;
    const feed = new CommittedFeed(this.streamPrefix, this.capacity);
    this.feeds.push(feed);
    const others = streamPrefixes.filter((prefix) => prefix !== this.streamPrefix);
    if (others.length === 0) return feed;
    return {
      next: async (position) => {
        const batch = await feed.next(position);
        if (!batch) return undefined;
        return (await this.store.countAfter(position, { streamPrefixes: others })) === 0 ? batch : undefined;
      },
      onWake: (wake) => feed.onWake(wake),
    };
  }

  started(): void {
    for (const feed of this.feeds) feed.started();
  }

  settled(): void {
    for (const feed of this.feeds) feed.settled();
  }

  committed(stream: string, firstRevision: number, events: readonly CarriedEvent[], result: AppendResult): void {
    if (this.feeds.length === 0) return;
    const batch: readonly RecordedEvent[] | undefined = recordedBatch(this.streamPrefix, stream, firstRevision, events, result);
    if (batch) for (const feed of this.feeds) feed.hold(result.categoryBefore!, batch);
  }
}
