import type { EventStore } from '../../src/store/port.js';
import { handle, type Handled } from '../handle.js';
import { credential, type CredentialState } from './credential.js';

/**
 * The kill-switch, thrown by something that watches the credential (a tripped honeytoken, an
 * anomaly rule): `actor` names it. A credential already disabled stays as it is (no event); a
 * revoked one refuses (INVALID_STATE).
 */
export function disableCredentialFor(
  store: Pick<EventStore, 'readStream' | 'append'>,
  credentialId: string,
  by: { readonly actor: string; readonly reason: string; readonly correlationId: string },
): Promise<Handled<CredentialState>> {
  return handle(store, `credential-${credentialId}`, credential, { kind: 'update', status: 'disabled', reason: by.reason }, { correlationId: by.correlationId, actor: by.actor });
}

/** The kill-switch thrown by a tripped honeytoken that says so: the actor is the honeytoken. */
export function disableForHoneytoken(
  store: Pick<EventStore, 'readStream' | 'append'>,
  credentialId: string,
  honeytokenId: string,
  correlationId: string,
): Promise<Handled<CredentialState>> {
  return disableCredentialFor(store, credentialId, { actor: `honeytoken:${honeytokenId}`, reason: `a statement touched honeytoken ${honeytokenId}`, correlationId });
}
