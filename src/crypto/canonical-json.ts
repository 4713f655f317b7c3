/**
 * RFC 8785 (JCS) canonical JSON. Keys are sorted by UTF-16 code units, which is JavaScript's
 * default string order; strings and numbers use ECMAScript serialization, as JCS specifies.
 * Properties whose value is undefined are absent. Other values JSON cannot carry (functions,
 * bigint, non-finite numbers) are refused, so a hash never covers less than the caller meant.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Keys repeat across entries; their JSON form is computed once. Bounded, since keys come from schemas. */
const keyText = new Map<string, string>();
const KEY_CACHE_LIMIT = 10_000;

function quotedKey(key: string): string {
  let text = keyText.get(key);
  if (text === undefined) {
    text = JSON.stringify(key);
    if (keyText.size < KEY_CACHE_LIMIT) keyText.set(key, text);
  }
  return text;
}

/** JSON.stringify of a string, without its cost for the common string that needs no escape (no quote, backslash, control character or surrogate). */
export function canonicalString(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff)) return JSON.stringify(text);
  }
  return `"${text}"`;
}

export function canonicalize(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return canonicalString(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonical JSON cannot carry ${value}`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalize(value[i]);
        return `${out}]`;
      }
      const record = value as Record<string, unknown>;
      // Default sort compares UTF-16 code units, which is the order RFC 8785 prescribes.
      const keys = Object.keys(record).sort();
      let out = '{';
      let first = true;
      for (const key of keys) {
        const item = record[key];
        if (item === undefined) continue;
        out += `${first ? '' : ','}${quotedKey(key)}:${canonicalize(item)}`;
        first = false;
      }
      return `${out}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot carry a ${typeof value}`);
  }
}

export function canonicalBytes(value: unknown): Uint8Array {
  return Buffer.from(canonicalize(value), 'utf8');
}
