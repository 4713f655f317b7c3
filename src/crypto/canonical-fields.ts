/**
 * Building blocks of fixed-order canonical JSON encoders: for an object of a known shape, writing
 * its members in JCS key order (sorted once, in the encoder's source) gives the bytes of
 * `canonicalize` without sorting keys per object. An encoder checks the shape first and leaves
 * any other object, or one with an undefined member, to `canonicalize`.
 */
import { canonicalize, canonicalString } from './canonical-json.js';

/** Stands for an undefined member, which the generic path omits: canonical JSON never holds a raw control character. */
export const UNDEFINED = '\u0000';

export function member(value: unknown): string {
  return value === undefined ? UNDEFINED : canonicalize(value);
}

/** A string or null member, as member writes it, without the generic dispatch for the common case. */
export function stringMember(value: unknown): string {
  if (typeof value === 'string') return canonicalString(value);
  return value === null ? 'null' : member(value);
}

/** A number or null member, as member writes it: a finite number is its ECMAScript string, as in JSON.stringify (-0 included). */
export function numberMember(value: unknown): string {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return value === null ? 'null' : member(value);
}

/** Key lists kept per shape: objects from one source share one insertion order, so most checks are a comparison. */
const SHAPES_KEPT = 8;

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A check that an object's own enumerable keys are exactly `fields`, plus any of `ignored` (members
 * the encoding leaves out), in any order: then the fixed-order text is what `canonicalize` writes.
 */
export function shapeCheck(fields: readonly string[], ignored: readonly string[] = []): (record: object) => boolean {
  const skipped: ReadonlySet<string> = new Set(ignored);
  const known: ReadonlySet<string> = new Set([...fields, ...ignored]);
  const seen: (readonly string[])[] = [];
  return (record) => {
    const own = Object.keys(record);
    if (seen.some((shape) => sameKeys(shape, own))) return true;
    const fits = own.every((key) => known.has(key)) && own.filter((key) => !skipped.has(key)).length === fields.length;
    if (fits && seen.length < SHAPES_KEPT) seen.push(own);
    return fits;
  };
}

/** `,"name":value` (a string or null member) in its key-order place when the shape has the member; nothing when it has not. */
export function presentMember(present: boolean, name: string, value: unknown): string {
  return present ? `,"${name}":${stringMember(value)}` : '';
}
