/**
 * The Fanout contract. `make` returns two fan-outs sharing one medium (as two processes would), each
 * a fresh one: a message published on either reaches every subscriber of both.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Fanout } from '../../src/bus/fanout.js';
import { waitUntil } from './decision-bus.contract.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function fanoutContract(name: string, make: () => Promise<readonly [Fanout, Fanout]>): void {
  describe(`Fanout contract: ${name}`, () => {
    let open: Fanout[] = [];
    afterEach(async () => {
      await Promise.all(open.map((fanout) => fanout.close()));
      open = [];
    });
    async function pair(): Promise<readonly [Fanout, Fanout]> {
      const made = await make();
      open.push(...made);
      return made;
    }
    function record(fanout: Fanout): { seen: string[]; stop: () => void } {
      const seen: string[] = [];
      const stop = fanout.subscribe((data) => seen.push(decoder.decode(data)));
      return { seen, stop };
    }

    it('a message reaches every subscriber of both sides, the publisher’s own included, bytes intact, in order', async () => {
      const [a, b] = await pair();
      const a1 = record(a);
      const a2 = record(a);
      const b1 = record(b);
      a.publish(encoder.encode('one'));
      a.publish(encoder.encode('two ✓'));
      b.publish(encoder.encode('three'));
      await waitUntil('every subscriber to see three messages', () => [a1, a2, b1].every((r) => r.seen.length === 3));
      for (const r of [a1, a2, b1]) {
        expect(r.seen.filter((m) => m !== 'three')).toEqual(['one', 'two ✓']);
        expect(r.seen).toContain('three');
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect([a1, a2, b1].map((r) => r.seen.length)).toEqual([3, 3, 3]);
    });

    it('flushed() resolves once what was published before it went round: the publisher’s own subscribers have it', async () => {
      const [a] = await pair();
      const own = record(a);
      for (let i = 0; i < 50; i++) a.publish(encoder.encode(`note ${i}`));
      await a.flushed();
      expect(own.seen).toEqual(Array.from({ length: 50 }, (_, i) => `note ${i}`));
    });

    it('a subscriber that stopped gets nothing more; the others still do', async () => {
      const [a, b] = await pair();
      const gone = record(b);
      const kept = record(b);
      a.publish(encoder.encode('before'));
      await waitUntil('both to see the first', () => gone.seen.length === 1 && kept.seen.length === 1);
      gone.stop();
      a.publish(encoder.encode('after'));
      await waitUntil('the kept one to see the second', () => kept.seen.length === 2);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(gone.seen).toEqual(['before']);
      expect(kept.seen).toEqual(['before', 'after']);
    });

    it('nothing is kept for a subscriber that came later', async () => {
      const [a, b] = await pair();
      const early = record(b);
      a.publish(encoder.encode('early'));
      await waitUntil('the early subscriber to see it', () => early.seen.length === 1);
      const late = record(b);
      a.publish(encoder.encode('late'));
      await waitUntil('the late subscriber to see the second', () => late.seen.length === 1);
      expect(late.seen).toEqual(['late']);
      expect(early.seen).toEqual(['early', 'late']);
    });
  });
}
