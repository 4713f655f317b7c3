/**
 * Groups a stream of items into batches without waiting for a batch to fill: a pump reads ahead
 * into a bounded buffer while the consumer works, and each batch is whatever has arrived (at most `max`).
 */
export async function* batches<T>(source: AsyncIterable<T>, max: number): AsyncGenerator<T[]> {
  const iterator = source[Symbol.asyncIterator]();
  const buffer: T[] = [];
  let finished = false;
  let failure: unknown;
  let notify: (() => void) | undefined;
  let resume: (() => void) | undefined;

  const pump = (async () => {
    try {
      for (;;) {
        if (buffer.length >= max * 2) await new Promise<void>((resolve) => (resume = resolve));
        const next = await iterator.next();
        if (next.done) break;
        buffer.push(next.value);
        notify?.();
      }
    } catch (error) {
      failure = error;
    } finally {
      finished = true;
      notify?.();
    }
  })();

  try {
    for (;;) {
      if (buffer.length === 0) {
        if (finished) break;
        await new Promise<void>((resolve) => (notify = resolve));
        notify = undefined;
        continue;
      }
      const batch = buffer.splice(0, max);
      resume?.();
      resume = undefined;
      yield batch;
    }
    if (failure !== undefined) throw failure;
  } finally {
    resume?.();
    await iterator.return?.(undefined);
    await pump;
  }
}
