/**
 * The `hash` mask is HMAC-SHA-256 under a key of the project (RFC 2104), computed upstream from
 * built-in functions only: sha256(opad || sha256(ipad || value)). The mask expression carries the
 * key's two pads as constants, so every text that could show the rewritten statement to anyone
 * shows it through `withoutHashKey`.
 */

/** SHA-256's block size: a key is padded to it. */
const BLOCK_BYTES = 64;

/** A project's hash key as the mask expression uses it: its HMAC pads, hex. */
export interface HashKey {
  readonly inner: string;
  readonly outer: string;
}

/** The pads of a key of at most one block (a project's key is 32 random bytes). */
export function hashKeyOf(key: Buffer): HashKey {
  if (key.length < 16 || key.length > BLOCK_BYTES) throw new RangeError(`a hash key has 16 to ${BLOCK_BYTES} bytes`);
  const block = Buffer.alloc(BLOCK_BYTES);
  key.copy(block);
  const pad = (byte: number) => Buffer.from(block.map((b) => b ^ byte)).toString('hex');
  return { inner: pad(0x36), outer: pad(0x5c) };
}

/** What a shown text has in place of each pad. */
export const HASH_KEY_SHOWN = '<project hash key>';

/** `sql` with the key's pads replaced: as the rewritten text may be shown to an operator. */
export function withoutHashKey(sql: string, key: HashKey | undefined): string {
  if (!key) return sql;
  return sql.replaceAll(key.inner, HASH_KEY_SHOWN).replaceAll(key.outer, HASH_KEY_SHOWN);
}

/** A key of the right shape for measuring the mask expression's size; it masks nothing. */
export const SIZING_KEY: HashKey = hashKeyOf(Buffer.alloc(32));

/** Whether a policy masks any column with `hash`: then its statements need the project's key. */
export function masksWithHash(policy: { readonly masked_columns: Readonly<Record<string, string>> } | undefined): boolean {
  return policy !== undefined && Object.values(policy.masked_columns).includes('hash');
}
