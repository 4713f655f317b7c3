/** Records with members edited at the edges of a schema, for property tests of hand-written checks. */
import fc from 'fast-check';

const DELETE = Symbol('delete');

/** A record from `base` with up to three of `fields` replaced by edge values or deleted, or joined by an unknown member. */
export function mutatedRecords(base: fc.Arbitrary<object>, fields: readonly string[], edges: readonly unknown[]): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(base, fc.array(fc.tuple(fc.constantFrom(...fields, 'extra', '__proto__'), fc.constantFrom<unknown>(...edges, DELETE)), { minLength: 1, maxLength: 3 }))
    .map(([record, changes]) => {
      const out: Record<string, unknown> = { ...record };
      for (const [key, value] of changes) {
        if (value === DELETE) delete out[key];
        else Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      }
      return out;
    });
}
