/** A value as JSON carries it: numbers, booleans and JSON documents natively, everything else in PostgreSQL's text form. */
export type JsonValue = string | number | boolean | null | { [key: string]: unknown } | unknown[];

const BOOL = 16;
const INTEGERS: ReadonlySet<number> = new Set([21, 23, 26]); // int2, int4, oid: exact in a double
const FLOATS: ReadonlySet<number> = new Set([700, 701]); // float4, float8
const JSON_TYPES: ReadonlySet<number> = new Set([114, 3802]); // json, jsonb

/** Decodes one text-format value by its type OID; int8 and numeric stay strings, so no digit is lost. */
export function decodeValue(text: string | null, typeOid: number): JsonValue {
  if (text === null) return null;
  if (typeOid === BOOL) return text === 't';
  if (INTEGERS.has(typeOid)) return Number(text);
  if (FLOATS.has(typeOid)) {
    const value = Number(text);
    return Number.isFinite(value) ? value : text;
  }
  if (JSON_TYPES.has(typeOid)) return JSON.parse(text) as JsonValue;
  return text;
}
