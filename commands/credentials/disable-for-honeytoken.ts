import type { EventStore } from '../../src/store/port.js';
import { handle, type Handled } from '../handle.js';
import { credential, type CredentialState } from './credential.js';

/**
 * The kill-switch, thrown by a tripped honeytoken that says so: the actor is the honeytoken. A
 * credential already disabled stays as it is (no event); a revoked one refuses (INVALID_STATE).
 */
export function disableForHoneytoken(
  store: Pick<EventStore, 'readStream' | 'append'>,
  credentialId: string,
  honeytokenId: string,
  correlationId: string,
): Promise<Handled<CredentialState>> {
  return handle(
    store,
    `credential-${credentialId}`,
    credential,
    { kind: 'update', status: 'disabled', reason: `a statement touched honeytoken ${honeytokenId}` },
    { correlationId, actor: `honeytoken:${honeytokenId}` },
  );
}
