import { describe, expect, it } from 'vitest';
import type { Session } from '../../proxy/session.js';
import { SessionRegistry } from '../../proxy/session-registry.js';

const session = (name: string): Session => ({ name }) as unknown as Session;

describe('the session registry', () => {
  it('gives no two live sessions the same process id: a draw a live session holds is drawn again', () => {
    const registry = new SessionRegistry();
    const draws = [42, 42, 42, 7, 42];
    const draw = (): number => draws.shift()!;
    const first = session('first');
    const second = session('second');
    expect(registry.add(first, draw)).toBe(42);
    expect(registry.add(second, draw)).toBe(7);
    expect(registry.session(42)).toBe(first);
    expect(registry.session(7)).toBe(second);
    expect(registry.all()).toEqual([first, second]);
    // Once its holder left, the id may be drawn again.
    registry.remove(first, 42, undefined);
    const third = session('third');
    expect(registry.add(third, draw)).toBe(42);
    expect(registry.all()).toEqual([second, third]);
    registry.remove(second, 7, undefined);
    registry.remove(third, 42, undefined);
    expect(registry.all()).toEqual([]);
    expect(registry.session(42)).toBeUndefined();
  });
});
