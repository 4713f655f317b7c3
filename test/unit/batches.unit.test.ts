import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batches } from '../../src/store/batches.js';

async function* from<T>(items: T[], pauseEvery = 0): AsyncGenerator<T> {
  for (let i = 0; i < items.length; i++) {
    if (pauseEvery > 0 && i % pauseEvery === 0) await new Promise((r) => setTimeout(r, 1));
    yield items[i]!;
  }
}

describe('batches', () => {
  it('keeps every item, in order, in batches of at most max', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer(), { maxLength: 300 }), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 20 }), async (items, max, pause) => {
        const out: number[][] = [];
        for await (const batch of batches(from(items, pause), max)) out.push(batch);
        expect(out.flat()).toEqual(items);
        for (const batch of out) {
          expect(batch.length).toBeGreaterThan(0);
          expect(batch.length).toBeLessThanOrEqual(max);
        }
      }),
      { numRuns: 50 },
    );
  });

  it('passes on the source’s failure after the items before it', async () => {
    async function* failing(): AsyncGenerator<number> {
      yield 1;
      yield 2;
      throw new Error('source broke');
    }
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const batch of batches(failing(), 10)) seen.push(...batch);
      })(),
    ).rejects.toThrow('source broke');
    expect(seen).toEqual([1, 2]);
  });
});
