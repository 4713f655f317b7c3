/**
 * The deployment's operators (docs/support.md): people who run the service, not members of any
 * organization. Each holds an operator token (`pgw_op_...`); the configuration keeps only its
 * SHA-256, named: PGWARD_OPERATOR_TOKENS=`alice:<sha256 hex>,bob:<sha256 hex>`.
 */
import { matchesHash, newSecret, sha256Hex } from '../crypto/tokens.js';

export const OPERATOR_TOKEN_PREFIX = 'pgw_op_';
export const OPERATOR_TOKEN = /^pgw_op_[A-Za-z0-9_-]{43}$/;
const NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export interface OperatorEntry {
  readonly name: string;
  readonly tokenHash: string;
}

/** Parses PGWARD_OPERATOR_TOKENS; throws naming the first bad entry. */
export function parseOperatorTokens(spec: string): OperatorEntry[] {
  const entries = spec
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const [name, hash, ...rest] = part.split(':');
      if (rest.length > 0 || !name || !NAME.test(name) || !hash || !/^[0-9a-f]{64}$/.test(hash)) throw new Error(`entry ${JSON.stringify(part.slice(0, 80))} is not name:sha256hex`);
      return { name, tokenHash: hash };
    });
  if (new Set(entries.map((e) => e.name)).size !== entries.length) throw new Error('names an operator twice');
  return entries;
}

/** The operator whose token this is, compared against every entry in constant time; undefined for any other token. */
export function operatorOf(token: string, entries: readonly OperatorEntry[]): string | undefined {
  let found: string | undefined;
  for (const entry of entries) if (matchesHash(token, entry.tokenHash) && found === undefined) found = entry.name;
  return found;
}

/** A new operator token and the PGWARD_OPERATOR_TOKENS entry that admits it. */
export function newOperatorToken(name: string): { token: string; entry: string } {
  if (!NAME.test(name)) throw new Error('an operator name is 1-63 characters of [a-z0-9_.-], starting with a letter or digit');
  const token = newSecret(OPERATOR_TOKEN_PREFIX);
  return { token, entry: `${name}:${sha256Hex(token)}` };
}
