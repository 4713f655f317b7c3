/**
 * Building blocks of fixed-order canonical JSON encoders: for an object of a known shape, writing
 * its members in JCS key order (sorted once, in the encoder's source) gives the bytes of
 * `canonicalize` without sorting keys per object. An encoder checks the shape first and leaves
 * any other object, or one with a member JSON.stringify would write otherwise, to `canonicalize`.
 */

/** A string, a boolean, a finite number or null: JSON.stringify writes it as canonicalize does, and JSON.parse gives it back. */
export function jsonScalar(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      // -0 is written 0, as canonicalize writes it.
      return Number.isFinite(value);
    default:
      return value === null;
  }
}

/**
 * True when JSON.stringify writes `value` as `canonicalize` does: a jsonScalar, or an array of them.
 * Objects are not: canonicalize sorts their keys and ignores a toJSON, where JSON.stringify keeps
 * their insertion order and calls it.
 */
export function jsonExact(value: unknown): boolean {
  if (jsonScalar(value)) return true;
  // An array's toJSON (an own one, or one added to Array.prototype) JSON.stringify would call.
  if (!Array.isArray(value) || (value as { toJSON?: unknown }).toJSON !== undefined) return false;
  for (let i = 0; i < value.length; i++) if (!jsonScalar(value[i])) return false;
  return true;
}

/**
 * The canonical JSON of `ordered`, an object whose members were written in JCS key order: JSON.stringify
 * writes it into one flat string, where joining member texts leaves a rope of pieces behind each
 * text (most of what an audit decision allocated). An undefined member is left out, as canonicalize
 * leaves it out, and so are the members named in `absent`: those the source object's shape lacks,
 * whose values `ordered` read through its prototype. Undefined when another member is not jsonExact.
 */
export function orderedText(ordered: Record<string, unknown>, absent: readonly string[] = []): string | undefined {
  for (const key of absent) ordered[key] = undefined;
  for (const key in ordered) {
    const value = ordered[key];
    if (value !== undefined && !jsonExact(value)) return undefined;
  }
  return JSON.stringify(ordered);
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
