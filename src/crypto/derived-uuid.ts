import { hash } from 'node:crypto';

/** A UUID (v4 layout) derived from a stable key, so a retried write carries the same event id and the store appends it once. */
export function derivedUuid(key: string): string {
  const hex = hash('sha256', key, 'hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  // One flat string: a template literal's rope of nine pieces would live as long as the id (an event's, until it is stored).
  return [hex.slice(0, 8), hex.slice(8, 12), `4${hex.slice(13, 16)}`, `${variant}${hex.slice(17, 20)}`, hex.slice(20, 32)].join('-');
}
