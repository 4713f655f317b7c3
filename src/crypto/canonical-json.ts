/**
 * RFC 8785 (JCS) canonical JSON. Keys are sorted by UTF-16 code units, which is JavaScript's
 * default string order; strings and numbers use ECMAScript serialization, as JCS specifies.
 * Properties whose value is undefined are absent. Other values JSON cannot carry (functions,
 * bigint, non-finite numbers) are refused, so a hash never covers less than the caller meant.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function canonicalize(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonical JSON cannot carry ${value}`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map(canonicalize).join(',')}]`;
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalize(v)}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot carry a ${typeof value}`);
  }
}

export function canonicalBytes(value: unknown): Uint8Array {
  return Buffer.from(canonicalize(value), 'utf8');
}
