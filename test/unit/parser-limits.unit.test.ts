import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { isStackOverflow, loadParser, MAX_TREE_DEPTH, parseStatements, treeDepth } from '../../proxy/policy/parser.js';

beforeAll(loadParser);

/** The depth of a value by plain recursion, for values shallow enough for it. */
function recursiveDepth(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  const objects = children.filter((child) => typeof child === 'object' && child !== null);
  return objects.length === 0 ? 0 : 1 + Math.max(...objects.map(recursiveDepth));
}

describe('parse tree limits', () => {
  it('measures the depth of any JSON value as recursion would, without recursing', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), (value) => {
        expect(treeDepth(value, 1_000)).toBe(recursiveDepth(value));
      }),
    );
  });

  it('measures a tree far deeper than the stack allows', () => {
    let deep: unknown = {};
    for (let i = 0; i < 200_000; i++) deep = { next: deep };
    expect(treeDepth(deep, 1e9)).toBe(200_000);
    expect(treeDepth(deep, 10)).toBe(11);
  });

  it('refuses a statement nested past the limit, and one past the grammar’s own stack, as too complex', () => {
    const chain = (n: number) => `select ${Array.from({ length: n }, () => 'id').join(' || ')} from orders`;
    expect(parseStatements(chain(400))).toMatchObject({ ok: true });
    expect(parseStatements(chain(600))).toEqual({ ok: false, reason: 'too_complex', what: `is nested more than ${MAX_TREE_DEPTH} levels deep` });
    expect(parseStatements(`select ${'('.repeat(12_000)}1${')'.repeat(12_000)}`)).toEqual({ ok: false, reason: 'too_complex', what: 'is nested too deeply for the SQL grammar' });
  });

  it('tells a stack overflow from other errors', () => {
    const overflow = (): number => overflow() + 1;
    let caught: unknown;
    try {
      overflow();
    } catch (error) {
      caught = error;
    }
    expect(isStackOverflow(caught)).toBe(true);
    expect(isStackOverflow(new RangeError('Invalid array length'))).toBe(false);
    expect(isStackOverflow(new Error('Maximum call stack size exceeded'))).toBe(false);
  });
});
