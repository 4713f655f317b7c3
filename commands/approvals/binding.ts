import { canonicalBytes } from '../../src/crypto/canonical-json.js';
import { sha256 } from '../../src/crypto/sha256.js';

/** What an approval is bound to: running anything else under it is refused. */
export interface BindingFacts {
  /** The statement exactly as the client sent it. */
  readonly sql: string;
  /** Its parameters as sent (text or null; a binary one as hex); none for a simple query. */
  readonly params: readonly (string | null)[];
  /** Each parameter's format (0 text, 1 binary), for a statement bound on the wire's extended protocol; absent elsewhere. */
  readonly formats?: readonly number[];
  readonly credentialId: string | null;
  readonly policyId: string;
  readonly policyVersion: number;
}

/** SHA-256 (lowercase hex) of the RFC 8785 canonical JSON of the facts: one byte changed anywhere is another binding. */
export function bindingOf(facts: BindingFacts): string {
  return sha256(
    canonicalBytes({ sql: facts.sql, params: [...facts.params], ...(facts.formats ? { formats: [...facts.formats] } : {}), credential_id: facts.credentialId, policy_id: facts.policyId, policy_version: facts.policyVersion }),
  ).toString('hex');
}

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/**
 * The id of a binding's next request, after `previous` (null for its first): derived, so that two
 * callers that find the same request ended (or none) name the same new one, and only one of them
 * can record it. A binding has at most one open request: the next is made only once the last ended.
 */
export function nextApprovalId(binding: string, previous: string | null): `apr_${string}` {
  const digest = sha256(Buffer.from(`${binding}\n${previous ?? ''}`, 'utf8'));
  let out = '';
  for (let i = 0; i < 26; i++) out += ID_ALPHABET[digest[i]! & 31];
  return `apr_${out}`;
}
