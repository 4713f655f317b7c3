import type pg from 'pg';
import { credentialsPastExpiry } from '../../queries/credentials.js';
import type { EventStore } from '../../src/store/port.js';
import { handle } from '../handle.js';
import { credential } from './credential.js';

/**
 * Records CredentialExpired once for each credential past its expires_at at `now`; enforcement does
 * not wait for it (reads and the proxy refuse a credential from the instant it expires). Candidates
 * come from the read model, but each is decided on its own stream, so a second run, or two at once,
 * append nothing more. Returns how many expiries this run recorded.
 */
export async function sweepExpiredCredentials(store: Pick<EventStore, 'readStream' | 'append'>, pool: pg.Pool, now: Date): Promise<number> {
  let recorded = 0;
  for (const credentialId of await credentialsPastExpiry(pool, now)) {
    const result = await handle(store, `credential-${credentialId}`, credential, { kind: 'expire' }, { correlationId: `expiry-sweep-${now.toISOString()}`, actor: 'system:expiry-sweep', now: () => now });
    recorded += result.recorded.length;
  }
  return recorded;
}
